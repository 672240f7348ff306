// The OpenAI-compatible endpoints over app.handle against a fake orchestrator: shapes, streaming order, usage, n,
// stops, logprobs, per-request metrics, aborts. The black-box suite (test/e2e) repeats the key cases on a real process.
import { describe, expect, test } from "bun:test";
import { readSse, testServer, type Json } from "./helpers.ts";

const chat = (extra: Json = {}) => ({ messages: [{ role: "user", content: "Hi" }], max_tokens: 5, seed: 3, ...extra });

describe("chat completions", () => {
  test("non-streaming body has vLLM's fields, usage adds up, metrics null when the feature is off", async () => {
    const s = testServer();
    const res = await s.call("POST", "/v1/chat/completions", chat());
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    expect(body.id).toMatch(/^chatcmpl-/);
    expect(body.object).toBe("chat.completion");
    expect(body.model).toBe("fake-model");
    expect(body.choices).toHaveLength(1);
    expect(body.choices[0].message.role).toBe("assistant");
    expect(body.choices[0].message.content).toHaveLength(5);
    expect(body.choices[0].finish_reason).toBe("length");
    expect(body.usage.completion_tokens).toBe(5);
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + body.usage.completion_tokens);
    expect(body.usage.prompt_tokens).toBe(s.fake.requests[0]!.promptTokenIds.length);
    expect("metrics" in body).toBe(true);
    expect(body.metrics).toBeNull();
  });

  test("every nullable vLLM field is present (chat and completions), system_fingerprint is fennec-<version>-<8 hex> and stable", async () => {
    const s = testServer();
    const chatBody = (await (await s.call("POST", "/v1/chat/completions", chat())).json()) as Json;
    for (const key of ["service_tier", "prompt_logprobs", "prompt_token_ids", "prompt_text", "kv_transfer_params", "ec_transfer_params", "metrics"]) {
      expect(chatBody).toHaveProperty(key, null);
    }
    for (const key of ["stop_reason", "token_ids", "routed_experts", "logprobs"]) expect(chatBody.choices[0]).toHaveProperty(key, null);
    expect(chatBody.system_fingerprint).toMatch(/^fennec-\d+\.\d+\.\d+-[0-9a-f]{8}$/);
    const completion = (await (await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 2 })).json()) as Json;
    for (const key of ["service_tier", "kv_transfer_params", "ec_transfer_params", "metrics"]) expect(completion).toHaveProperty(key, null);
    for (const key of ["stop_reason", "token_ids", "routed_experts", "logprobs", "prompt_logprobs", "prompt_token_ids"]) expect(completion.choices[0]).toHaveProperty(key, null);
    expect(completion.system_fingerprint).toBe(chatBody.system_fingerprint);
    // another served name is another configuration
    const other = (await (await testServer({ servedModelName: "other" }).call("POST", "/v1/chat/completions", chat())).json()) as Json;
    expect(other.system_fingerprint).not.toBe(chatBody.system_fingerprint);
  });

  test("stream: the fingerprint rides on the finish chunk, or on the usage chunk when there is one", async () => {
    const s = testServer();
    const plain = (await readSse(await s.call("POST", "/v1/chat/completions", chat({ stream: true })))).filter((e): e is Json => e !== "[DONE]");
    const finish = plain.filter((e) => e.choices[0]?.finish_reason);
    expect(finish).toHaveLength(1);
    expect(finish[0]!.system_fingerprint).toMatch(/^fennec-/);
    expect(plain.filter((e) => "system_fingerprint" in e)).toHaveLength(1);
    const withUsage = (await readSse(await s.call("POST", "/v1/chat/completions", chat({ stream: true, stream_options: { include_usage: true } })))).filter((e): e is Json => e !== "[DONE]");
    const carriers = withUsage.filter((e) => "system_fingerprint" in e);
    expect(carriers).toHaveLength(1);
    expect(carriers[0]!.choices).toEqual([]);
  });

  test("--enable-prompt-tokens-details: usage.prompt_tokens_details.cached_tokens in bodies and the final usage chunk; null otherwise", async () => {
    const s = testServer({ enablePromptTokensDetails: true }, { cachedTokens: 3 });
    const chatBody = (await (await s.call("POST", "/v1/chat/completions", chat())).json()) as Json;
    expect(chatBody.usage.prompt_tokens_details).toEqual({ cached_tokens: 3 });
    const two = (await (await s.call("POST", "/v1/completions", { prompt: ["ab", "cd"], max_tokens: 2 })).json()) as Json;
    expect(two.usage.prompt_tokens_details).toEqual({ cached_tokens: 6 });
    for (const [path, body] of [["/v1/chat/completions", chat({ stream: true, stream_options: { include_usage: true } })], ["/v1/completions", { prompt: "ab", max_tokens: 2, stream: true, stream_options: { include_usage: true } }]] as const) {
      const events = (await readSse(await s.call("POST", path, body))).filter((e): e is Json => e !== "[DONE]");
      expect(events.at(-1)!.usage.prompt_tokens_details).toEqual({ cached_tokens: 3 });
    }
    const off = (await (await testServer({}, { cachedTokens: 3 }).call("POST", "/v1/chat/completions", chat())).json()) as Json;
    expect(off.usage.prompt_tokens_details).toBeNull();
  });

  test("sampling fields reach the engine in camelCase", async () => {
    const s = testServer();
    await s.call("POST", "/v1/chat/completions", chat({ temperature: 0.5, top_k: 7, min_p: 0.1, repetition_penalty: 1.2, stop: "x", stop_token_ids: [5], ignore_eos: true, min_tokens: 2 }));
    const p = s.fake.requests[0]!.sampling;
    expect(p).toMatchObject({ temperature: 0.5, topK: 7, minP: 0.1, repetitionPenalty: 1.2, stop: ["x"], stopTokenIds: [5], ignoreEos: true, minTokens: 2, maxTokens: 5, seed: 3 });
  });

  test("--enable-request-id-headers: every response echoes X-Request-Id or gets a 32-hex one; off by default", async () => {
    const s = testServer({ enableRequestIdHeaders: true });
    const echoed = await s.call("POST", "/v1/chat/completions", chat(), { "x-request-id": "abc123" });
    expect(echoed.headers.get("x-request-id")).toBe("abc123");
    const stream = await s.call("POST", "/v1/chat/completions", chat({ stream: true }));
    await stream.text();
    expect(stream.headers.get("x-request-id")).toMatch(/^[0-9a-f]{32}$/);
    const error = await s.call("POST", "/v1/chat/completions", chat({ n: 0 }), { "x-request-id": "e1" });
    expect(error.status).toBe(400);
    expect(error.headers.get("x-request-id")).toBe("e1");
    expect((await s.call("GET", "/health")).headers.get("x-request-id")).toMatch(/^[0-9a-f]{32}$/);
    expect((await testServer().call("GET", "/health")).headers.get("x-request-id")).toBeNull();
  });

  test("echo (vLLM chat extra): the last message leads the answer when it has the answer's role; the role follows add_generation_prompt", async () => {
    const s = testServer();
    const continuing = { messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: "Once" }], add_generation_prompt: false, echo: true, max_tokens: 3 };
    const body = (await (await s.call("POST", "/v1/chat/completions", continuing)).json()) as Json;
    expect(body.choices[0].message.role).toBe("assistant");
    expect(body.choices[0].message.content.startsWith("Once")).toBe(true);
    expect(body.choices[0].message.content).toHaveLength(4 + 3);
    // the last message is the user's and the answer is the assistant's: nothing to echo
    const plain = (await (await s.call("POST", "/v1/chat/completions", chat({ echo: true, max_tokens: 3 }))).json()) as Json;
    expect(plain.choices[0].message.content).toHaveLength(3);
    // without a generation prompt the answer continues the last message in its role
    const userTurn = (await (await s.call("POST", "/v1/chat/completions", chat({ add_generation_prompt: false, max_tokens: 2 }))).json()) as Json;
    expect(userTurn.choices[0].message.role).toBe("user");
    const events = (await readSse(await s.call("POST", "/v1/chat/completions", { ...continuing, stream: true }))).filter((e): e is Json => e !== "[DONE]");
    expect(events[0]!.choices[0].delta).toEqual({ role: "assistant", content: "" });
    expect(events[1]!.choices[0].delta).toEqual({ content: "Once" });
    const streamed = events.map((e) => e.choices[0]?.delta?.content ?? "").join("");
    expect(streamed.startsWith("Once")).toBe(true);
    expect(streamed).toHaveLength(4 + 3);
  });

  test("X-Request-Id becomes the response id", async () => {
    const s = testServer();
    const body = (await (await s.call("POST", "/v1/chat/completions", chat(), { "x-request-id": "abc123" })).json()) as Json;
    expect(body.id).toBe("chatcmpl-abc123");
  });

  test("stream: role chunk first, deltas equal the non-streamed text, one finish chunk, [DONE] last, no usage", async () => {
    const s = testServer();
    const plain = (await (await s.call("POST", "/v1/chat/completions", chat())).json()) as Json;
    const res = await s.call("POST", "/v1/chat/completions", chat({ stream: true }));
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = await readSse(res);
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1) as Json[];
    expect(chunks[0]!.choices[0].delta).toEqual({ role: "assistant", content: "" });
    expect(chunks.every((c) => c.object === "chat.completion.chunk" && c.id === chunks[0]!.id)).toBe(true);
    expect(chunks.every((c) => !("usage" in c))).toBe(true);
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    expect(text).toBe(plain.choices[0].message.content);
    const finishes = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finishes).toHaveLength(1);
    expect(finishes[0]!.choices[0].finish_reason).toBe("length");
    expect(chunks.at(-1)).toBe(finishes[0]!);
  });

  test("include_usage: final chunk has choices [] and the totals; continuous usage grows on every chunk", async () => {
    const s = testServer();
    const events = (await readSse(await s.call("POST", "/v1/chat/completions", chat({ stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } })))).slice(0, -1) as Json[];
    const last = events.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage.completion_tokens).toBe(5);
    expect(last.usage.total_tokens).toBe(last.usage.prompt_tokens + 5);
    expect(events.every((c) => c.usage !== undefined)).toBe(true);
    const counts = events.slice(0, -1).map((c) => c.usage.completion_tokens);
    expect(counts[0]).toBe(0);
    for (let i = 1; i < counts.length; i++) expect(counts[i]).toBeGreaterThanOrEqual(counts[i - 1]);
    expect(last).not.toHaveProperty("metrics");
  });

  test("include_usage without continuous stats: only the final chunk has usage", async () => {
    const s = testServer();
    const events = (await readSse(await s.call("POST", "/v1/chat/completions", chat({ stream: true, stream_options: { include_usage: true } })))).slice(0, -1) as Json[];
    expect(events.filter((c) => c.usage !== undefined)).toHaveLength(1);
    expect(events.at(-1)!.choices).toEqual([]);
  });

  test("--enable-force-include-usage: usage on every chunk and the final usage chunk without stream_options", async () => {
    const s = testServer({ forceIncludeUsage: true });
    const events = (await readSse(await s.call("POST", "/v1/chat/completions", chat({ stream: true })))).slice(0, -1) as Json[];
    expect(events.every((c) => c.usage !== undefined)).toBe(true);
    expect(events.at(-1)!.choices).toEqual([]);
  });

  test("n=2: two distinct choices by index, streamed with one role and one finish chunk each", async () => {
    const s = testServer();
    const body = (await (await s.call("POST", "/v1/chat/completions", chat({ n: 2 }))).json()) as Json;
    expect(body.choices.map((c: Json) => c.index)).toEqual([0, 1]);
    expect(body.choices[0].message.content).not.toBe(body.choices[1].message.content);
    expect(body.usage.completion_tokens).toBe(10);
    const chunks = (await readSse(await s.call("POST", "/v1/chat/completions", chat({ n: 2, stream: true })))).slice(0, -1) as Json[];
    for (const index of [0, 1]) {
      const mine = chunks.filter((c) => c.choices[0].index === index);
      expect(mine[0]!.choices[0].delta.role).toBe("assistant");
      expect(mine.filter((c) => c.choices[0].finish_reason !== null)).toHaveLength(1);
      expect(mine.map((c) => c.choices[0].delta.content ?? "").join("")).toBe(body.choices[index].message.content);
    }
  });

  test("stop string: text cut before it, finish_reason stop, stop_reason the string", async () => {
    const s = testServer();
    const body = (await (await s.call("POST", "/v1/chat/completions", chat({ seed: 0, max_tokens: 30, stop: ["time"] }))).json()) as Json;
    expect(body.choices[0].message.content).toBe("Once upon a ");
    expect(body.choices[0].finish_reason).toBe("stop");
    expect(body.choices[0].stop_reason).toBe("time");
  });

  test("logprobs with top_logprobs", async () => {
    const s = testServer();
    const body = (await (await s.call("POST", "/v1/chat/completions", chat({ logprobs: true, top_logprobs: 2 }))).json()) as Json;
    const content = body.choices[0].logprobs.content;
    expect(content).toHaveLength(5);
    expect(content.map((e: Json) => e.token).join("")).toBe(body.choices[0].message.content);
    expect(content[0].top_logprobs).toHaveLength(2);
    expect(content[0].bytes).toEqual([...new TextEncoder().encode(content[0].token)]);
  });

  test("the same seed gives the same text", async () => {
    const s = testServer();
    const a = (await (await s.call("POST", "/v1/chat/completions", chat({ seed: 11 }))).json()) as Json;
    const b = (await (await s.call("POST", "/v1/chat/completions", chat({ seed: 11 }))).json()) as Json;
    expect(a.choices[0].message.content).toBe(b.choices[0].message.content);
  });
});

