/**
 * Ollama's model routes over the app with a fake orchestrator: /api/tags, /api/show, /api/ps, /api/version,
 * /api/copy and /api/delete on served names, /api/pull's NDJSON progress from a handed-in download, /api/embed and
 * /api/embeddings on a fake pooling engine, and keep_alive's parsing (Go durations, seconds, forever, 0 refused).
 */
import { describe, expect, test } from "bun:test";
import type { ResolvedPooler } from "../../src/engine/resolve-pooler.ts";
import type { EncodeOutput, EncodeRequest } from "../../src/frontend/orchestrator.ts";
import { parseGoDurationMs, parseKeepAlive } from "../../src/server/ollama/keep-alive.ts";
import type { OllamaServing, PullEvent } from "../../src/server/ollama/ollama-serving.ts";
import { testServer, type Json } from "./helpers.ts";
import { checkOllama, ndjsonRecords } from "./ollama-schemas.ts";
import pkg from "../../package.json" with { type: "json" };

const METADATA: OllamaServing["metadata"] = new Map<string, number | string | readonly string[]>([
  ["general.architecture", "llama"], ["general.name", "Fake"], ["general.file_type", 7], ["general.parameter_count", 8_030_000_000],
  ["llama.context_length", 256], ["tokenizer.chat_template", "{{ messages }}"], ["tokenizer.ggml.tokens", ["a", "b", "c", "d", "e", "f"]],
]);

async function json(res: Response, status = 200): Promise<Json> {
  expect(res.status).toBe(status);
  return res.json() as Promise<Json>;
}

describe("model lists", () => {
  test("/api/tags lists the served model under each name; /api/version is fennec's", async () => {
    const s = testServer({ servedModelAliases: ["alias"], ollama: { metadata: METADATA, fileSizeBytes: 1234, modifiedAtMs: Date.UTC(2026, 0, 2) } });
    const tags = await json(await s.call("GET", "/api/tags"));
    checkOllama("tags", tags);
    expect(tags.models.map((m: Json) => m.name)).toEqual(["fake-model:latest", "alias:latest"]);
    expect(tags.models[0]).toMatchObject({ size: 1234, modified_at: "2026-01-02T00:00:00.000Z", details: { family: "llama", parameter_size: "8.0B", quantization_level: "Q8_0" }, capabilities: ["completion"] });
    expect(await json(await s.call("GET", "/api/version"))).toEqual({ version: pkg.version });
  });

  test("/api/show: GGUF metadata (general.name and the template key left out, long arrays emptied unless verbose), template, details", async () => {
    const s = testServer({ ollama: { metadata: METADATA }, generationDefaults: { temperature: 0.6, repetition_penalty: 1.1 } });
    const show = await json(await s.call("POST", "/api/show", { model: "fake-model" }));
    checkOllama("show", show);
    expect(show.model_info).toEqual({ "general.architecture": "llama", "general.file_type": 7, "general.parameter_count": 8_030_000_000, "llama.context_length": 256, "tokenizer.ggml.tokens": null });
    expect(show.template).toBe("{{ messages }}");
    expect(show.parameters).toBe("temperature 0.6\nrepeat_penalty 1.1");
    const verbose = await json(await s.call("POST", "/api/show", { model: "fake-model:latest", verbose: true }));
    expect(verbose.model_info["tokenizer.ggml.tokens"]).toHaveLength(6);
    expect((await json(await s.call("POST", "/api/show", { model: "nope" }), 404)).error).toBe("model 'nope' not found");
    expect((await json(await s.call("POST", "/api/show", {}), 400)).error).toBe("model is required");
  });

  test("/api/show without metadata: the loaded configuration under GGUF keys", async () => {
    const s = testServer();
    const show = await json(await s.call("POST", "/api/show", { name: "fake-model" }));
    checkOllama("show", show);
    expect(show.model_info).toMatchObject({ "general.architecture": "llama", "llama.block_count": 1, "llama.embedding_length": 8, "llama.context_length": 256 });
  });

  test("/api/copy adds a name that chat answers to; /api/delete removes it; the served model cannot be deleted", async () => {
    const s = testServer();
    expect((await s.call("POST", "/api/copy", { source: "fake-model", destination: "mine:v1" })).status).toBe(200);
    expect((await json(await s.call("GET", "/api/tags"))).models.map((m: Json) => m.name)).toEqual(["fake-model:latest", "mine:v1"]);
    const chat = await json(await s.call("POST", "/api/chat", { model: "mine:v1", messages: [{ role: "user", content: "x" }], stream: false, options: { num_predict: 1 } }));
    expect(chat.model).toBe("mine:v1");
    expect((await s.call("DELETE", "/api/delete", { model: "mine:v1" })).status).toBe(200);
    expect((await json(await s.call("DELETE", "/api/delete", { model: "mine:v1" }), 404)).error).toBe("model 'mine:v1' not found");
    expect((await json(await s.call("DELETE", "/api/delete", { model: "fake-model" }), 400)).error).toContain("cannot delete it");
    expect((await json(await s.call("POST", "/api/copy", { source: "nope", destination: "x" }), 404)).error).toBe('model "nope" not found');
  });
});

