/**
 * vLLM's render endpoints (/v1/completions/render, /v1/chat/completions/render) on the fake orchestrator: the prompt's
 * token ids exactly as the generating route would send them to the engine, vLLM's GenerateRequest fields, the same
 * 400 / 404 checks, and nothing reaches the engine.
 */
import { describe, expect, test } from "bun:test";
import { testServer, type Json } from "./helpers.ts";

const GENERATE_REQUEST_KEYS = ["request_id", "token_ids", "features", "sampling_params", "model", "stream", "stream_options", "cache_salt", "priority", "kv_transfer_params"];

describe("POST /v1/completions/render", () => {
  test("one GenerateRequest per prompt with the tokens /v1/completions sends, and no engine request", async () => {
    const s = testServer();
    const res = await s.call("POST", "/v1/completions/render", { model: "fake-model", prompt: ["Once upon", "a time"], max_tokens: 7, temperature: 0.5, seed: 3, cache_salt: "s1" });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json[];
    expect(s.fake.requests).toHaveLength(0);
    expect(body).toHaveLength(2);
    for (const r of body) expect(Object.keys(r)).toEqual(GENERATE_REQUEST_KEYS);
    expect(body[0]!.token_ids).toEqual(s.fake.tokenizer.encode("Once upon", { addSpecial: true, parseSpecial: true }));
    expect(body[1]!.token_ids).toEqual(s.fake.tokenizer.encode("a time", { addSpecial: true, parseSpecial: true }));
    expect(body[0]!.request_id).not.toBe(body[1]!.request_id);
    expect(body[0]!.request_id).toMatch(/^cmpl-/);
    expect(body[0]).toMatchObject({ features: null, model: "fake-model", stream: false, stream_options: null, cache_salt: "s1", priority: 0, kv_transfer_params: null });
    expect(body[0]!.sampling_params).toMatchObject({ n: 1, temperature: 0.5, seed: 3, max_tokens: 7, top_p: 1, top_k: 0, stop: [], structured_outputs: null });

    // the generating route sends the same tokens
    const gen = await s.call("POST", "/v1/completions", { prompt: ["Once upon", "a time"], max_tokens: 7 });
    expect(gen.status).toBe(200);
    expect(s.fake.requests.map((r) => r.promptTokenIds)).toEqual(body.map((r) => r.token_ids));
  });

  test("token-id prompts pass through; max_tokens left out is resolved; stream options get vLLM's defaults", async () => {
    const s = testServer();
    const ids = (await (await s.call("POST", "/v1/completions/render", { prompt: [5, 6, 7] })).json()) as Json[];
    expect(ids.map((r) => r.token_ids)).toEqual([[5, 6, 7]]);
    const body = (await (await s.call("POST", "/v1/completions/render", { prompt: "abc", stream: true, stream_options: { include_usage: false } })).json()) as Json[];
    expect(body[0]!.sampling_params.max_tokens).toBe(16);
    expect(body[0]!.stream).toBe(true);
    expect(body[0]!.stream_options).toEqual({ include_usage: false, continuous_usage_stats: false });
    expect(body[0]!.model).toBeNull();
  });

  test("the generating route's checks: a bad parameter is 400, another model 404", async () => {
    const s = testServer();
    const bad = await s.call("POST", "/v1/completions/render", { prompt: "abc", temperature: 9 });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as Json).error.param).toBe("temperature");
    const other = await s.call("POST", "/v1/completions/render", { model: "gpt-4", prompt: "abc" });
    expect(other.status).toBe(404);
    expect(s.fake.requests).toHaveLength(0);
  });
});

describe("POST /v1/chat/completions/render", () => {
  test("one GenerateRequest with the templated prompt's tokens /v1/chat/completions sends", async () => {
    const s = testServer();
    const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello there" }];
    const res = await s.call("POST", "/v1/chat/completions/render", { messages, max_completion_tokens: 9, response_format: { type: "json_object" } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    expect(Object.keys(body)).toEqual(GENERATE_REQUEST_KEYS);
    expect(body.request_id).toMatch(/^chatcmpl-/);
    expect(body.sampling_params.max_tokens).toBe(9);
    expect(body.sampling_params.structured_outputs).toEqual({ json_object: true });
    expect(s.fake.requests).toHaveLength(0);
    const gen = await s.call("POST", "/v1/chat/completions", { messages, max_completion_tokens: 9 });
    expect(gen.status).toBe(200);
    expect(s.fake.requests[0]!.promptTokenIds).toEqual(body.token_ids);
    expect(body.token_ids.length).toBeGreaterThan(3);
  });

  test("empty messages is the chat route's 400", async () => {
    const s = testServer();
    const res = await s.call("POST", "/v1/chat/completions/render", { messages: [] });
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error.param).toBe("messages");
  });
});