describe("completions", () => {
  test("string prompt, default max_tokens 16", async () => {
    const s = testServer();
    const body = (await (await s.call("POST", "/v1/completions", { prompt: "Hello" })).json()) as Json;
    expect(body.object).toBe("text_completion");
    expect(body.id).toMatch(/^cmpl-/);
    expect(body.choices[0].text).toHaveLength(16);
    expect(body.usage.prompt_tokens).toBe(6); // BOS + 5 characters
    expect(body.metrics).toBeNull();
  });

  test("token-id prompt is passed through untouched", async () => {
    const s = testServer();
    const res = await s.call("POST", "/v1/completions", { prompt: [1, 75, 76], max_tokens: 2 });
    expect(res.status).toBe(200);
    expect(s.fake.requests[0]!.promptTokenIds).toEqual([1, 75, 76]);
  });

  test("several prompts x n=2: choices numbered prompt_index * n + i, in order", async () => {
    const s = testServer({ enablePerRequestMetrics: true });
    const body = (await (await s.call("POST", "/v1/completions", { prompt: ["a", "bb"], n: 2, max_tokens: 3, temperature: 1 })).json()) as Json;
    expect(body.choices.map((c: Json) => c.index)).toEqual([0, 1, 2, 3]);
    expect(body.usage.prompt_tokens).toBe(2 + 3);
    expect(body.usage.completion_tokens).toBe(12);
    expect(body.metrics).toBeNull();
    const chunks = (await readSse(await s.call("POST", "/v1/completions", { prompt: [[1, 70], [1, 71]], max_tokens: 3, stream: true }))).slice(0, -1) as Json[];
    const finished = chunks.filter((c) => c.choices[0].finish_reason !== null).map((c) => c.choices[0].index).sort();
    expect(finished).toEqual([0, 1]);
  });

  test("stream with include_usage: deltas, finish, usage chunk with metrics when enabled", async () => {
    const s = testServer({ enablePerRequestMetrics: true });
    const chunks = (await readSse(await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 4, stream: true, stream_options: { include_usage: true } }))).slice(0, -1) as Json[];
    expect(chunks.map((c) => c.choices[0]?.text ?? "").join("")).toHaveLength(4);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.metrics.time_to_first_token_ms).toBeGreaterThan(0);
    expect(chunks.slice(0, -1).every((c) => !("metrics" in c))).toBe(true);
  });

  test("logprobs in the legacy format", async () => {
    const s = testServer();
    const body = (await (await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 3, logprobs: 1 })).json()) as Json;
    const lp = body.choices[0].logprobs;
    expect(lp.tokens.join("")).toBe(body.choices[0].text);
    expect(lp.token_logprobs).toHaveLength(3);
    expect(lp.text_offset).toEqual([0, 1, 2]);
    expect(Object.keys(lp.top_logprobs[0]).length).toBeGreaterThanOrEqual(1);
  });

  test("echo prefixes the prompt", async () => {
    const s = testServer();
    const body = (await (await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 2, echo: true })).json()) as Json;
    expect(body.choices[0].text.startsWith("Hi")).toBe(true);
    expect(body.choices[0].text).toHaveLength(4);
  });

  test("echo with logprobs: the prompt's tokens come first in the logprobs (first one null), as vLLM scores the prompt", async () => {
    const s = testServer();
    const body = (await (await s.call("POST", "/v1/completions", { prompt: "abc", max_tokens: 2, logprobs: 1, echo: true })).json()) as Json;
    const lp = body.choices[0].logprobs;
    const promptIds = s.fake.tokenizer.encode("abc", { addSpecial: true, parseSpecial: true });
    const promptTokens = promptIds.map((id: number) => s.fake.tokenizer.tokenText(id));
    expect(lp.tokens).toHaveLength(promptIds.length + 2);
    expect(lp.tokens.slice(0, promptIds.length)).toEqual(promptTokens);
    expect(lp.token_logprobs[0]).toBeNull();
    expect(lp.top_logprobs[0]).toBeNull();
    for (const v of lp.token_logprobs.slice(1)) expect(typeof v).toBe("number");
    // offsets run over the token texts from 0, prompt then output
    const texts: string[] = lp.tokens;
    expect(lp.text_offset).toEqual(texts.map((_, i) => texts.slice(0, i).join("").length));
    expect(body.choices[0].prompt_logprobs).toHaveLength(promptIds.length);

    const events = await readSse(await s.call("POST", "/v1/completions", { prompt: "abc", max_tokens: 2, logprobs: 1, echo: true, stream: true }));
    const first = events[0] as Json;
    expect(first.choices[0].text).toBe("abc");
    expect(first.choices[0].logprobs.tokens).toEqual(promptTokens);
    expect(first.choices[0].logprobs.token_logprobs[0]).toBeNull();
    const streamed = events.slice(1).filter((e): e is Json => e !== "[DONE]").flatMap((e) => e.choices[0]?.logprobs?.text_offset ?? []);
    expect(streamed).toEqual(lp.text_offset.slice(promptIds.length));
  });
});

