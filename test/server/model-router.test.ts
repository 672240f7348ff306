/**
 * The several-models router with fake model apps: a body's `model` picks the app (loaded on demand), unknown is 404,
 * a failed load 503, /v1/models lists every model with its `loaded` flag, a streamed answer holds its model until its
 * body is read, Ollama's keep_alive on /api/ routes, and the merged /metrics text.
 */
import { describe, expect, test } from "bun:test";
import { ModelRegistry } from "../../src/server/model-registry.ts";
import { createModelRouter, keepAliveMs, LOAD_MS_HEADER, mergeExpositions, withModelName, type ModelApp, type RoutedAdapter, type RuntimeLora } from "../../src/server/model-router.ts";

function fakeApp(name: string, seen: string[]): ModelApp {
  return {
    maxModelLen: 512,
    handle: async (request) => {
      const path = new URL(request.url).pathname;
      if (path.endsWith("_lora_adapter")) {
        seen.push(`${name} ${path} ${await request.text()}`);
        return new Response("Success", { status: 200 });
      }
      seen.push(`${name} ${path} load=${request.headers.get(LOAD_MS_HEADER) ?? "-"}`);
      // a two-chunk stream: the model stays held until the client read it all
      const body = new ReadableStream<Uint8Array>({
        start(c) { c.enqueue(new TextEncoder().encode(`${name}:`)); c.enqueue(new TextEncoder().encode("done")); c.close(); },
      });
      return new Response(body, { headers: { "content-type": "text/plain" } });
    },
    isHealthy: () => true,
    metricsText: async () => `# HELP vllm:x help\n# TYPE vllm:x counter\nvllm:x{model_name="${name}"} 1\n# HELP process_y help\n# TYPE process_y gauge\nprocess_y 5\n`,
    shutdown: async () => {},
  };
}

