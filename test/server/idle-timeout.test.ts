/**
 * The HTTP idle timeout closes silent keep-alive connections, never one whose request is still being served: a long
 * prompt's prefill sends no byte for longer than the timeout and must still get its answer.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { listenHttp, type HttpListener } from "../../src/server/http-listener.ts";
import { testServer, readSse, type Json } from "./helpers.ts";

let listener: HttpListener | null = null;
afterEach(() => {
  listener?.closeAll();
  listener = null;
  delete process.env.FENNEC_HTTP_IDLE_TIMEOUT_S;
});

/** A listener in front of the fake orchestrator whose first token comes after ~2 x stepDelayMs. */
async function listen(idleTimeoutS: number, stepDelayMs: number): Promise<string> {
  const { app } = testServer({}, { stepDelayMs });
  listener = await listenHttp((r) => app.handle(r), { hostname: "127.0.0.1", port: 0, idleTimeoutS, log: () => {} });
  return `http://127.0.0.1:${listener.port}`;
}

/** ms until the server closes a raw connection that sent one GET /health and then stays silent */
function idleCloseMs(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const socket = connect(port, "127.0.0.1");
    socket.on("error", reject);
    socket.resume(); // read the answer, so that the close is seen
    socket.on("close", () => resolve(performance.now() - start));
    socket.write("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  });
}

describe("HTTP idle timeout", () => {
  test("a stream silent for longer than the idle timeout before its first token is answered in full", async () => {
    const base = await listen(0.5, 800);
    const started = performance.now();
    const response = await fetch(`${base}/v1/chat/completions`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content: "hi" }], max_tokens: 2, stream: true }),
    });
    expect(response.status).toBe(200);
    const events = await readSse(response);
    // the fake sleeps once before scheduling and once per token: over 3 idle timeouts of silence before the first byte
    expect(performance.now() - started).toBeGreaterThan(1500);
    expect(events.at(-1)).toBe("[DONE]");
    const finish = (events as Json[]).filter((e) => e !== ("[DONE]" as unknown)).map((e) => e.choices?.[0]?.finish_reason).filter((r) => r);
    expect(finish).toEqual(["length"]);
  }, 20000);

  test("a non-streaming answer that takes longer than the idle timeout is delivered", async () => {
    const base = await listen(0.5, 800);
    const response = await fetch(`${base}/v1/completions`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "fake-model", prompt: "hi", max_tokens: 2 }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as Json;
    expect(body.usage.completion_tokens).toBe(2);
  }, 20000);

  test("an idle keep-alive connection is still closed after the timeout", async () => {
    await listen(0.5, 1);
    const ms = await idleCloseMs(listener!.port);
    expect(ms).toBeGreaterThan(400);
    expect(ms).toBeLessThan(5000);
  }, 20000);

  test("FENNEC_HTTP_IDLE_TIMEOUT_S overrides the caller's timeout; a bad value is an error", async () => {
    process.env.FENNEC_HTTP_IDLE_TIMEOUT_S = "0.5";
    await listen(255, 1);
    expect(await idleCloseMs(listener!.port)).toBeLessThan(5000);
    listener!.closeAll();
    listener = null;
    process.env.FENNEC_HTTP_IDLE_TIMEOUT_S = "soon";
    await expect(listen(255, 1)).rejects.toThrow("FENNEC_HTTP_IDLE_TIMEOUT_S");
  }, 20000);
});