describe("vLLM extras: return_token_ids, prompt_logprobs, response_format", () => {
  test("return_token_ids: generated ids per choice and the prompt ids, in bodies and stream chunks", async () => {
    const s = testServer();
    const chatBody = (await (await s.call("POST", "/v1/chat/completions", chat({ return_token_ids: true }))).json()) as Json;
    expect(chatBody.prompt_token_ids).toEqual(s.fake.requests[0]!.promptTokenIds);
    expect(s.fake.tokenizer.decode(chatBody.choices[0].token_ids)).toBe(chatBody.choices[0].message.content);
    const comp = (await (await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 3, return_token_ids: true })).json()) as Json;
    expect(comp.choices[0].prompt_token_ids).toEqual([1, 75, 108]);
    expect(comp.choices[0].token_ids).toHaveLength(3);
    const chunks = (await readSse(await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 3, return_token_ids: true, stream: true }))).slice(0, -1) as Json[];
    expect(chunks.flatMap((c) => c.choices[0].token_ids)).toEqual(comp.choices[0].token_ids);
    const plain = (await (await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 3 })).json()) as Json;
    expect(plain.choices[0].token_ids).toBeNull();
  });

  test("prompt_logprobs: one entry per prompt token, the first null; refused with streaming", async () => {
    const s = testServer();
    const body = (await (await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 2, prompt_logprobs: 2 })).json()) as Json;
    const plp = body.choices[0].prompt_logprobs;
    expect(plp).toHaveLength(3);
    expect(plp[0]).toBeNull();
    expect(plp[1]["75"]).toEqual({ logprob: -1.5, rank: 3, decoded_token: "H" });
    expect(Object.keys(plp[1])).toHaveLength(3);
    expect(s.fake.requests[0]!.sampling.promptLogprobs).toBe(2);
    const chatBody = (await (await s.call("POST", "/v1/chat/completions", chat({ prompt_logprobs: 0 }))).json()) as Json;
    expect(chatBody.prompt_logprobs).toHaveLength(chatBody.usage.prompt_tokens);
    const refused = await s.call("POST", "/v1/completions", { prompt: "Hi", prompt_logprobs: 1, stream: true });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as Json).error.param).toBe("prompt_logprobs");
  });

  test("truncate_prompt_tokens keeps the last k prompt tokens (-1: what fits beside the output)", async () => {
    const s = testServer({}, { maxModelLen: 64 });
    const body = (await (await s.call("POST", "/v1/completions", { prompt: "Hello there", max_tokens: 2, truncate_prompt_tokens: 4, return_token_ids: true, echo: true })).json()) as Json;
    expect(s.fake.requests[0]!.promptTokenIds).toHaveLength(4);
    expect(body.usage.prompt_tokens).toBe(4);
    expect(body.choices[0].text.startsWith("here")).toBe(true);
    await s.call("POST", "/v1/chat/completions", chat({ truncate_prompt_tokens: 3 }));
    expect(s.fake.requests[1]!.promptTokenIds).toHaveLength(3);
    // a prompt longer than the context fits once truncated to the context's size
    expect((await s.call("POST", "/v1/completions", { prompt: "x".repeat(100), max_tokens: 4 })).status).toBe(400);
    expect((await s.call("POST", "/v1/completions", { prompt: "x".repeat(100), truncate_prompt_tokens: 10, max_tokens: 4 })).status).toBe(200);
    const chatRes = (await (await s.call("POST", "/v1/chat/completions", { messages: [{ role: "user", content: "x".repeat(100) }], truncate_prompt_tokens: -1 })).json()) as Json;
    expect(chatRes.usage).toEqual({ prompt_tokens: 63, completion_tokens: 1, total_tokens: 64, prompt_tokens_details: null });
    await s.call("POST", "/v1/completions", { prompt: "x".repeat(100), truncate_prompt_tokens: -1, max_tokens: 8 });
    expect(s.fake.requests.at(-1)!.promptTokenIds).toHaveLength(56);
  });

  test("what the server was not started for is refused, not ignored: tool calls without a parser, beam search, best_of != n", async () => {
    const s = testServer();
    const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }];
    expect((await s.call("POST", "/v1/chat/completions", chat({ tools, tool_choice: "none" }))).status).toBe(200);
    for (const [body, param] of [
      // tools without tool_choice mean "auto" (vLLM's default), which needs --enable-auto-tool-choice
      [chat({ tools }), "tool_choice"],
      [chat({ tools, tool_choice: "auto" }), "tool_choice"],
      [chat({ tools, tool_choice: { type: "function", function: { name: "get_weather" } } }), "tool_choice"],
      [chat({ use_beam_search: true }), "use_beam_search"],
    ] as const) {
      const res = await s.call("POST", "/v1/chat/completions", body);
      expect(res.status).toBe(400);
      expect(((await res.json()) as Json).error.param).toBe(param);
    }
    expect((await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 2, best_of: 1 })).status).toBe(200);
    const bestOf = await s.call("POST", "/v1/completions", { prompt: "Hi", best_of: 3 });
    expect(bestOf.status).toBe(400);
    expect(((await bestOf.json()) as Json).error.param).toBe("best_of");
  });

  test("response_format: text is free text, json_object reaches the engine as a grammar (test/server/structured-outputs.test.ts has the rest)", async () => {
    const s = testServer();
    expect((await s.call("POST", "/v1/chat/completions", chat({ response_format: { type: "text" } }))).status).toBe(200);
    expect(s.fake.requests.at(-1)!.sampling.structuredOutputs).toBeNull();
    expect((await s.call("POST", "/v1/chat/completions", chat({ response_format: { type: "json_object" } }))).status).toBe(200);
    expect(s.fake.requests.at(-1)!.sampling.structuredOutputs).toEqual({ kind: "json_object", anyWhitespace: true });
  });
});