describe("requests as Ollama's docs send them", () => {
  test("a curl -d body (form Content-Type) is read as JSON; an empty one is Ollama's missing request body", async () => {
    const s = testServer();
    const form = { "content-type": "application/x-www-form-urlencoded" };
    const res = await s.app.handle(new Request("http://localhost/api/generate", { method: "POST", headers: form, body: JSON.stringify({ model: "fake-model", prompt: "hi", stream: false, options: { num_predict: 2 } }) }));
    checkOllama("generate", await json(res));
    const empty = await s.app.handle(new Request("http://localhost/api/show", { method: "POST", headers: form, body: "" }));
    expect((await json(empty, 400)).error).toBe("missing request body");
    const bad = await s.app.handle(new Request("http://localhost/api/show", { method: "POST", body: "{x" }));
    expect((await json(bad, 400)).error).toBe("Request body is not valid JSON");
  });

  test("HEAD / (Ollama's liveness probe) answers 200: the web page's route", async () => {
    expect((await testServer().call("HEAD", "/")).status).toBe(200);
  });
});

describe("/api/pull", () => {
  const pull = async (model: string, onEvent: (e: PullEvent) => void) => {
    if (model === "org/missing") throw new Error("org/missing: repository not found on the Hub");
    onEvent({ kind: "manifest" });
    onEvent({ kind: "file", digest: "a".repeat(64), totalBytes: 10, completedBytes: 0 });
    await Bun.sleep(1);
    onEvent({ kind: "file", digest: "a".repeat(64), totalBytes: 10, completedBytes: 10 });
    onEvent({ kind: "verifying" });
    onEvent({ kind: "done", path: `/cache/${model}.gguf` });
  };

  test("Ollama's progress records in order; hf.co/ names are Hub references", async () => {
    const seen: string[] = [];
    const s = testServer({ ollama: { pull: (m, e) => { seen.push(m); return pull(m, e); } } });
    const records = await ndjsonRecords(await s.call("POST", "/api/pull", { model: "hf.co/org/repo:Q8_0" }), "progress");
    expect(seen).toEqual(["org/repo:Q8_0"]);
    expect(records.map((r) => r.status)).toEqual(["pulling manifest", "pulling aaaaaaaaaaaa", "pulling aaaaaaaaaaaa", "verifying sha256 digest", "writing manifest", "success"]);
    expect(records[2]).toMatchObject({ digest: `sha256:${"a".repeat(64)}`, total: 10, completed: 10 });
    expect(await json(await s.call("POST", "/api/pull", { model: "org/repo", stream: false }))).toEqual({ status: "success" });
  });

  test("a failed download before the first record: a JSON 500 in the error shape; bad names and no download wired: 400", async () => {
    const s = testServer({ ollama: { pull } });
    const res = await s.call("POST", "/api/pull", { model: "org/missing" });
    expect(res.status).toBe(500);
    expect((await res.json()).error).toContain("repository not found");
    expect((await json(await s.call("POST", "/api/pull", { model: "not a name" }), 400)).error).toContain("invalid model name");
    expect((await json(await testServer().call("POST", "/api/pull", { model: "org/repo" }), 400)).error).toContain("cannot pull");
  });
});

