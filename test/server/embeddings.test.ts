/**
 * /v1/embeddings and /pooling at the HTTP layer (app.handle, no port) on the fake orchestrator made a pooling model:
 * its encode() returns a vector computed from the token ids it was given, so the tests see exactly what the server
 * sent down (tokenization, truncation, normalize, dimensions) and how it encodes the answer (float, base64, byte
 * order), plus vLLM's 400s for bad fields and for the task the model lacks. The numbers themselves are checked
 * against llama.cpp in test/embeddings/ and through the binary in test/e2e/embeddings-binary.test.ts.
 */
import { describe, expect, test } from "bun:test";
import type { ResolvedPooler } from "../../src/engine/resolve-pooler.ts";
import type { EncodeOutput, EncodeRequest } from "../../src/frontend/orchestrator.ts";
import { testServer } from "./helpers.ts";
import { withRequestLogging } from "../../src/server/request-logger.ts";

const POOLER: ResolvedPooler = { poolingType: "LAST", normalize: true, dimensions: null, hiddenSize: 4, matryoshka: null, source: "gguf" };

/** [ids.length, first id, last id, sum of ids], then cut and normalised as the engine would (embeddingOf) */
function fakeEmbedding(r: EncodeRequest): Float32Array {
  const ids = r.promptTokenIds;
  let v = [ids.length, ids[0]!, ids.at(-1)!, ids.reduce((a, b) => a + b, 0)];
  if (r.pooling.dimensions !== null) v = v.slice(0, r.pooling.dimensions);
  if (r.pooling.normalize) { const n = Math.hypot(...v); v = v.map((x) => x / n); }
  return Float32Array.from(v);
}

