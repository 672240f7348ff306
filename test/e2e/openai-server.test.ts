// Black-box suite: the real `fennec serve` process (dist/fennec when built) on the default stories260K model, driven by
// the official `openai` client and raw fetch. Covers the OpenAI/vLLM contract: chat and completions,
// streaming, n, stop, seeds, logprobs, tokenize, every error case, the API key, client disconnect, shutdown and every
// per-request-metrics rule.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import OpenAI from "openai";
import { runServeExpectingExit, startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(30_000);

const KEY = "test-key-123";
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
type Metrics = Record<string, number | null>;

let main: ServerProcess; // --api-key KEY --enable-per-request-metrics --enable-server-load-tracking
let plain: ServerProcess; // --enable-force-include-usage --served-model-name fennec-e2e --max-model-len 128 --enable-prompt-tokens-details; metrics off
let model = "";
let client: OpenAI;

beforeAll(async () => {
  [main, plain] = await Promise.all([
    // load tracking wraps every generation response: the disconnect tests below run through it
    startServer(["--api-key", KEY, "--enable-per-request-metrics", "--enable-server-load-tracking"]),
    startServer(["--enable-force-include-usage", "--served-model-name", "fennec-e2e", "--max-model-len", "128", "--enable-prompt-tokens-details"]),
  ]);
  client = new OpenAI({ baseURL: `${main.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60_000 });
  model = (await client.models.list()).data[0]!.id;
}, 180_000);

afterAll(async () => {
  await Promise.all([main?.stop(), plain?.stop()]);
});

const post = (server: ServerProcess, path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}`, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

async function sse(res: Response): Promise<(Json | "[DONE]")[]> {
  expect(res.headers.get("content-type")).toContain("text/event-stream");
  const text = await res.text();
  return text.split("\n\n").filter((e) => e.length > 0).map((e) => {
    expect(e.startsWith("data: ")).toBe(true);
    return e === "data: [DONE]" ? "[DONE]" : (JSON.parse(e.slice(6)) as Json);
  });
}

/** Prometheus sample value (sum over label sets matching `labelFilter`). */
async function metricValue(server: ServerProcess, name: string, labelFilter = ""): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) {
      if (labelFilter && !line.includes(labelFilter)) continue;
      sum += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return sum;
}

function expectMetricsArithmetic(m: Metrics, completionTokens: number): void {
  expect(m.time_to_first_token_ms).toBeGreaterThanOrEqual(0);
  expect(m.queue_time_ms).toBeGreaterThanOrEqual(0);
  expect(m.generation_time_ms).toBeGreaterThanOrEqual(0);
  expect(m.mean_itl_ms).toBeCloseTo(m.generation_time_ms! / (completionTokens - 1), 6);
  const inferenceS = (m.time_to_first_token_ms! + m.generation_time_ms!) / 1000;
  if (inferenceS > 0) expect(m.tokens_per_second).toBeCloseTo(completionTokens / inferenceS, 3);
}

describe("generation through the openai client", () => {
  test("models list", async () => {
    const models = await client.models.list();
    expect(models.data).toHaveLength(1);
    expect((models.data[0] as unknown as Json).max_model_len).toBeGreaterThan(0);
  });

  test("chat, non-streaming: shape, usage, per-request metrics arithmetic", async () => {
    const resp = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Tell me a story" }], max_tokens: 6, temperature: 0, ignore_eos: true } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(resp.object).toBe("chat.completion");
    expect(resp.choices[0]!.message.role).toBe("assistant");
    expect(resp.choices[0]!.finish_reason).toBe("length");
    expect(resp.usage!.completion_tokens).toBe(6);
    expect(resp.usage!.total_tokens).toBe(resp.usage!.prompt_tokens + 6);
    expectMetricsArithmetic((resp as unknown as Json).metrics, 6);
  });

  test("chat, streaming with include_usage: role first, text equals the non-streamed text, one finish, metrics on the usage chunk only", async () => {
    const params = { model, messages: [{ role: "user" as const, content: "Once" }], max_tokens: 8, temperature: 0, ignore_eos: true };
    const full = await client.chat.completions.create(params as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } } as OpenAI.ChatCompletionCreateParamsStreaming);
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    expect(chunks.filter((c) => c.choices[0]?.finish_reason)).toHaveLength(1);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(full.choices[0]!.message.content!);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage!.completion_tokens).toBe(8);
    expect(chunks.slice(0, -1).some((c) => "metrics" in c)).toBe(false);
    expectMetricsArithmetic((last as unknown as Json).metrics, 8);
  });

  test("completions: streamed text equals the non-streamed text at temperature 0; token-id prompt gives the same", async () => {
    const params = { model, prompt: "Once upon a time", max_tokens: 12, temperature: 0 };
    const full = await client.completions.create(params);
    expect(full.object).toBe("text_completion");
    const stream = await client.completions.create({ ...params, stream: true });
    let text = "";
    let finishes = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? "";
      if (chunk.choices[0]?.finish_reason) finishes++;
    }
    expect(finishes).toBe(1);
    expect(text).toBe(full.choices[0]!.text);
    const ids = (await (await post(main, "/tokenize", { model, prompt: "Once upon a time" })).json()) as Json;
    const byIds = await client.completions.create({ ...params, prompt: ids.tokens });
    expect(byIds.choices[0]!.text).toBe(full.choices[0]!.text);
    expect(byIds.usage!.prompt_tokens).toBe(ids.count);
  });

  test("n=2 and several prompts: choices by index, metrics null", async () => {
    const two = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }], n: 2, max_tokens: 5, temperature: 1, seed: 1 });
    expect(two.choices.map((c) => c.index)).toEqual([0, 1]);
    expect((two as unknown as Json).metrics).toBeNull();
    const batch = await client.completions.create({ model, prompt: ["Once", "The cat"], n: 2, max_tokens: 4, temperature: 1 });
    expect(batch.choices.map((c) => c.index)).toEqual([0, 1, 2, 3]);
    expect((batch as unknown as Json).metrics).toBeNull();
    const stream = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }], n: 2, max_tokens: 4, temperature: 1, stream: true, stream_options: { include_usage: true } });
    const finishes = new Map<number, number>();
    let sawMetrics = false;
    for await (const chunk of stream) {
      for (const c of chunk.choices) if (c.finish_reason) finishes.set(c.index, (finishes.get(c.index) ?? 0) + 1);
      if ("metrics" in chunk) sawMetrics = true;
    }
    expect([...finishes.entries()].sort()).toEqual([[0, 1], [1, 1]]);
    expect(sawMetrics).toBe(false);
  });

  test("stop string: the text ends before it, finish_reason stop, stop_reason names it", async () => {
    const base = { model, prompt: "Once upon a time", temperature: 0, max_tokens: 40 };
    const full = (await client.completions.create(base)).choices[0]!.text;
    const words = full.split(" ").filter((w) => w.length >= 2);
    expect(words.length).toBeGreaterThan(2);
    const stop = words[2]!;
    const resp = await client.completions.create({ ...base, stop: [stop] });
    const choice = resp.choices[0]! as OpenAI.CompletionChoice & { stop_reason?: string };
    expect(choice.finish_reason).toBe("stop");
    expect(choice.text).toBe(full.slice(0, full.indexOf(stop)));
    expect(choice.stop_reason).toBe(stop);
  });

  test("seeds: the same seed repeats, different seeds vary", async () => {
    const run = async (seed: number) => (await client.completions.create({ model, prompt: "Once", temperature: 1, max_tokens: 16, seed })).choices[0]!.text;
    const a = await run(7);
    expect(await run(7)).toBe(a);
    const others = new Set([a, await run(8), await run(9), await run(10)]);
    expect(others.size).toBeGreaterThan(1);
  });

  test("logprobs: completions (legacy format) and chat (top_logprobs)", async () => {
    const comp = await client.completions.create({ model, prompt: "Once", max_tokens: 5, temperature: 0, logprobs: 2 });
    const lp = comp.choices[0]!.logprobs!;
    expect(lp.tokens!.length).toBe(5);
    expect(lp.tokens!.join("")).toBe(comp.choices[0]!.text);
    expect(lp.token_logprobs!.every((v) => v <= 0)).toBe(true);
    expect(lp.top_logprobs!.every((t) => Object.keys(t).length >= 1)).toBe(true);
    const chat = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 2 });
    const content = chat.choices[0]!.logprobs!.content!;
    expect(content).toHaveLength(chat.usage!.completion_tokens);
    expect(content[0]!.top_logprobs).toHaveLength(2);
    // greedy: the chosen token is the most likely one
    expect(content[0]!.logprob).toBeCloseTo(Math.max(...content[0]!.top_logprobs.map((t) => t.logprob)), 5);
  });

  test("return_token_ids and prompt_logprobs agree with /tokenize and with the text", async () => {
    const body = (await (await post(main, "/v1/completions", { prompt: "Once upon a time", max_tokens: 6, temperature: 0, return_token_ids: true, prompt_logprobs: 1 })).json()) as Json;
    const choice = body.choices[0];
    const tok = (await (await post(main, "/tokenize", { prompt: "Once upon a time" })).json()) as Json;
    expect(choice.prompt_token_ids).toEqual(tok.tokens);
    expect(choice.token_ids).toHaveLength(6);
    const detok = (await (await post(main, "/detokenize", { tokens: choice.token_ids })).json()) as Json;
    expect(detok.prompt).toBe(choice.text);
    expect(choice.prompt_logprobs).toHaveLength(tok.count);
    expect(choice.prompt_logprobs[0]).toBeNull();
    for (let k = 1; k < tok.count; k++) {
      const entry = choice.prompt_logprobs[k];
      expect(entry[String(tok.tokens[k])]).toBeDefined(); // the actual prompt token is always listed
      expect(Object.values(entry as Record<string, { logprob: number }>).every((e) => e.logprob <= 0)).toBe(true);
    }
  });

  test("tokenize -> detokenize round trip", async () => {
    const text = "The little fox ran home.";
    const tok = (await (await post(main, "/tokenize", { prompt: text, add_special_tokens: false, return_token_strs: true })).json()) as Json;
    expect(tok.count).toBe(tok.tokens.length);
    expect(tok.token_strs).toHaveLength(tok.count);
    const detok = (await (await post(main, "/detokenize", { tokens: tok.tokens })).json()) as Json;
    expect(detok.prompt).toBe(text);
  });
});

