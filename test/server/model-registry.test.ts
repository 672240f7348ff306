/**
 * The model registry with fake models (a real engine per model is the e2e test's): loads on demand, the LRU and byte
 * budgets, Ollama's keep_alive (0, negative, durations), the bounded queue during a load, and a failed load that is
 * that model's error only.
 */
import { describe, expect, test } from "bun:test";
import {
  isEviction, ModelLoadError, ModelNotFoundError, ModelOverloadedError, ModelRegistry, type ModelSpec, type RegistryOptions, type UnloadReason,
} from "../../src/server/model-registry.ts";

class FakeModel {
  stopped = false;
  healthy = true;
  /** why it was unloaded: a model evicted for another keeps its front end (serve-models.ts) */
  reason: UnloadReason | undefined;
  constructor(readonly name: string, readonly generation: number) {}
  async shutdown(reason?: UnloadReason): Promise<void> { this.stopped = true; this.reason = reason; }
  isHealthy(): boolean { return this.healthy; }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Harness {
  registry: ModelRegistry<FakeModel>;
  lines: string[];
  loads: string[];
  /** models whose load is held until release(name) */
  gate: Map<string, () => void>;
}

function harness(names: string[], options: Partial<RegistryOptions<FakeModel>> = {}, specs: Partial<Record<string, Partial<ModelSpec<FakeModel>>>> = {}, hold: string[] = []): Harness {
  const lines: string[] = [];
  const loads: string[] = [];
  const gate = new Map<string, () => void>();
  const counts = new Map<string, number>();
  const registry = new ModelRegistry<FakeModel>(names.map((name) => ({
    name, source: `/models/${name}.gguf`,
    load: async () => {
      loads.push(name);
      if (hold.includes(name)) await new Promise<void>((resolve) => gate.set(name, resolve));
      const n = (counts.get(name) ?? 0) + 1;
      counts.set(name, n);
      return new FakeModel(name, n);
    },
    ...specs[name],
  })), { maxLoadedModels: null, maxMemoryBytes: null, defaultKeepAliveMs: -1, maxWaitingPerModel: 8, log: (l) => lines.push(l), ...options });
  return { registry, lines, loads, gate };
}

const stateOf = (r: ModelRegistry<FakeModel>) => Object.fromEntries(r.list().map((s) => [s.name, s.state]));

describe("model registry", () => {
  test("loads a model on its first request only, and an alias finds the same model", async () => {
    const { registry, loads } = harness(["a", "b"], {}, { a: { aliases: ["alpha"] } });
    expect(stateOf(registry)).toEqual({ a: "unloaded", b: "unloaded" });
    const first = await registry.acquire("a");
    expect(first.loadMs).toBeGreaterThanOrEqual(0);
    first.release();
    const second = await registry.acquire("alpha");
    expect(second.model).toBe(first.model);
    expect(second.loadMs).toBe(0);
    second.release();
    expect(loads).toEqual(["a"]);
    expect(stateOf(registry)).toEqual({ a: "loaded", b: "unloaded" });
    expect(registry.canonicalName("alpha")).toBe("a");
  });

  test("an unknown name is ModelNotFoundError with vLLM's message", async () => {
    const { registry } = harness(["a"]);
    await expect(registry.acquire("nope")).rejects.toBeInstanceOf(ModelNotFoundError);
    await expect(registry.acquire("nope")).rejects.toThrow("The model `nope` does not exist.");
  });

  test("two served names the same is refused at construction", () => {
    expect(() => harness(["a", "b"], {}, { b: { aliases: ["a"] } })).toThrow("given twice");
  });

  test("--max-loaded-models 2: the least recently used idle model is unloaded", async () => {
    const { registry, lines } = harness(["a", "b", "c"], { maxLoadedModels: 2 });
    const a = await registry.acquire("a"); a.release();
    const b = await registry.acquire("b"); b.release();
    (await registry.acquire("a")).release(); // a is now more recent than b
    const c = await registry.acquire("c"); c.release();
    await sleep(5);
    expect(stateOf(registry)).toEqual({ a: "loaded", b: "unloaded", c: "loaded" });
    expect(b.model.stopped).toBe(true);
    expect(a.model.stopped).toBe(false);
    expect(lines).toContain("unloading model b (max loaded models)");
    expect(registry.list().find((s) => s.name === "b")!.unloads).toBe(1);
  });

  test("a model in use is never unloaded: the load waits for its release", async () => {
    const { registry } = harness(["a", "b"], { maxLoadedModels: 1 });
    const a = await registry.acquire("a");
    let bLoaded = false;
    const pending = registry.acquire("b").then((lease) => { bLoaded = true; return lease; });
    await sleep(20);
    expect(bLoaded).toBe(false);
    expect(a.model.stopped).toBe(false);
    a.release();
    const b = await pending;
    expect(a.model.stopped).toBe(true);
    expect(b.model.name).toBe("b");
    b.release();
  });

  test("the memory budget unloads by bytes, and a model alone over it still loads", async () => {
    const { registry } = harness(["a", "b", "c"], { maxMemoryBytes: 250, sizeOf: (m) => (m.name === "c" ? 300 : 100) },
      { a: { estimatedBytes: 100 }, b: { estimatedBytes: 100 }, c: { estimatedBytes: 300 } });
    (await registry.acquire("a")).release();
    (await registry.acquire("b")).release();
    expect(stateOf(registry)).toEqual({ a: "loaded", b: "loaded", c: "unloaded" });
    (await registry.acquire("c")).release();
    expect(stateOf(registry)).toEqual({ a: "unloaded", b: "unloaded", c: "loaded" });
    expect(registry.list().find((s) => s.name === "c")!.bytes).toBe(300);
  });

  test("keep_alive 0 unloads as soon as the last request ends", async () => {
    const { registry } = harness(["a"]);
    const one = await registry.acquire("a");
    const two = await registry.acquire("a");
    one.release(0);
    expect(stateOf(registry).a).toBe("loaded"); // still held by the second request
    two.release();
    await sleep(1);
    expect(stateOf(registry).a).toBe("unloaded");
    expect(one.model.stopped).toBe(true);
  });

  test("a keep_alive duration unloads an idle model after it, and a new request restarts the timer", async () => {
    const { registry } = harness(["a"], { defaultKeepAliveMs: 60 });
    (await registry.acquire("a")).release();
    const status = registry.list()[0]!;
    expect(status.expiresAtMs).not.toBeNull();
    await sleep(30);
    const again = await registry.acquire("a");
    expect(registry.list()[0]!.expiresAtMs).toBeNull(); // in use: no deadline
    again.release();
    await sleep(40);
    expect(stateOf(registry).a).toBe("loaded");
    await sleep(60);
    expect(stateOf(registry).a).toBe("unloaded");
  });

  test("keep_alive -1 keeps a model forever; keepAlive() changes an idle model's deadline", async () => {
    const { registry } = harness(["a"], { defaultKeepAliveMs: 20 });
    (await registry.acquire("a")).release(-1);
    expect(registry.list()[0]!.expiresAtMs).toBeNull();
    await sleep(50);
    expect(stateOf(registry).a).toBe("loaded");
    expect(registry.keepAlive("a", 0)).toBe(true);
    await sleep(1);
    expect(stateOf(registry).a).toBe("unloaded");
    expect(registry.keepAlive("nope", 0)).toBe(false);
  });

  test("requests during a load wait in a bounded queue; past it they are ModelOverloadedError", async () => {
    const { registry, gate, loads } = harness(["a"], { maxWaitingPerModel: 3 }, {}, ["a"]);
    const waiting = [registry.acquire("a"), registry.acquire("a"), registry.acquire("a")];
    await sleep(5);
    expect(registry.list()[0]!.state).toBe("loading");
    expect(registry.list()[0]!.waiting).toBe(3);
    await expect(registry.acquire("a")).rejects.toBeInstanceOf(ModelOverloadedError);
    gate.get("a")!();
    const leases = await Promise.all(waiting);
    expect(new Set(leases.map((l) => l.model)).size).toBe(1);
    expect(loads).toEqual(["a"]);
    expect(leases.every((l) => l.loadMs >= 0)).toBe(true);
    for (const l of leases) l.release();
  });

  test("a failed load is that model's ModelLoadError; the others serve on and the next request tries again", async () => {
    let fail = true;
    const { registry } = harness(["a", "b"], {}, {
      a: { load: async () => { if (fail) throw new Error("bad GGUF magic"); return new FakeModel("a", 1); } },
    });
    await expect(registry.acquire("a")).rejects.toBeInstanceOf(ModelLoadError);
    await expect(registry.acquire("a")).rejects.toThrow("bad GGUF magic");
    expect(registry.list()[0]!.lastError).toContain("bad GGUF magic");
    const b = await registry.acquire("b");
    expect(b.model.name).toBe("b");
    b.release();
    fail = false;
    const a = await registry.acquire("a");
    expect(a.model.name).toBe("a");
    expect(registry.list()[0]!.lastError).toBeNull();
    a.release();
  });

  test("a model whose engine died is loaded afresh on its next request", async () => {
    const { registry } = harness(["a"]);
    const first = await registry.acquire("a");
    first.release();
    first.model.healthy = false;
    const second = await registry.acquire("a");
    expect(second.model.generation).toBe(2);
    expect(first.model.stopped).toBe(true);
    second.release();
  });

  test("unload() and shutdown() stop the loaded models", async () => {
    const { registry } = harness(["a", "b"]);
    const a = await registry.acquire("a"); a.release();
    const b = await registry.acquire("b"); b.release();
    expect(await registry.unload("a")).toBe(true);
    expect(await registry.unload("a")).toBe(false);
    expect(a.model.stopped).toBe(true);
    await registry.shutdown();
    expect(b.model.stopped).toBe(true);
    await expect(registry.acquire("a")).rejects.toBeInstanceOf(ModelLoadError);
  });

  test("each unload tells the model why: evicted for another model (LRU), idle, keep_alive 0, requested, shutdown", async () => {
    const { registry } = harness(["a", "b", "c", "d"], { maxLoadedModels: 2, defaultKeepAliveMs: 30 });
    const a = await registry.acquire("a");
    a.release(-1);
    const b = await registry.acquire("b");
    b.release(-1);
    const c = await registry.acquire("c"); // a, least recently used, makes room
    expect(a.model.reason).toBe("max loaded models");
    c.release(); // back to the default keep-alive: 30 ms
    await sleep(80);
    expect(c.model.reason).toBe("idle past its keep_alive");
    const d = await registry.acquire("d");
    d.release(0);
    await sleep(5);
    expect(d.model.reason).toBe("keep_alive 0");
    await registry.unload("b");
    expect(b.model.reason).toBe("requested");
    const again = await registry.acquire("a");
    again.release(-1);
    await registry.shutdown();
    expect(again.model.reason).toBe("shutdown");
    expect([a, b, c, d].map((l) => isEviction(l.model.reason!))).toEqual([true, false, false, false]);
  });
});