describe("per-request metrics", () => {
  test("non-streaming: fields obey vLLM's arithmetic", async () => {
    const s = testServer({ enablePerRequestMetrics: true }, { stepDelayMs: 3 });
    const body = (await (await s.call("POST", "/v1/chat/completions", chat({ max_tokens: 6 }))).json()) as Json;
    const m = body.metrics;
    const n = body.usage.completion_tokens;
    expect(n).toBe(6);
    expect(m.time_to_first_token_ms).toBeGreaterThan(0);
    expect(m.queue_time_ms).toBeGreaterThan(0);
    expect(m.generation_time_ms).toBeGreaterThan(0);
    expect(m.mean_itl_ms).toBeCloseTo(m.generation_time_ms / (n - 1), 6);
    expect(m.tokens_per_second).toBeCloseTo(n / ((m.time_to_first_token_ms + m.generation_time_ms) / 1000), 6);
  });

  test("one-token answer: mean_itl_ms null in the body, omitted in the stream's usage chunk", async () => {
    const s = testServer({ enablePerRequestMetrics: true });
    const body = (await (await s.call("POST", "/v1/chat/completions", chat({ max_tokens: 1 }))).json()) as Json;
    expect(body.metrics.mean_itl_ms).toBeNull();
    expect(body.metrics.generation_time_ms).toBe(0);
    const chunks = (await readSse(await s.call("POST", "/v1/chat/completions", chat({ max_tokens: 1, stream: true, stream_options: { include_usage: true } })))).slice(0, -1) as Json[];
    const m = chunks.at(-1)!.metrics;
    expect(m).toBeDefined();
    expect("mean_itl_ms" in m).toBe(false);
    expect(m.time_to_first_token_ms).toBeGreaterThan(0);
  });

  test("n > 1: metrics null; stream without include_usage: no metrics anywhere", async () => {
    const s = testServer({ enablePerRequestMetrics: true });
    const body = (await (await s.call("POST", "/v1/chat/completions", chat({ n: 2 }))).json()) as Json;
    expect(body.metrics).toBeNull();
    const chunks = (await readSse(await s.call("POST", "/v1/chat/completions", chat({ stream: true })))).slice(0, -1) as Json[];
    expect(chunks.some((c) => "metrics" in c)).toBe(false);
    const n2 = (await readSse(await s.call("POST", "/v1/chat/completions", chat({ n: 2, stream: true, stream_options: { include_usage: true } })))).slice(0, -1) as Json[];
    expect(n2.some((c) => "metrics" in c)).toBe(false);
  });

  test("forced usage carries metrics on the final chunk only", async () => {
    const s = testServer({ enablePerRequestMetrics: true, forceIncludeUsage: true });
    const chunks = (await readSse(await s.call("POST", "/v1/chat/completions", chat({ stream: true })))).slice(0, -1) as Json[];
    expect(chunks.filter((c) => "metrics" in c)).toHaveLength(1);
    expect(chunks.at(-1)!.metrics.tokens_per_second).toBeGreaterThan(0);
  });
});