describe("embeddings", () => {
  const POOLER: ResolvedPooler = { poolingType: "LAST", normalize: true, dimensions: null, hiddenSize: 3, matryoshka: null, source: "gguf" };
  function poolingServer() {
    const server = testServer({}, { maxModelLen: 32 });
    const seen: EncodeRequest[] = [];
    Object.assign(server.fake, {
      pooler: POOLER,
      encode: async (r: EncodeRequest): Promise<EncodeOutput> => {
        seen.push(r);
        let v = [r.promptTokenIds.length, 3, 4];
        if (r.pooling.normalize) { const n = Math.hypot(...v); v = v.map((x) => x / n); }
        return { requestId: r.requestId, embedding: Float32Array.from(v), numPromptTokens: r.promptTokenIds.length, numCachedTokens: 0, times: { arrivalMs: r.arrivalMs, queuedMs: null, scheduledMs: null, firstTokenMs: null, lastTokenMs: null } };
      },
    });
    return { ...server, seen };
  }

  test("/api/embed: normalised vectors in input order, truncation by default, prompt_eval_count", async () => {
    const s = poolingServer();
    const body = await json(await s.call("POST", "/api/embed", { model: "fake-model", input: ["ab", "xyz"] }));
    checkOllama("embed", body);
    expect(body.embeddings).toHaveLength(2);
    for (const v of body.embeddings) expect(Math.hypot(...v)).toBeCloseTo(1, 5);
    expect(s.seen.map((r) => r.pooling.normalize)).toEqual([true, true]);
    expect(body.prompt_eval_count).toBe(s.seen.reduce((n, r) => n + r.promptTokenIds.length, 0));
    // truncate (default true) keeps what fits; false makes a too-long input a 400
    await json(await s.call("POST", "/api/embed", { model: "fake-model", input: "x".repeat(100) }));
    expect(s.seen.at(-1)!.promptTokenIds.length).toBe(32);
    expect((await json(await s.call("POST", "/api/embed", { model: "fake-model", input: "x".repeat(100), truncate: false }), 400)).error).toContain("maximum context length");
    expect(await json(await s.call("POST", "/api/embed", { model: "fake-model", input: [] }))).toEqual({ model: "fake-model:latest", embeddings: [] });
    expect((await json(await s.call("POST", "/api/embed", { model: "fake-model", input: [1, 2] }), 400)).error).toBe("invalid input type");
  });

  test("/api/embeddings: one vector, not normalised; empty prompt, empty vector", async () => {
    const s = poolingServer();
    expect((await json(await s.call("POST", "/api/embeddings", { model: "fake-model", prompt: "ab" }))).embedding).toEqual([s.seen[0]!.promptTokenIds.length, 3, 4]);
    expect(s.seen[0]!.pooling.normalize).toBe(false);
    expect(await json(await s.call("POST", "/api/embeddings", { model: "fake-model", prompt: "" }))).toEqual({ embedding: [] });
  });

  test("a generative model refuses embeddings; an embedding model refuses chat", async () => {
    expect((await json(await testServer().call("POST", "/api/embed", { model: "fake-model", input: "a" }), 400)).error).toContain("does not support Embeddings");
    expect((await json(await poolingServer().call("POST", "/api/chat", { model: "fake-model", messages: [{ role: "user", content: "a" }] }), 400)).error).toBe('"fake-model:latest" does not support chat');
  });
});

describe("keep_alive", () => {
  test.each([
    ["5m", 300_000], ["1h30m", 5_400_000], ["300ms", 300], ["1.5h", 5_400_000], ["0", 0], ["-1m", -60_000], ["2h3m4s", 7_384_000],
  ])("Go duration %s = %d ms", (text, ms) => expect(parseGoDurationMs(text)).toBe(ms));

  test.each(["", "5", "m", "5 m", "5x", "1h-3m"])("not a Go duration: %j", (text) => expect(parseGoDurationMs(text)).toBeNull());

  test("numbers are seconds; negative is forever; omitted is 5 minutes; 0 is refused", () => {
    expect(parseKeepAlive(90)).toBe(90_000);
    expect(parseKeepAlive(0.5)).toBe(500);
    expect(parseKeepAlive(-1)).toBe(Infinity);
    expect(parseKeepAlive("-1s")).toBe(Infinity);
    expect(parseKeepAlive(undefined)).toBe(300_000);
    expect(() => parseKeepAlive(0)).toThrow("cannot unload it");
    expect(parseKeepAlive(0, true)).toBe(0);
    expect(parseKeepAlive("0s", true)).toBe(0);
    expect(() => parseKeepAlive("0s")).toThrow("cannot unload it");
    expect(() => parseKeepAlive(true)).toThrow("keep_alive must be");
  });
});
