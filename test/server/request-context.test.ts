/**
 * One RequestContext per HTTP request (server/request-context.ts): every hook and the route find the same object,
 * the engine's arrival time is fixed once, and a body re-entered from /invocations is counted once, under /invocations.
 */
import { describe, expect, test } from "bun:test";
import { RequestContexts } from "../../src/server/request-context.ts";
import { testServer } from "./helpers.ts";

describe("RequestContexts", () => {
  test("each request has one context, found again by every later stage; another request has its own", () => {
    const contexts = new RequestContexts();
    const a = new Request("http://localhost/v1/completions", { headers: { "x-request-id": "abc" } });
    const b = new Request("http://localhost/v1/completions");
    expect(contexts.find(a)).toBeUndefined();
    const context = contexts.of(a);
    expect(contexts.of(a)).toBe(context);
    expect(contexts.find(a)).toBe(context);
    expect(contexts.of(b)).not.toBe(context);
    expect(context.requestIdHeader).toBe("abc");
    expect(contexts.of(b).requestIdHeader).toBeNull();
    expect(context.clientSignal).toBe(a.signal);
  });

  test("the arrival time is fixed by its first read; the raw body is parsed from the text kept", async () => {
    const context = new RequestContexts().of(new Request("http://localhost/"));
    const first = context.arrivalMs;
    await Bun.sleep(5);
    expect(context.arrivalMs).toBe(first);
    expect(context.rawBody()).toBeUndefined();
    context.rawBodyText = '{"n": "two"}';
    expect(context.rawBody()).toEqual({ n: "two" });
  });
});

describe("through the app", () => {
  test("a forwarded /invocations body reaches the HTTP metrics once, as /invocations", async () => {
    const events: { handler: string | null; status: number }[] = [];
    const s = testServer({ onHttpResponse: (e) => void events.push({ handler: e.handler, status: e.status }) });
    const res = await s.call("POST", "/invocations", { prompt: "Hi", max_tokens: 2 });
    expect(res.status).toBe(200);
    await res.text();
    await Bun.sleep(10);
    expect(events).toEqual([{ handler: "/invocations", status: 200 }]);
  });

  test("the response id comes from the request's X-Request-Id header", async () => {
    const s = testServer();
    const body = (await (await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 2 }, { "x-request-id": "from-header" })).json()) as { id: string };
    expect(body.id).toBe("cmpl-from-header");
    expect(s.fake.requests.at(-1)!.externalRequestId).toBe("cmpl-from-header");
  });
});