describe("aborts and shutdown", () => {
  test("a client that stops reading mid-stream aborts its request in the engine", async () => {
    const s = testServer({}, { stepDelayMs: 5 });
    const res = await s.call("POST", "/v1/chat/completions", chat({ max_tokens: 200, stream: true }));
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    expect(s.fake.running()).toBe(1);
    await reader.cancel();
    for (let i = 0; i < 50 && s.fake.running() > 0; i++) await Bun.sleep(5);
    expect(s.fake.running()).toBe(0);
    expect(s.fake.abortedIds).toHaveLength(1);
    const publicId = s.fake.abortedIds[0]!.replace(/-[0-9a-f]{8}$/, "");
    expect(s.logs.filter((l) => l.endsWith("aborted: the client disconnected"))).toEqual([`${publicId} aborted: the client disconnected`]);
  });

  test("an aborted request signal (client gone before the body) aborts a non-streaming request", async () => {
    const s = testServer({}, { stepDelayMs: 5 });
    const controller = new AbortController();
    const pending = s.app.handle(new Request("http://localhost/v1/chat/completions", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(chat({ max_tokens: 200 })), signal: controller.signal,
    }));
    await Bun.sleep(30);
    controller.abort();
    await pending.catch(() => {});
    for (let i = 0; i < 50 && s.fake.running() > 0; i++) await Bun.sleep(5);
    expect(s.fake.running()).toBe(0);
    expect(s.fake.abortedIds).toHaveLength(1);
    expect(s.logs.filter((l) => l.endsWith("aborted: the client disconnected"))).toHaveLength(1);
  });

  test("shutdown answers an in-flight non-streaming request with a 503 error object", async () => {
    const s = testServer({}, { stepDelayMs: 5 });
    const pending = s.call("POST", "/v1/chat/completions", chat({ max_tokens: 200 }));
    setTimeout(() => s.shutdown.abort(), 40);
    const res = await pending;
    expect(res.status).toBe(503);
    expect(((await res.json()) as Json).error.type).toBe("ServiceUnavailableError");
    expect(s.fake.running()).toBe(0);
  });

  test("shutdown ends an in-flight stream with an error event, then [DONE]", async () => {
    const s = testServer({}, { stepDelayMs: 5 });
    const res = await s.call("POST", "/v1/chat/completions", chat({ max_tokens: 200, stream: true }));
    setTimeout(() => s.shutdown.abort(), 40);
    const events = await readSse(res);
    expect(events.at(-1)).toBe("[DONE]");
    const error = events.at(-2) as Json;
    expect(error.error.code).toBe(503);
    expect(error.error.message).toContain("shutting down");
    expect(s.logs.some((l) => l.includes("client disconnected"))).toBe(false);
  });
});

