/**
 * server/single-model-keep-alive.ts with a stand-in app and engine (the compiled server runs the real ones:
 * e2e/ollama-keep-alive.test.ts): keep_alive 0 stops the engine once the answer's body is read, the next POST starts
 * it and carries the wait, a GET never starts it, a positive keep_alive unloads only when --keep-alive was given.
 */
import { describe, expect, test } from "bun:test";
import { LOAD_MS_HEADER, routedRequests } from "../../src/server/model-router.ts";
import { keepSingleModel } from "../../src/server/single-model-keep-alive.ts";

function stand(defaultKeepAliveMs: number | null) {
  const events: string[] = [];
  const seen: Request[] = [];
  const app = {
    handle: async (request: Request) => {
      seen.push(request);
      return new Response(`ok ${request.method} ${new URL(request.url).pathname}`);
    },
  };
  const engine = {
    stop: async () => { events.push("stop"); },
    start: async () => { await Bun.sleep(5); events.push("start"); },
  };
  const keeper = keepSingleModel(app, engine, { name: "m", defaultKeepAliveMs, log: (line) => events.push(line) });
  return { events, seen, keeper };
}

const post = (path: string, body: unknown) => new Request(`http://x${path}`, { method: "POST", body: JSON.stringify(body) });
const settle = () => Bun.sleep(20);

describe("one model's engine under Ollama's keep_alive", () => {
  test("keep_alive 0 unloads after the answer is read; the next POST loads it and carries the wait; GETs never load it", async () => {
    const s = stand(null);
    const k = await s.keeper;
    expect(k.loaded()).toBe(true);
    const first = await k.handle(post("/api/generate", { model: "m", prompt: "", keep_alive: 0 }));
    // the lease is held until the body is read
    await settle();
    expect(s.events).not.toContain("stop");
    expect(routedRequests.has(s.seen[0]!)).toBe(true);
    expect(await first.text()).toBe("ok POST /api/generate");
    await settle();
    expect(s.events).toContain("stop");
    expect(s.events.some((l) => l.includes("unloading model m (keep_alive 0)"))).toBe(true);
    expect(k.loaded()).toBe(false);

    const ps = await k.handle(new Request("http://x/api/ps"));
    expect(await ps.json()).toEqual({ models: [] });
    const health = new Request("http://x/health");
    await (await k.handle(health)).text();
    // a GET reaches the app as it came, and loads nothing
    expect(s.seen.at(-1)).toBe(health);
    expect(s.events).not.toContain("start");

    const again = await k.handle(post("/v1/completions", { prompt: "x" }));
    expect(s.events).toContain("start");
    expect(Number(again.headers.get(LOAD_MS_HEADER))).toBeGreaterThan(0);
    expect(Number(s.seen.at(-1)!.headers.get(LOAD_MS_HEADER))).toBeGreaterThan(0);
    await again.text();
    await settle();
    // no keep_alive and no --keep-alive: it stays
    expect(k.loaded()).toBe(true);
  });

  test("without --keep-alive a positive keep_alive leaves the model; with it, the model goes when idle that long", async () => {
    const kept = stand(null);
    const k1 = await kept.keeper;
    await (await k1.handle(post("/api/chat", { model: "m", messages: [], keep_alive: 0.05 }))).text();
    await Bun.sleep(120);
    expect(k1.loaded()).toBe(true);

    const timed = stand(60_000);
    const k2 = await timed.keeper;
    await (await k2.handle(post("/api/chat", { model: "m", messages: [], keep_alive: 0.05 }))).text();
    await Bun.sleep(120);
    expect(k2.loaded()).toBe(false);
    expect(timed.events).toContain("stop");
  });

  test("an invalid keep_alive leaves the model as it is (the route answers Ollama's 400)", async () => {
    const s = stand(null);
    const k = await s.keeper;
    await (await k.handle(post("/api/generate", { model: "m", prompt: "", keep_alive: "5 minutes" }))).text();
    await settle();
    expect(k.loaded()).toBe(true);
  });
});