function setup(failing: string[] = [], adapters?: Map<string, RoutedAdapter>, runtimeLora?: RuntimeLora) {
  const seen: string[] = [];
  const registry = new ModelRegistry<ModelApp>(["a", "b"].map((name) => ({
    name, source: `/m/${name}.gguf`, aliases: [`/m/${name}.gguf`],
    load: async () => {
      if (failing.includes(name)) throw new Error("bad file");
      await Bun.sleep(2);
      return fakeApp(name, seen);
    },
  })), { maxLoadedModels: null, maxMemoryBytes: null, defaultKeepAliveMs: -1, maxWaitingPerModel: 4 });
  const handle = createModelRouter(registry, { apiKeys: [], log: () => {}, ...(adapters !== undefined ? { adapters } : {}), ...(runtimeLora !== undefined ? { runtimeLora } : {}) });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    handle(new Request(`http://x${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) }));
  return { registry, handle, post, seen };
}

describe("model router", () => {
  test("a model's LoRA adapter routes to that model's app (loading it); /v1/models lists it with its parent and root", async () => {
    const adapters = new Map<string, RoutedAdapter>([["sql", { model: "b", parent: "b", path: "/l/sql.gguf" }], ["poet", { model: "a", parent: "base-a", path: "/l/poet.gguf" }]]);
    const { post, seen, handle } = setup([], adapters);
    type Card = { id: string; parent: string | null; root: string; loaded: boolean; max_model_len: number | null };
    const before = (await (await handle(new Request("http://x/v1/models"))).json() as { data: Card[] }).data;
    expect(before.filter((m) => m.parent !== null)).toEqual([
      expect.objectContaining({ id: "sql", parent: "b", root: "/l/sql.gguf", loaded: false, max_model_len: null }),
      expect.objectContaining({ id: "poet", parent: "base-a", root: "/l/poet.gguf", loaded: false }),
    ]);
    expect(await (await post("/v1/chat/completions", { model: "sql", messages: [] })).text()).toBe("b:done");
    expect(await (await post("/api/generate", { model: "poet", prompt: "x" })).text()).toBe("a:done");
    expect(seen.map((s) => s.split(" ")[0])).toEqual(["b", "a"]);
    const after = (await (await handle(new Request("http://x/v1/models"))).json() as { data: Card[] }).data;
    expect(after.find((m) => m.id === "sql")!.loaded).toBe(true);
    expect((await handle(new Request("http://x/v1/models/poet"))).status).toBe(200);
    expect((await post("/v1/completions", { model: "nope", prompt: "x" })).status).toBe(404);
  });

  test("the body's model picks the app, loaded on its first request; the load time is on the request and the answer", async () => {
    const { post, seen, handle } = setup();
    const first = await post("/v1/completions", { model: "b", prompt: "x" }, { [LOAD_MS_HEADER]: "999" });
    expect(await first.text()).toBe("b:done");
    expect(Number(first.headers.get(LOAD_MS_HEADER))).toBeGreaterThan(0);
    const second = await post("/v1/completions", { model: "/m/b.gguf", prompt: "x" });
    expect(await second.text()).toBe("b:done");
    expect(second.headers.get(LOAD_MS_HEADER)).toBeNull();
    expect(seen[0]).toMatch(/^b \/v1\/completions load=\d+$/);
    expect(seen[0]).not.toContain("999");
    expect(seen[1]).toBe("b /v1/completions load=-");
    const models = await (await handle(new Request("http://x/v1/models"))).json() as { data: { id: string; loaded: boolean }[] };
    expect(models.data.map((m) => [m.id, m.loaded])).toEqual([["a", false], ["/m/a.gguf", false], ["b", true], ["/m/b.gguf", true]]);
    expect((await handle(new Request("http://x/v1/models/b"))).status).toBe(200);
    expect((await handle(new Request("http://x/v1/models/zz"))).status).toBe(404);
  });

  test("unknown model 404 with vLLM's message, failed load 503, /health 200", async () => {
    const { post, handle } = setup(["a"]);
    const unknown = await post("/v1/chat/completions", { model: "nope", messages: [] });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { message: string } }).error.message).toBe("The model `nope` does not exist.");
    const failed = await post("/v1/chat/completions", { model: "a", messages: [] });
    expect(failed.status).toBe(503);
    expect(((await failed.json()) as { error: { message: string } }).error.message).toContain("bad file");
    expect((await handle(new Request("http://x/health"))).status).toBe(200);
    expect((await post("/v1/chat/completions", { model: "b", messages: [] })).status).toBe(200);
  });

  test("a streamed answer holds its model until the body is read; Ollama's keep_alive 0 then unloads it", async () => {
    const { post, registry } = setup();
    const response = await post("/api/generate", { model: "a", prompt: "x", keep_alive: 0 });
    expect(registry.list()[0]!.inUse).toBe(1);
    expect(await response.text()).toBe("a:done");
    await Bun.sleep(1);
    expect(registry.list()[0]!.inUse).toBe(0);
    expect(registry.list()[0]!.state).toBe("unloaded");
  });

  test("Ollama's /api/ps lists the loaded models with their expiry", async () => {
    const { post, handle, registry } = setup();
    await (await post("/v1/completions", { model: "a", prompt: "x" })).text();
    await (await post("/api/generate", { model: "b", prompt: "x", keep_alive: "10m" })).text();
    const body = await (await handle(new Request("http://x/api/ps"))).json() as { models: { name: string; expires_at: string; context_length: number }[] };
    expect(body.models.map((m) => m.name)).toEqual(["a", "b"]); // a is kept forever: the later expiry first
    expect(body.models[0]!.expires_at.startsWith("2318-")).toBe(true);
    const bExpiry = Date.parse(body.models[1]!.expires_at) - Date.now();
    expect(bExpiry).toBeGreaterThan(9 * 60_000);
    expect(bExpiry).toBeLessThanOrEqual(10 * 60_000);
    expect(body.models[0]!.context_length).toBe(512);
    await registry.unload("b");
    expect(((await (await handle(new Request("http://x/api/ps"))).json()) as { models: unknown[] }).models).toHaveLength(1);
  });

  test("keep_alive values as Ollama reads them", () => {
    expect(keepAliveMs(0)).toBe(0);
    expect(keepAliveMs(1.5)).toBe(1500);
    expect(keepAliveMs(-1)).toBe(-1);
    expect(keepAliveMs("5m")).toBe(300_000);
    expect(keepAliveMs("1h30m")).toBe(5_400_000);
    expect(keepAliveMs("-1m")).toBe(-1);
    expect(keepAliveMs("30")).toBe(30_000);
    expect(keepAliveMs("soon")).toBeNull();
    expect(keepAliveMs(true)).toBeNull();
  });

  test("the merged exposition has each family once, every model's series, and a repeated series once", () => {
    const text = mergeExpositions([
      `# HELP vllm:x help\n# TYPE vllm:x counter\nvllm:x{model_name="a"} 1\n# HELP process_y help\n# TYPE process_y gauge\nprocess_y 5\n`,
      `# HELP vllm:x help\n# TYPE vllm:x counter\nvllm:x{model_name="b"} 2\n# HELP process_y help\n# TYPE process_y gauge\nprocess_y 5\n`,
    ]);
    expect(text).toBe(`# HELP vllm:x help\n# TYPE vllm:x counter\nvllm:x{model_name="a"} 1\nvllm:x{model_name="b"} 2\n# HELP process_y help\n# TYPE process_y gauge\nprocess_y 5\n`);
  });

  test("a model's series without model_name get it (vLLM's info gauges carry only engine): two models' cache_config_info stay apart", () => {
    const info = `# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size="16",engine="0"} 1.0\nvllm:x{model_name="a",engine="0"} 3\nvllm:bare 2\nvllm:empty{} 4\n`;
    expect(withModelName(info, "a")).toBe(`# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{model_name="a",block_size="16",engine="0"} 1.0\nvllm:x{model_name="a",engine="0"} 3\nvllm:bare{model_name="a"} 2\nvllm:empty{model_name="a"} 4\n`);
    const merged = mergeExpositions([withModelName(info, "a"), withModelName(info.replaceAll('"a"', '"b"'), "b")]);
    expect(merged.match(/^vllm:cache_config_info\{/gm)).toHaveLength(2);
    expect(withModelName("vllm:y 1\n", 'we"ird')).toBe('vllm:y{model_name="we\\"ird"} 1\n');
  });

  test("runtime LoRA loads with several models: the adapter goes to the model it fits, base_model_name picks among several, then it is that model's name", async () => {
    const fits: RuntimeLora["fits"] = (path) => ({
      "/l/a.gguf": { fits: ["a"], misfits: [{ model: "b", reason: "b: lora_a [64, 8] does not fit" }] },
      "/l/both.gguf": { fits: ["a", "b"], misfits: [] },
      "/l/none.gguf": { fits: [], misfits: [{ model: "a", reason: "architecture qwen2" }, { model: "b", reason: "architecture qwen2" }] },
    })[path] ?? "cannot read it";
    const { post, seen, handle } = setup([], new Map(), { models: ["a", "b"], fits });
    const cards = async () => ((await (await handle(new Request("http://x/v1/models"))).json()) as { data: { id: string; parent: string | null }[] }).data.filter((c) => c.parent !== null);
    const message = async (r: Response) => ((await r.json()) as { error: { message: string; type: string } }).error;

    const one = await post("/v1/load_lora_adapter", { lora_name: "x", lora_path: "/l/a.gguf" });
    expect([one.status, await one.text()]).toEqual([200, "Success"]);
    expect(seen.at(-1)).toBe(`a /v1/load_lora_adapter {"lora_name":"x","lora_path":"/l/a.gguf"}`);
    expect(await cards()).toEqual([expect.objectContaining({ id: "x", parent: "a" })]);
    await (await post("/v1/completions", { model: "x", prompt: "hi" })).text();
    expect(seen.at(-1)).toStartWith("a /v1/completions");

    const several = await post("/v1/load_lora_adapter", { lora_name: "y", lora_path: "/l/both.gguf" });
    expect(several.status).toBe(400);
    expect(await message(several)).toEqual({ message: "Loading lora y failed: the adapter fits several served models (a, b); name one as base_model_name.", type: "InvalidUserInput", param: null, code: 400 } as never);
    const named = await post("/v1/load_lora_adapter", { lora_name: "y", lora_path: "/l/both.gguf", base_model_name: "b" });
    expect(named.status).toBe(200);
    // the model's app gets vLLM's body, without the router's field
    expect(seen.at(-1)).toBe(`b /v1/load_lora_adapter {"lora_name":"y","lora_path":"/l/both.gguf"}`);
    await (await post("/v1/chat/completions", { model: "y", messages: [] })).text();
    expect(seen.at(-1)).toStartWith("b /v1/chat/completions");

    const none = await post("/v1/load_lora_adapter", { lora_name: "z", lora_path: "/l/none.gguf" });
    expect([none.status, (await message(none)).message]).toEqual([400, "Loading lora z failed: the adapter fits none of the served models (a: architecture qwen2; b: architecture qwen2)."]);
    const badBase = await post("/v1/load_lora_adapter", { lora_name: "z", lora_path: "/l/both.gguf", base_model_name: "c" });
    expect([badBase.status, (await message(badBase)).message]).toEqual([400, `Loading lora z failed: base_model_name "c" is not a served model with LoRA enabled (a, b).`]);
    const modelName = await post("/v1/load_lora_adapter", { lora_name: "b", lora_path: "/l/a.gguf" });
    expect(modelName.status).toBe(400);
    // an adapter loaded for one model is not moved to another
    const moved = await post("/v1/load_lora_adapter", { lora_name: "x", lora_path: "/l/both.gguf", base_model_name: "b", load_inplace: true });
    expect([moved.status, (await message(moved)).message]).toEqual([400, "Loading lora x failed: the adapter 'x' is loaded for a; unload it first."]);
    // in place: to the model that serves it
    expect((await post("/v1/load_lora_adapter", { lora_name: "x", lora_path: "/l/a.gguf", load_inplace: true })).status).toBe(200);
    expect(seen.at(-1)).toStartWith("a /v1/load_lora_adapter");

    const unload = await post("/v1/unload_lora_adapter", { lora_name: "x" });
    expect(unload.status).toBe(200);
    expect(seen.at(-1)).toBe(`a /v1/unload_lora_adapter {"lora_name":"x"}`);
    expect((await cards()).map((c) => [c.id, c.parent])).toEqual([["y", "b"]]);
    const stale = await post("/v1/completions", { model: "x", prompt: "hi" });
    expect(stale.status).toBe(404);
  });
});