describe("GET /load (--enable-server-load-tracking)", () => {
  const load = async (s: ReturnType<typeof testServer>) => ((await (await s.call("GET", "/load")).json()) as Json).server_load as number;

  test("counts generation requests until their response is over: stream to its end or its cancel, body, refused ones not at all", async () => {
    const s = testServer({ enableServerLoadTracking: true }, { stepDelayMs: 20 });
    expect(await load(s)).toBe(0);
    const pending = s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 5 });
    await Bun.sleep(30);
    expect(await load(s)).toBe(1);
    await (await pending).text();
    expect(await load(s)).toBe(0);
    const stream = await s.call("POST", "/v1/chat/completions", chat({ stream: true, max_tokens: 20 }));
    const reader = stream.body!.getReader();
    await reader.read();
    expect(await load(s)).toBe(1);
    await reader.cancel();
    expect(await load(s)).toBe(0);
    const full = await s.call("POST", "/v1/chat/completions", chat({ stream: true, max_tokens: 3 }));
    await full.text();
    expect(await load(s)).toBe(0);
    expect((await s.call("POST", "/v1/chat/completions", chat({ n: 0 }))).status).toBe(400);
    expect(await load(s)).toBe(0);
  });

  test("without the flag /load answers 0 while requests run (vLLM's route exists either way)", async () => {
    const s = testServer({}, { stepDelayMs: 20 });
    const pending = s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 5 });
    await Bun.sleep(30);
    expect(await load(s)).toBe(0);
    await (await pending).text();
  });
});