describe("per-request metrics rules", () => {
  test("one-token answer: mean_itl_ms null in the body and omitted from the usage chunk", async () => {
    const body = (await (await post(main, "/v1/completions", { prompt: "Once", max_tokens: 1 })).json()) as Json;
    expect(body.usage.completion_tokens).toBe(1);
    expect(body.metrics.mean_itl_ms).toBeNull();
    expect(body.metrics.time_to_first_token_ms).toBeGreaterThanOrEqual(0);
    const events = await sse(await post(main, "/v1/completions", { prompt: "Once", max_tokens: 1, stream: true, stream_options: { include_usage: true } }));
    const usage = events.at(-2) as Json;
    expect(usage.choices).toEqual([]);
    expect("mean_itl_ms" in usage.metrics).toBe(false);
    expect(usage.metrics.tokens_per_second).toBeGreaterThan(0);
  });

  test("streams without include_usage carry no usage and no metrics", async () => {
    const events = await sse(await post(main, "/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }], max_tokens: 3, stream: true }));
    expect(events.at(-1)).toBe("[DONE]");
    expect(events.slice(0, -1).some((e) => "usage" in (e as Json) || "metrics" in (e as Json))).toBe(false);
  });

  test("--served-model-name names the model (other names are 404); --max-model-len bounds the context", async () => {
    const models = (await (await fetch(`${plain.url}/v1/models`)).json()) as Json;
    expect(models.data[0].id).toBe("fennec-e2e");
    expect(models.data[0].max_model_len).toBe(128);
    const tooLong = await post(plain, "/v1/completions", { prompt: "Once", max_tokens: 128 });
    expect(tooLong.status).toBe(400);
    expect(((await tooLong.json()) as Json).error.message).toMatch(/^This model's maximum context length is 128 tokens/);
    expect((await post(plain, "/v1/completions", { model: "fennec-e2e", prompt: "Once", max_tokens: 2 })).status).toBe(200);
    expect((await post(plain, "/v1/completions", { model: model, prompt: "Once", max_tokens: 2 })).status).toBe(404);
  });

  test("feature off: bodies carry \"metrics\": null; forced usage puts usage on every chunk and a final usage chunk", async () => {
    const res = await post(plain, "/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }], max_tokens: 3 });
    const raw = await res.text();
    expect(raw).toContain('"metrics":null');
    const events = (await sse(await post(plain, "/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }], max_tokens: 3, stream: true }))).slice(0, -1) as Json[];
    expect(events.every((e) => e.usage !== undefined)).toBe(true);
    expect(events.at(-1)!.choices).toEqual([]);
    expect(events.some((e) => "metrics" in e)).toBe(false);
  });

  test("--enable-prompt-tokens-details: a repeated prompt reports its prefix-cache hits as cached_tokens (vLLM's test_single_completion shape)", async () => {
    // token ids: exact lengths, 40 tokens = two full 16-token blocks to reuse
    const prompt = Array.from({ length: 40 }, (_, i) => 300 + i);
    const first = (await (await post(plain, "/v1/completions", { prompt, max_tokens: 2 })).json()) as Json;
    expect(first.usage.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    const again = (await (await post(plain, "/v1/completions", { prompt, max_tokens: 2 })).json()) as Json;
    expect(again.usage.prompt_tokens_details.cached_tokens).toBe(32);
    // without the flag the field is null
    const off = (await (await post(main, "/v1/completions", { prompt, max_tokens: 2 })).json()) as Json;
    expect(off.usage.prompt_tokens_details).toBeNull();
  });

  test("the server refuses --enable-per-request-metrics with --disable-log-stats, with vLLM's message", async () => {
    const { code, output } = await runServeExpectingExit(["--enable-per-request-metrics", "--disable-log-stats"]);
    expect(code).toBe(2);
    expect(output).toContain("Error: --enable-per-request-metrics requires engine statistics logging; remove --disable-log-stats to enable per-request metrics.");
    expect(output).not.toContain("    at ");
  });

  test("a port another server holds is refused in one line (Elysia's reusePort would share it silently)", async () => {
    const { code, output } = await runServeExpectingExit(["--host", "127.0.0.1", "--port", String(main.port), "--threads", "1"]);
    // a failed run, not a usage error: exit 1 (58af86c made it a RuntimeFailure; this test still said 2)
    expect(code).toBe(1);
    expect(output).toContain(`cannot listen on 127.0.0.1:${main.port}`);
    // one error line; the start-up log lines before it (the memory placement) keep vLLM's shape
    const lines = output.trim().split("\n");
    expect(lines.filter((l) => l.startsWith("fennec: "))).toHaveLength(1);
    for (const line of lines.filter((l) => !l.startsWith("fennec: "))) expect(line).toMatch(/^INFO \d\d-\d\d [\d:]{8} \[[\w.-]+\] /);
  });
});

describe("errors", () => {
  async function expectError(res: Response, status: number, message: RegExp): Promise<Json> {
    expect(res.status).toBe(status);
    const body = (await res.json()) as Json;
    expect(body.error.code).toBe(status);
    expect(typeof body.error.type).toBe("string");
    expect("param" in body.error).toBe(true);
    expect(body.error.message).toMatch(message);
    expect(JSON.stringify(body)).not.toMatch(/\.ts:\d+|\n\s+at /);
    return body;
  }

  test.each([
    ["malformed JSON", "{\"messages\": [", 400, /not valid JSON/],
    ["wrong type", { messages: [{ role: "user", content: "Hi" }], max_tokens: "many" }, 400, /'max_tokens'/],
    ["missing field", { max_tokens: 3 }, 400, /'messages' is required/],
    ["out of range", { messages: [{ role: "user", content: "Hi" }], temperature: 5 }, 400, /temperature must be in \[0, 2\]/],
    ["too many logprobs", { messages: [{ role: "user", content: "Hi" }], logprobs: true, top_logprobs: 21 }, 400, /greater than max allowed: 20/],
    ["unknown model", { model: "no-such-model", messages: [{ role: "user", content: "Hi" }] }, 404, /The model `no-such-model` does not exist\./],
  ] as const)("%s", async (_, body, status, message) => {
    await expectError(await post(main, "/v1/chat/completions", body), status, message);
  });

  test("context length: vLLM's message", async () => {
    const info = (await (await fetch(`${main.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as Json;
    const maxLen = info.data[0].max_model_len as number;
    const body = await expectError(await post(main, "/v1/completions", { prompt: "Once upon a time", max_tokens: maxLen }), 400,
      new RegExp(`^This model's maximum context length is ${maxLen} tokens\\. However, you requested ${maxLen} output tokens and your prompt contains \\d+ input tokens`));
    expect(body.error.type).toBe("BadRequestError");
  });

  test("the openai client sees typed errors", async () => {
    const errorOf = async (call: () => Promise<unknown>): Promise<unknown> => {
      try {
        await call();
      } catch (e) {
        return e;
      }
      return null;
    };
    expect(await errorOf(() => client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "x" }] }))).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await errorOf(() => client.completions.create({ model, prompt: "x", temperature: -1 }))).toBeInstanceOf(OpenAI.BadRequestError);
    const noKey = new OpenAI({ baseURL: `${main.url}/v1`, apiKey: "wrong", maxRetries: 0 });
    expect(await errorOf(() => noKey.models.list())).toBeInstanceOf(OpenAI.AuthenticationError);
  });

  test("API key: 401 on /v1 without it; /health, /metrics, /docs, /openapi.json open", async () => {
    await expectError(await fetch(`${main.url}/v1/models`), 401, /Unauthorized/);
    await expectError(await post(main, "/v1/chat/completions", { messages: [] }, { authorization: "Bearer wrong" }), 401, /Unauthorized/);
    for (const path of ["/health", "/metrics", "/docs", "/openapi.json", "/version", "/ping"]) {
      expect([path, (await fetch(`${main.url}${path}`)).status]).toEqual([path, 200]);
    }
  });

  test("wrong Content-Type -> 400; oversized body -> 413; the server still answers afterwards", async () => {
    await expectError(await fetch(`${main.url}/v1/completions`, { method: "POST", headers: { authorization: `Bearer ${KEY}`, "content-type": "application/x-www-form-urlencoded" }, body: "prompt=hi" }), 400, /application\/json/);
    const huge = JSON.stringify({ prompt: "x".repeat(16.5 * 1024 * 1024) }); // over the 16 MiB limit
    await expectError(await post(main, "/v1/completions", huge), 413, /larger than the limit/);
    expect((await client.completions.create({ model, prompt: "Once", max_tokens: 2 })).choices).toHaveLength(1);
  });
});

describe("disconnect and shutdown", () => {
  test("a client that disconnects mid-stream aborts its request: generation stops, it never finishes", async () => {
    const successBefore = await metricValue(main, "vllm:request_success_total");
    const tokensBefore = await metricValue(main, "vllm:generation_tokens_total");
    const controller = new AbortController();
    const res = await fetch(`${main.url}/v1/completions`, {
      method: "POST", signal: controller.signal,
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ prompt: "Once", max_tokens: 500, ignore_eos: true, stream: true }),
    });
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    // run to the end it would take ~1 s on stories260K and finish with "length"; check that it stopped instead
    await Bun.sleep(1000);
    const settled = await metricValue(main, "vllm:generation_tokens_total");
    await Bun.sleep(1000);
    expect(await metricValue(main, "vllm:generation_tokens_total")).toBe(settled);
    const generated = settled - tokensBefore;
    expect(generated).toBeGreaterThan(0);
    expect(generated).toBeLessThan(500);
    // an aborted-by-client request is in no finished-request metric (vLLM)
    expect(await metricValue(main, "vllm:request_success_total")).toBe(successBefore);
    // the engine's running count is back to 0, and the server log says why
    expect(await metricValue(main, "vllm:num_requests_running")).toBe(0);
    expect(main.log()).toMatch(/cmpl-\S+ aborted: the client disconnected/);
    // GET /load (vLLM's server-load tracking) no longer counts it
    expect(((await (await fetch(`${main.url}/load`)).json()) as Json).server_load).toBe(0);
    // and the engine has room again: a new request is answered at once
    expect((await client.completions.create({ model, prompt: "Once", max_tokens: 3 })).choices[0]!.finish_reason).toBe("length");
  });

  test("a non-streaming request whose client goes away is aborted too", async () => {
    const successBefore = await metricValue(main, "vllm:request_success_total");
    const tokensBefore = await metricValue(main, "vllm:generation_tokens_total");
    const controller = new AbortController();
    const pending = fetch(`${main.url}/v1/completions`, {
      method: "POST", signal: controller.signal,
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ prompt: "Once", max_tokens: 500, n: 4, temperature: 1, ignore_eos: true }),
    }).catch(() => null);
    // wait until it is generating, then hang up
    for (let i = 0; i < 100 && (await metricValue(main, "vllm:generation_tokens_total")) === tokensBefore; i++) await Bun.sleep(10);
    controller.abort();
    await pending;
    await Bun.sleep(1000);
    // stopped: no more tokens are being generated, far fewer than the 2000 asked for, and it never finished
    const settled = await metricValue(main, "vllm:generation_tokens_total");
    await Bun.sleep(1000);
    expect(await metricValue(main, "vllm:generation_tokens_total")).toBe(settled);
    expect(settled - tokensBefore).toBeLessThan(2000);
    expect(main.log().split("aborted: the client disconnected").length - 1).toBeGreaterThanOrEqual(2);
    expect(await metricValue(main, "vllm:request_success_total")).toBe(successBefore);
  });

  test("vLLM's cancellation check: many clients time out, the engine frees them and answers a new request at once", async () => {
    const successBefore = await metricValue(main, "vllm:request_success_total");
    const slow = Array.from({ length: 32 }, () => fetch(`${main.url}/v1/completions`, {
      method: "POST", signal: AbortSignal.timeout(300),
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ prompt: "Once", max_tokens: 500, ignore_eos: true }),
    }).then(() => "answered", () => "timed out"));
    expect(new Set(await Promise.all(slow))).toEqual(new Set(["timed out"]));
    const t0 = performance.now();
    const fresh = await client.completions.create({ model, prompt: "Once", max_tokens: 5 });
    expect(fresh.choices[0]!.finish_reason).toBe("length");
    expect(performance.now() - t0).toBeLessThan(5000);
    await Bun.sleep(500);
    expect(await metricValue(main, "vllm:request_success_total")).toBe(successBefore + 1);
  });

  test("SIGTERM: an in-flight stream ends with an error event and [DONE], the process exits 0", async () => {
    // 16 x 120 tokens: seconds of work, so the signal lands mid-stream
    const res = await post(plain, "/v1/completions", { prompt: "Once", max_tokens: 120, n: 16, temperature: 1, ignore_eos: true, stream: true });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value, { stream: true });
    const exit = plain.stop("SIGTERM");
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    expect(await exit).toBe(0);
    expect(text.split('"finish_reason":"length"').length - 1).toBeLessThan(16);
    const events = text.trimEnd().split("\n\n");
    expect(events.at(-1)).toBe("data: [DONE]");
    expect(JSON.parse(events.at(-2)!.slice(6)).error.code).toBe(503);
    expect(plain.log()).toContain("shutting down");
  });
});