function poolingServer(pooler: ResolvedPooler = POOLER) {
  const server = testServer({}, { maxModelLen: 32 });
  const seen: EncodeRequest[] = [];
  Object.assign(server.fake, {
    pooler,
    encode: async (r: EncodeRequest): Promise<EncodeOutput> => {
      seen.push(r);
      return { requestId: r.requestId, embedding: fakeEmbedding(r), numPromptTokens: r.promptTokenIds.length, numCachedTokens: 0, times: { arrivalMs: r.arrivalMs, queuedMs: null, scheduledMs: null, firstTokenMs: null, lastTokenMs: null } };
    },
  });
  return { ...server, seen };
}

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe("/v1/embeddings", () => {
  test("a string, strings, token ids and token-id lists: one vector each in input order, usage = prompt tokens", async () => {
    const { call, seen } = poolingServer();
    const texts = await (await call("POST", "/v1/embeddings", { input: ["ab", "xyz"], encoding_format: "float" })).json() as Json;
    expect(texts.object).toBe("list");
    expect(texts.model).toBe("fake-model");
    expect(texts.id).toMatch(/^embd-/);
    expect(texts.data.map((d: Json) => [d.index, d.object])).toEqual([[0, "embedding"], [1, "embedding"]]);
    // the fake tokenizer adds BOS (1) to text, as add_special_tokens defaults to true
    expect(seen.map((r) => r.promptTokenIds)).toEqual([[1, 100, 101], [1, 123, 124, 125]]);
    expect(texts.usage).toEqual({ prompt_tokens: 7, total_tokens: 7, completion_tokens: 0, prompt_tokens_details: null });
    const n = Math.hypot(3, 1, 101, 202);
    expect(texts.data[0].embedding).toEqual([3 / n, 1 / n, 101 / n, 202 / n].map(Math.fround));
    const one = await (await call("POST", "/v1/embeddings", { input: "ab", add_special_tokens: false })).json() as Json;
    expect(one.data).toHaveLength(1);
    expect(seen.at(-1)!.promptTokenIds).toEqual([100, 101]);
    await call("POST", "/v1/embeddings", { input: [5, 6, 7] });
    expect(seen.at(-1)!.promptTokenIds).toEqual([5, 6, 7]);
    const lists = await (await call("POST", "/v1/embeddings", { input: [[5, 6], [7]] })).json() as Json;
    expect(lists.data).toHaveLength(2);
    expect(seen.slice(-2).map((r) => r.promptTokenIds)).toEqual([[5, 6], [7]]);
  });

  test("base64 is the float32 bytes, little-endian (native) or big-endian", async () => {
    const { call } = poolingServer();
    const floats = (await (await call("POST", "/v1/embeddings", { input: [5, 6], normalize: false })).json() as Json).data[0].embedding as number[];
    expect(floats).toEqual([2, 5, 6, 11]);
    const b64 = (await (await call("POST", "/v1/embeddings", { input: [5, 6], normalize: false, encoding_format: "base64" })).json() as Json).data[0].embedding as string;
    expect(Array.from(new Float32Array(Buffer.from(b64, "base64").buffer.slice(0)))).toEqual(floats);
    const big = (await (await call("POST", "/v1/embeddings", { input: [5, 6], normalize: false, encoding_format: "base64", endianness: "big" })).json() as Json).data[0].embedding as string;
    const view = new DataView(Buffer.from(big, "base64").buffer.slice(0));
    expect([0, 1, 2, 3].map((i) => view.getFloat32(i * 4, false))).toEqual(floats);
  });

  test("normalize and use_activation reach the engine; the pooler's default applies when absent", async () => {
    const { call, seen } = poolingServer({ ...POOLER, normalize: false });
    await call("POST", "/v1/embeddings", { input: [5] });
    await call("POST", "/v1/embeddings", { input: [5], normalize: true });
    await call("POST", "/v1/embeddings", { input: [5], use_activation: true });
    expect(seen.map((r) => r.pooling.normalize)).toEqual([false, true, true]);
    const clash = await call("POST", "/v1/embeddings", { input: [5], normalize: true, use_activation: false });
    expect(clash.status).toBe(400);
  });

  test("dimensions: vLLM's 400 without matryoshka; kept to d values on a matryoshka model, or its listed sizes only", async () => {
    const plain = poolingServer();
    const refused = await plain.call("POST", "/v1/embeddings", { input: "ab", dimensions: 2 });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as Json).error.message).toContain('Model "fake-model" does not support matryoshka representation, changing output dimensions will lead to poor results.');
    const matryoshka = poolingServer({ ...POOLER, matryoshka: { dimensions: null } });
    const cut = await (await matryoshka.call("POST", "/v1/embeddings", { input: [5, 6], dimensions: 2, normalize: false })).json() as Json;
    expect(cut.data[0].embedding).toEqual([2, 5]);
    const listed = poolingServer({ ...POOLER, matryoshka: { dimensions: [2, 4] } });
    const wrong = await listed.call("POST", "/v1/embeddings", { input: [5, 6], dimensions: 3 });
    expect(((await wrong.json()) as Json).error.message).toContain("only supports [2,4] matryoshka dimensions");
  });

  test("truncate_prompt_tokens keeps the last k tokens; -1 keeps max_model_len; larger than max_model_len is vLLM's 400", async () => {
    const { call, seen } = poolingServer();
    await call("POST", "/v1/embeddings", { input: [1, 2, 3, 4, 5], truncate_prompt_tokens: 2 });
    expect(seen.at(-1)!.promptTokenIds).toEqual([4, 5]);
    await call("POST", "/v1/embeddings", { input: Array.from({ length: 40 }, (_, i) => i + 3), truncate_prompt_tokens: -1 });
    expect(seen.at(-1)!.promptTokenIds).toHaveLength(32);
    const big = await call("POST", "/v1/embeddings", { input: [1], truncate_prompt_tokens: 33 });
    expect(((await big.json()) as Json).error.message).toContain("truncate_prompt_tokens value (33) is greater than max_model_len (32)");
  });

  test("inputs past max_model_len, empty inputs, bad token ids and unknown formats are 400s naming the field; nothing reaches the engine", async () => {
    const { call, seen } = poolingServer();
    const cases: [unknown, string, string][] = [
      [{ input: Array.from({ length: 33 }, () => 5) }, "input", "However, you requested 33 tokens in the input for embedding generation"],
      [{ input: [] }, "input", "Input cannot be empty"],
      [{ input: [500] }, "prompt", "out of vocabulary"],
      [{ input: "a", encoding_format: "int8" }, "encoding_format", "encoding_format must be float or base64"],
      [{ input: "a", embed_dtype: "float16" }, "embed_dtype", "embed_dtype is not supported by fennec: Only float32 output"],
      [{ input: "a", truncation_side: "right" }, "truncation_side", "truncation_side is not supported by fennec: Only left truncation"],
      [{ input: "a", padding: "max_length" }, "padding", "padding is not supported by fennec"],
      [{ input: "a", mm_processor_kwargs: { a: 1 } }, "mm_processor_kwargs", "fennec serves text models only"],
    ];
    for (const [body, param, message] of cases) {
      const r = await call("POST", "/v1/embeddings", body);
      expect(r.status).toBe(400);
      const error = ((await r.json()) as Json).error;
      expect(error.param).toBe(param);
      expect(error.message).toContain(message);
    }
    expect(seen).toHaveLength(0);
    const model = await call("POST", "/v1/embeddings", { input: "a", model: "other" });
    expect(model.status).toBe(404);
  });

  test("a generative model answers vLLM's 400 on /v1/embeddings and /pooling; a pooling model on chat and completions", async () => {
    const generative = testServer();
    for (const [path, api] of [["/v1/embeddings", "Embeddings"], ["/pooling", "Pooling"]] as const) {
      const r = await generative.call("POST", path, { input: "a" });
      expect(r.status).toBe(400);
      expect(((await r.json()) as Json).error).toEqual({ message: `The model does not support ${api} API`, type: "BadRequestError", param: null, code: 400 });
    }
    const pooling = poolingServer();
    const chat = await pooling.call("POST", "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] });
    expect(((await chat.json()) as Json).error.message).toBe("The model does not support Chat Completions API");
    const completion = await pooling.call("POST", "/v1/completions", { prompt: "hi" });
    expect(((await completion.json()) as Json).error.message).toBe("The model does not support Completions API");
    expect(pooling.fake.requests).toHaveLength(0);
  });

  test("/pooling returns the same vectors as `data` of pooling objects; other tasks are refused", async () => {
    const { call } = poolingServer();
    const body = await (await call("POST", "/pooling", { input: [[5, 6], [7]], normalize: false })).json() as Json;
    expect(body.id).toMatch(/^pool-/);
    expect(body.data).toEqual([{ index: 0, object: "pooling", data: [2, 5, 6, 11] }, { index: 1, object: "pooling", data: [1, 7, 7, 7] }]);
    const task = await call("POST", "/pooling", { input: [5], task: "token_embed" });
    expect(task.status).toBe(400);
  });

  test("the chat form: messages rendered with the chat template (no generation prompt, no BOS by default) are one input", async () => {
    const { call, seen } = poolingServer();
    const r = await (await call("POST", "/v1/embeddings", { messages: [{ role: "user", content: "hi" }] })).json() as Json;
    expect(r.data).toHaveLength(1);
    // the fake's template: "role: content\n" per message, "assistant:" for a generation prompt
    const ids = (text: string) => [...text].map((c) => c.charCodeAt(0) + 3);
    expect(seen.at(-1)!.promptTokenIds).toEqual(ids("user: hi\n"));
    await call("POST", "/v1/embeddings", { messages: [{ role: "user", content: "hi" }], add_generation_prompt: true, add_special_tokens: true });
    expect(seen.at(-1)!.promptTokenIds).toEqual([1, ...ids("user: hi\nassistant:")]);
    const both = await call("POST", "/v1/embeddings", { input: "a", messages: [{ role: "user", content: "hi" }] });
    expect(((await both.json()) as Json).error.message).toBe("Either `input` or `messages` must be given, not both.");
    const stray = await call("POST", "/v1/embeddings", { input: "a", add_generation_prompt: true });
    expect(((await stray.json()) as Json).error).toMatchObject({ param: "add_generation_prompt", message: "add_generation_prompt applies to the chat form (messages) only." });
  });

  test("--enable-log-requests logs a pooling request with vLLM's PoolingParams", async () => {
    const { fake } = poolingServer();
    const lines: string[] = [];
    const logged = withRequestLogging(fake, (l) => lines.push(l), null);
    await logged.encode!({ requestId: "r1", externalRequestId: "embd-1", promptTokenIds: [100, 101], pooling: { normalize: false, dimensions: 2 }, priority: 0, cacheSalt: null, arrivalMs: 0 });
    expect(lines).toEqual(["Received request embd-1: prompt: 'ab', params: PoolingParams(task=embed, normalize=False, dimensions=2, use_activation=None, step_tag_id=None, returned_token_ids=None, requires_token_ids=False, skip_reading_prefix_cache=False, truncate_prompt_tokens=None, extra_kwargs=None), prompt_token_ids: [100, 101], lora_request: None."]);
    expect(logged.pooler).toBe(fake.pooler);
  });

  test("/invocations routes an `input` body to /v1/embeddings", async () => {
    const { call } = poolingServer();
    const body = await (await call("POST", "/invocations", { input: [5, 6], normalize: false })).json() as Json;
    expect(body.data[0].embedding).toEqual([2, 5, 6, 11]);
  });
});