describe("/invocations (SageMaker)", () => {
  test("routes by body shape to chat or completions, answers as that route, and stays open under --api-key", async () => {
    const s = testServer({ apiKey: "k" });
    const chatBody = (await (await s.call("POST", "/invocations", chat())).json()) as Json;
    expect(chatBody.object).toBe("chat.completion");
    expect(chatBody.choices[0].message.content).toHaveLength(5);
    const events = await readSse(await s.call("POST", "/invocations", { prompt: "Hi", max_tokens: 2, stream: true }));
    expect((events[0] as Json).object).toBe("text_completion");
    expect(events.at(-1)).toBe("[DONE]");
    // the route's own errors come back unchanged; a body neither route takes is a 400
    const bad = await s.call("POST", "/invocations", { prompt: "x", n: 0 });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as Json).error.message).toMatch(/^n must be at least 1/);
    const neither = await s.call("POST", "/invocations", { foo: 1 });
    expect(neither.status).toBe(400);
    expect(((await neither.json()) as Json).error.message).toMatch(/`messages`, `prompt`/);
    // the /v1 route itself still needs the key
    expect((await s.call("POST", "/v1/chat/completions", chat())).status).toBe(401);
  });

  test("the HTTP metrics count an invocation once, under /invocations", async () => {
    const handlers: (string | null)[] = [];
    const s = testServer({ onHttpResponse: (e) => void handlers.push(e.handler) });
    await (await s.call("POST", "/invocations", chat())).text();
    await Bun.sleep(10);
    expect(handlers).toEqual(["/invocations"]);
  });
});