describe("/score and /rerank on an embedding model", () => {
  const cos = (a: number[], b: number[]): number => a.reduce((s, x, i) => s + x * b[i]!, 0) / (Math.hypot(...a) * Math.hypot(...b));
  /** the fake's unnormalised vector of a text (BOS + characters) */
  const vec = (text: string): number[] => {
    const ids = [1, ...[...text].map((c) => c.charCodeAt(0) + 3)];
    return [ids.length, ids[0]!, ids.at(-1)!, ids.reduce((a, b) => a + b, 0)];
  };

  test("1:N and N:N pairs score the cosine similarity of their embeddings; usage counts every pair's tokens", async () => {
    const { call } = poolingServer();
    for (const path of ["/score", "/v1/score"]) {
      const one = await (await call("POST", path, { text_1: "ab", text_2: ["ab", "xyz", "q"] })).json() as Json;
      expect(one.id).toMatch(/^score-/);
      expect(one.object).toBe("list");
      expect(one.data.map((d: Json) => [d.index, d.object])).toEqual([[0, "score"], [1, "score"], [2, "score"]]);
      expect(one.data[0].score).toBeCloseTo(1, 6);
      expect(one.data[1].score).toBeCloseTo(cos(vec("ab"), vec("xyz")), 6);
      expect(one.usage).toEqual({ prompt_tokens: 3 * 3 + 3 + 4 + 2, total_tokens: 18, completion_tokens: 0, prompt_tokens_details: null });
    }
    const pairs = await (await call("POST", "/score", { text_1: ["ab", "q"], text_2: ["xyz", "q"] })).json() as Json;
    expect(pairs.data[0].score).toBeCloseTo(cos(vec("ab"), vec("xyz")), 6);
    expect(pairs.data[1].score).toBeCloseTo(1, 6);
  });

  test("mismatched or empty lists and classifier fields are vLLM's 400s", async () => {
    const { call, seen } = poolingServer();
    const cases: [Json, string][] = [
      [{ text_1: ["a", "b"], text_2: ["c", "d", "e"] }, "Input lengths must be either 1:1, 1:N or N:N"],
      [{ text_1: [], text_2: ["c"] }, "At least one text element must be given"],
      [{ text_1: "a", text_2: [] }, "At least one text_pair element must be given"],
      [{ text_1: "a", text_2: "b", use_activation: true }, "does not support ['use_activation'] parameters"],
    ];
    for (const [body, message] of cases) {
      const r = await call("POST", "/score", body);
      expect(r.status).toBe(400);
      expect(((await r.json()) as Json).error.message).toContain(message);
    }
    expect(seen).toHaveLength(0);
  });

  test("/rerank orders the documents by score, best first; top_n keeps the best n", async () => {
    const { call } = poolingServer();
    const documents = ["xyz", "ab", "q"];
    for (const path of ["/rerank", "/v1/rerank", "/v2/rerank"]) {
      const all = await (await call("POST", path, { query: "ab", documents })).json() as Json;
      expect(all.id).toMatch(/^rerank-/);
      const expected = documents.map((d, index) => ({ index, score: cos(vec("ab"), vec(d)) })).sort((a, b) => b.score - a.score);
      expect(all.results.map((r: Json) => r.index)).toEqual(expected.map((e) => e.index));
      expect(all.results[0]).toEqual({ index: 1, document: { text: "ab", multi_modal: null }, relevance_score: expect.closeTo(1, 6) });
      expect(all.usage).toEqual({ total_tokens: 3 * 3 + 4 + 3 + 2 });
    }
    const top = await (await call("POST", "/rerank", { query: "ab", documents, top_n: 1 })).json() as Json;
    expect(top.results).toHaveLength(1);
    expect(top.results[0].index).toBe(1);
  });

  test("/invocations routes text_1 bodies to /score and documents bodies to /rerank", async () => {
    const { call } = poolingServer();
    expect(((await (await call("POST", "/invocations", { text_1: "ab", text_2: "ab" })).json()) as Json).data[0].score).toBeCloseTo(1, 6);
    expect(((await (await call("POST", "/invocations", { query: "ab", documents: ["q", "ab"] })).json()) as Json).results[0].index).toBe(1);
  });

  test("a generative model answers vLLM's 400 on /score and /rerank", async () => {
    const { call } = testServer();
    expect(((await (await call("POST", "/score", { text_1: "a", text_2: "b" })).json()) as Json).error.message).toBe("The model does not support Score API");
    expect(((await (await call("POST", "/rerank", { query: "a", documents: ["b"] })).json()) as Json).error.message).toBe("The model does not support Rerank (Score) API");
  });
});