describe("tokenize, models, health, version", () => {
  test("tokenize -> detokenize round trip, with token strings", async () => {
    const s = testServer();
    const tok = (await (await s.call("POST", "/tokenize", { prompt: "Hello fox", return_token_strs: true })).json()) as Json;
    expect(tok.count).toBe(10);
    expect(tok.max_model_len).toBe(256);
    expect(tok.token_strs.slice(1).join("")).toBe("Hello fox");
    const detok = (await (await s.call("POST", "/detokenize", { tokens: tok.tokens.slice(1) })).json()) as Json;
    expect(detok.prompt).toBe("Hello fox");
    const chatTok = (await (await s.call("POST", "/tokenize", { messages: [{ role: "user", content: "Hi" }] })).json()) as Json;
    expect(chatTok.count).toBe("user: Hi\nassistant:".length);
    // vLLM's response model always has the key: null when not asked for
    expect(Object.keys(chatTok).sort()).toEqual(["count", "max_model_len", "token_strs", "tokens"]);
    expect(chatTok.token_strs).toBeNull();
  });

  test("/v1/models lists the served model with max_model_len", async () => {
    const s = testServer();
    const body = (await (await s.call("GET", "/v1/models")).json()) as Json;
    expect(body.object).toBe("list");
    expect(body.data[0]).toMatchObject({ id: "fake-model", object: "model", root: "/models/fake.gguf", max_model_len: 256 });
  });

  test("/health and /ping: 200 empty while healthy, 503 once the engine died; /version", async () => {
    const s = testServer();
    const ok = await s.call("GET", "/health");
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe("");
    expect((await s.call("POST", "/ping")).status).toBe(200);
    s.fake.setHealthy(false);
    expect((await s.call("GET", "/health")).status).toBe(503);
    expect((await s.call("GET", "/ping")).status).toBe(503);
    const version = (await (await s.call("GET", "/version")).json()) as Json;
    expect(version.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  test("CORS like vLLM's default: preflight answered without the API key, every response allows any origin", async () => {
    const s = testServer({ apiKey: "k" });
    // the openai SDK's browser build sends x-stainless-* headers: all headers are allowed by default (Starlette echoes them)
    const requested = "authorization, content-type, x-stainless-os, x-stainless-retry-count";
    const preflight = await s.call("OPTIONS", "/v1/chat/completions", undefined, { origin: "http://ui.example", "access-control-request-method": "POST", "access-control-request-headers": requested });
    expect(preflight.status).toBe(200);
    expect(preflight.headers.get("access-control-allow-headers")).toBe(requested);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("*");
    expect(preflight.headers.get("access-control-allow-methods")).toContain("POST");
    for (const res of [await s.call("GET", "/health"), await s.call("GET", "/v1/models"), await s.call("POST", "/v1/completions", { prompt: "a", max_tokens: 2, stream: true }, { authorization: "Bearer k" })]) {
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
    }
  });
});

describe("several prompts, one failing", () => {
  test("the siblings of a failed prompt are aborted, not left running", async () => {
    const s = testServer({}, { stepDelayMs: 3 });
    const generate = s.fake.generate.bind(s.fake);
    // the second prompt's request fails at once; the first would run for 200 tokens
    (s.fake as { generate: typeof generate }).generate = (request, signal) => {
      if (request.promptTokenIds.length === 3) return (async function* () { throw new Error("boom"); })();
      return generate(request, signal);
    };
    const res = await s.call("POST", "/v1/completions", { prompt: [[1, 70, 71, 72, 73], [1, 70, 71]], max_tokens: 200 });
    expect(res.status).toBe(500);
    for (let i = 0; i < 50 && s.fake.running() > 0; i++) await Bun.sleep(5);
    expect(s.fake.running()).toBe(0);
    expect(s.fake.abortedIds).toHaveLength(1);
  });
});
