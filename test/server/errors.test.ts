// Every failure is {"error":{"message","type","param","code"}} with status = code; bad input never disturbs the server.
import { describe, expect, test } from "bun:test";
import { EngineDeadError, EngineRequestError } from "../../src/frontend/orchestrator.ts";
import { readSse, testServer, type Json } from "./helpers.ts";

const chat = (extra: Json = {}) => ({ messages: [{ role: "user", content: "Hi" }], max_tokens: 4, ...extra });

async function expectError(res: Response, status: number, param: string | null, message: RegExp): Promise<Json> {
  expect(res.status).toBe(status);
  const body = (await res.json()) as Json;
  expect(Object.keys(body)).toEqual(["error"]);
  expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(body.error.code).toBe(status);
  expect(body.error.param).toBe(param);
  expect(body.error.message).toMatch(message);
  expect(body.error.message).not.toMatch(/\n\s+at |\.ts:\d+/); // no stack traces
  return body;
}

describe("request validation -> 400 naming the field", () => {
  test.each([
    ["malformed JSON", "{\"messages\": [", null, /not valid JSON/],
    ["non-object body", "[1, 2]", null, /JSON object|messages/],
    ["missing messages", { max_tokens: 3 }, "messages", /'messages' is required/],
    ["wrong type", chat({ temperature: "hot" }), "temperature", /'temperature'.*"hot"/],
    ["wrong nested type", { messages: [{ role: "user", content: 5 }] }, "messages[0].content", /messages\[0\]\.content/],
    ["seed beyond int64", chat({ seed: 1e30 }), "seed", /'seed' should be less than or equal to 9223372036854775807 \[less_than_equal\]/],
    ["seed below int64", chat({ seed: -1e30 }), "seed", /'seed' should be greater than or equal to -9223372036854775808 \[greater_than_equal\]/],
    // nullable fields name the type they want, not Elysia's "one of: 'undefined', 'null'"
    ["string for an integer", chat({ n: "two" }), "n", /^1 validation error: 'n' should be an integer or null \(got "two"\)$/],
    ["fraction for an integer", chat({ max_tokens: 5.5 }), "max_tokens", /'max_tokens' should be an integer or null \(got 5\.5\)/],
    ["number for stop", chat({ stop: 5 }), "stop", /'stop' should be a string or a list of strings or null/],
    // Elysia turns a string into a list before validating: the message still names the string
    ["string for messages", { messages: "hi" }, "messages", /^1 validation error: 'messages' should be a list \(got "hi"\)$/],
    // an unknown field beside a real error is not the error (unknown fields are accepted)
    ["unknown field beside a bad one", { prompt: "Hi", messages: null }, "messages", /^1 validation error: 'messages' should be a list of objects \(got null\)$/],
  ] as const)("%s", async (_, body, param, message) => {
    const s = testServer();
    const res = await s.call("POST", "/v1/chat/completions", body);
    const err = await expectError(res, 400, param, message);
    expect(err.error.type).toBe("Bad Request");
  });

  test.each([
    ["temperature", chat({ temperature: 3 }), "temperature", /^temperature must be in \[0, 2\], got 3(\.0)?\. \(parameter=temperature, value=3\)$/],
    ["top_p", chat({ top_p: 0 }), "top_p", /top_p must be in \(0, 1\]/],
    ["n", chat({ n: 0 }), "n", /n must be at least 1, got 0\./],
    ["greedy n", chat({ n: 2, temperature: 0 }), "n", /n must be 1 when using greedy sampling, got 2\./],
    ["max_tokens", chat({ max_tokens: 0 }), "max_tokens", /max_tokens must be at least 1, got 0\./],
    ["presence_penalty", chat({ presence_penalty: -3 }), "presence_penalty", /\[-2, 2\]/],
    ["top_k", chat({ top_k: -2 }), "top_k", /top_k/],
    ["top_logprobs", chat({ logprobs: true, top_logprobs: 21 }), "logprobs", /Requested sample logprobs of 21, which is greater than max allowed: 20/],
    ["top_logprobs without logprobs", chat({ top_logprobs: 2 }), "top_logprobs", /logprobs` must be set to true/],
    ["stream_options without stream", chat({ stream_options: { include_usage: true } }), "stream_options", /Stream options can only be defined when `stream=True`\./],
    ["logit_bias key", chat({ logit_bias: { abc: 1 } }), "logit_bias", /logit_bias/],
    ["min_tokens above max_tokens", chat({ min_tokens: 9 }), "min_tokens", /min_tokens/],
  ] as const)("semantic: %s", async (_, body, param, message) => {
    const s = testServer();
    const err = await expectError(await s.call("POST", "/v1/chat/completions", body), 400, param, message);
    expect(err.error.type).toBe("BadRequestError");
    expect(s.fake.requests).toHaveLength(0);
  });

  test("completions prompt and detokenize tokens of the wrong shape name the accepted forms", async () => {
    const s = testServer();
    await expectError(await s.call("POST", "/v1/completions", { prompt: ["a", 1] }), 400, "prompt",
      /'prompt' should be a string or a list of strings or a list of integers or a list of lists of integers/);
    await expectError(await s.call("POST", "/detokenize", { tokens: "a" }), 400, "tokens", /'tokens' should be a list \(got "a"\)/);
  });

  test("completions: empty prompt, out-of-vocabulary token, too many logprobs", async () => {
    const s = testServer();
    await expectError(await s.call("POST", "/v1/completions", { prompt: "" }), 400, "prompt", /Either prompt or prompt_embeds must be provided and non-empty\./);
    await expectError(await s.call("POST", "/v1/completions", { prompt: [1, 99999] }), 400, "prompt", /out of vocabulary/);
    await expectError(await s.call("POST", "/v1/completions", { prompt: "Hi", logprobs: 21 }), 400, "logprobs", /greater than max allowed: 20/);
  });

  test("a chat template that refuses the conversation -> 400 on messages, not 500", async () => {
    const s = testServer();
    s.fake.tokenizer.applyChatTemplate = () => { throw new Error("model.gguf: tokenizer.chat_template: Conversation roles must alternate user/assistant"); };
    await expectError(await s.call("POST", "/v1/chat/completions", chat()), 400, "messages", /Conversation roles must alternate/);
    await expectError(await s.call("POST", "/tokenize", { messages: [{ role: "user", content: "x" }] }), 400, "messages", /Conversation roles must alternate/);
  });

  test("wrong Content-Type is refused with vLLM's message", async () => {
    const s = testServer();
    const res = await s.app.handle(new Request("http://localhost/v1/chat/completions", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "a=b" }));
    await expectError(res, 400, "Content-Type", /Only 'application\/json' is allowed/);
  });
});

describe("context length (vLLM's messages)", () => {
  test("prompt + max_tokens over the context", async () => {
    const s = testServer({}, { maxModelLen: 32 });
    const prompt = "x".repeat(20); // 21 tokens with BOS
    const err = await expectError(await s.call("POST", "/v1/completions", { prompt, max_tokens: 20 }), 400, "input_tokens",
      /^This model's maximum context length is 32 tokens\. However, you requested 20 output tokens and your prompt contains 21 input tokens, for a total of 41 tokens\. Please reduce the length of the input prompt or the number of requested output tokens\./);
    expect(err.error.type).toBe("BadRequestError");
  });

  test("max_tokens alone over the context", async () => {
    const s = testServer({}, { maxModelLen: 32 });
    await expectError(await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 40 }), 400, "max_tokens",
      /^max_tokens=40 cannot be greater than max_model_len=max_total_tokens=32\. Please request fewer output tokens\./);
  });

  test("chat without max_tokens: the rest of the context; a prompt that fills it is refused", async () => {
    const s = testServer({}, { maxModelLen: 64 });
    const ok = (await (await s.call("POST", "/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }] })).json()) as Json;
    expect(s.fake.requests[0]!.sampling.maxTokens).toBe(64 - ok.usage.prompt_tokens);
    await expectError(await s.call("POST", "/v1/chat/completions", { messages: [{ role: "user", content: "x".repeat(80) }] }), 400, "input_tokens",
      /The decoder prompt \(length \d+\) is longer than the maximum model length of 64\./);
  });
});

describe("model, auth, size, internal errors", () => {
  test("unknown model -> 404", async () => {
    const s = testServer();
    const err = await expectError(await s.call("POST", "/v1/chat/completions", chat({ model: "gpt-9" })), 404, "model", /The model `gpt-9` does not exist\./);
    expect(err.error.type).toBe("NotFoundError");
    expect((await s.call("POST", "/v1/chat/completions", chat({ model: "fake-model" }))).status).toBe(200);
  });

  test("--api-key: 401 on /v1 without or with a wrong key; /health, /docs, /openapi.json, /tokenize stay open", async () => {
    const s = testServer({ apiKey: "sekrit" });
    await expectError(await s.call("GET", "/v1/models"), 401, null, /Unauthorized/);
    await expectError(await s.call("GET", "/v1/models", undefined, { authorization: "Bearer nope" }), 401, null, /Unauthorized/);
    await expectError(await s.call("POST", "/v1/chat/completions", chat(), { authorization: "Basic sekrit" }), 401, null, /Unauthorized/);
    expect(s.fake.requests).toHaveLength(0);
    expect((await s.call("GET", "/v1/models", undefined, { authorization: "Bearer sekrit" })).status).toBe(200);
    expect((await s.call("POST", "/v1/chat/completions", chat(), { authorization: "bearer sekrit" })).status).toBe(200);
    for (const path of ["/health", "/docs", "/openapi.json", "/version"]) expect((await s.call("GET", path)).status).toBe(200);
    expect((await s.call("POST", "/tokenize", { prompt: "a" })).status).toBe(200);
  });

  test("oversized body -> 413 before it is read", async () => {
    const s = testServer({ maxBodyBytes: 1024 });
    const body = JSON.stringify(chat({ messages: [{ role: "user", content: "x".repeat(2000) }] }));
    const res = await s.call("POST", "/v1/chat/completions", body, { "content-length": String(body.length) });
    const err = await expectError(res, 413, null, /larger than the limit of 1024 bytes/);
    expect(err.error.type).toBe("PayloadTooLargeError");
  });

  test("oversized body without a Content-Length (chunked) -> the same JSON 413 once the limit is passed", async () => {
    const s = testServer({ maxBodyBytes: 1024 });
    const piece = new TextEncoder().encode(JSON.stringify(chat({ messages: [{ role: "user", content: "x".repeat(600) }] })));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 3) controller.enqueue(piece);
        else controller.close();
      },
    });
    const res = await s.app.handle(new Request("http://localhost/v1/chat/completions", {
      method: "POST", headers: { "content-type": "application/json" }, body: stream, duplex: "half",
    } as RequestInit));
    const err = await expectError(res, 413, null, /larger than the limit of 1024 bytes/);
    expect(err.error.type).toBe("PayloadTooLargeError");
    // under the limit, a streamed body is read as usual
    const small = await s.app.handle(new Request("http://localhost/v1/chat/completions", {
      method: "POST", headers: { "content-type": "application/json" }, body: new Blob([JSON.stringify(chat())]).stream(), duplex: "half",
    } as RequestInit));
    expect(small.status).toBe(200);
  });

  test("engine failure -> 500 'Internal server error' (body), error event + [DONE] (stream); the server keeps serving", async () => {
    const s = testServer({}, { failAfterTokens: 2 });
    const err = await expectError(await s.call("POST", "/v1/chat/completions", chat()), 500, null, /^Internal server error$/);
    expect(err.error.type).toBe("InternalServerError");
    const events = await readSse(await s.call("POST", "/v1/chat/completions", chat({ stream: true })));
    expect(events.at(-1)).toBe("[DONE]");
    expect((events.at(-2) as Json).error.code).toBe(500);
    expect((await s.call("GET", "/health")).status).toBe(200);
  });

  test("an unexpected exception is a 500 and one log line (name, message, where it was thrown), never a stack", async () => {
    const s = testServer();
    s.fake.generate = () => (async function* () { throw new TypeError("something unexpected\nwith a second line"); })();
    await expectError(await s.call("POST", "/v1/completions", { prompt: "Hi" }), 500, null, /^Internal server error$/);
    const internal = s.logs.filter((l) => l.startsWith("internal error: "));
    expect(internal).toHaveLength(1);
    expect(internal[0]).not.toContain("\n");
    expect(internal[0]).toMatch(/^internal error: TypeError: something unexpected with a second line \(at .+errors\.test\.ts:\d+:\d+\)$/);
  });

  test("a request the engine refuses at once is a JSON 400 even when streaming (no 200 + error event)", async () => {
    const s = testServer();
    s.fake.generate = () => (async function* () { throw new EngineRequestError("context_length", "prompt is longer than the KV cache can ever hold"); })();
    for (const path of ["/v1/chat/completions", "/v1/completions"]) {
      const body = path === "/v1/completions" ? { prompt: "Hi", stream: true } : chat({ stream: true });
      const err = await expectError(await s.call("POST", path, body), 400, null, /longer than the KV cache/);
      expect(err.error.type).toBe("BadRequestError");
    }
    s.fake.setHealthy(false);
    s.fake.generate = () => (async function* () { throw new EngineDeadError("engine is dead: worker exited"); })();
    await expectError(await s.call("POST", "/v1/chat/completions", chat({ stream: true })), 500, null, /engine is not running/);
  });

  test("unknown route -> 404 in the same shape", async () => {
    const s = testServer();
    await expectError(await s.call("GET", "/v1/nothing"), 404, null, /Not Found/);
  });

  test("every answered request reaches onHttpResponse with its route, method, status and sizes (the HTTP metrics)", async () => {
    const events: { handler: string | null; method: string; status: number; responseBytes: number | null }[] = [];
    const s = testServer({ onHttpResponse: (e) => void events.push(e), apiKey: "k" });
    const auth = { authorization: "Bearer k" };
    await (await s.call("POST", "/v1/chat/completions", chat(), auth)).text();
    await (await s.call("POST", "/v1/chat/completions", chat({ n: 0 }), auth)).text();
    await (await s.call("GET", "/v1/chat/completions", undefined, auth)).text();
    await (await s.call("GET", "/v1/nothing", undefined, auth)).text();
    // refused before routing, still labelled with its route
    await (await s.call("POST", "/v1/chat/completions", chat())).text();
    await Bun.sleep(10);
    expect(events.map((e) => [e.handler, e.method, e.status])).toEqual([
      ["/v1/chat/completions", "POST", 200], ["/v1/chat/completions", "POST", 400], [null, "GET", 405], [null, "GET", 404], ["/v1/chat/completions", "POST", 401],
    ]);
    for (const e of events) expect(e.responseBytes).toBeGreaterThan(0);
  });

  test("a known route with the wrong method -> 405 with Allow (Starlette's answer), not 404", async () => {
    const s = testServer();
    for (const [method, path, allow] of [["GET", "/v1/chat/completions", "POST"], ["PUT", "/v1/completions", "POST"], ["GET", "/tokenize", "POST"], ["POST", "/v1/models", "GET, HEAD"], ["DELETE", "/health", "GET, HEAD"]] as const) {
      const res = await s.call(method, path);
      expect(res.headers.get("allow")).toBe(allow);
      const err = await expectError(res, 405, null, /^Method Not Allowed$/);
      expect(err.error.type).toBe("Method Not Allowed");
    }
    expect((await s.call("HEAD", "/health")).status).toBe(200);
  });

  test("a burst of bad requests does not disturb a good one running beside it", async () => {
    const s = testServer({}, { stepDelayMs: 2 });
    const good = s.call("POST", "/v1/chat/completions", chat({ max_tokens: 20 }));
    const bad = await Promise.all([
      s.call("POST", "/v1/chat/completions", "{oops"),
      s.call("POST", "/v1/chat/completions", chat({ temperature: -1 })),
      s.call("POST", "/v1/completions", { prompt: [[1], "x"] }),
      s.call("POST", "/detokenize", { tokens: [-5] }),
    ]);
    expect(bad.map((r) => r.status)).toEqual([400, 400, 400, 400]);
    const body = (await (await good).json()) as Json;
    expect(body.choices[0].message.content).toHaveLength(20);
  });
});

describe("docs", () => {
  test("HEAD /docs does not break later GET /docs (the plugin's page is one shared Response)", async () => {
    const s = testServer();
    for (const method of ["HEAD", "HEAD", "GET", "GET"]) {
      const res = await s.call(method, "/docs");
      expect(res.status).toBe(200);
      if (method === "GET") expect(await res.text()).toContain("SwaggerUIBundle");
    }
  });

  test("the HTTP metrics hook survives every kind of route value (files, the spec, empty bodies) and never throws", async () => {
    const events: { handler: string | null; method: string; status: number }[] = [];
    const s = testServer({ onHttpResponse: (e) => void events.push(e) });
    const paths = ["/openapi.json", "/docs/assets/swagger-ui-bundle.js", "/v1/models", "/version", "/ping"];
    for (const method of ["GET", "HEAD"]) {
      for (const path of paths) {
        const res = await s.call(method, path);
        await res.arrayBuffer();
        expect(res.status).toBe(200);
      }
    }
    // onAfterResponse runs after the body is out; on a loaded machine that can take longer than a fixed sleep
    for (let waitedMs = 0; events.length < paths.length * 2 && waitedMs < 2000; waitedMs += 10) await Bun.sleep(10);
    expect(events.map((e) => `${e.method} ${e.handler} ${e.status}`)).toEqual(["GET", "HEAD"].flatMap((m) => paths.map((p) => `${m} ${p} 200`)));
    expect(s.logs.filter((l) => l.includes("HTTP metrics"))).toEqual([]);
  });

  test("/docs is Swagger UI with embedded assets; /openapi.json documents every route, examples and bearer auth", async () => {
    const s = testServer();
    const html = await (await s.call("GET", "/docs")).text();
    expect(html).toContain("SwaggerUIBundle");
    expect(html).not.toContain("unpkg.com");
    const asset = await s.call("GET", "/docs/assets/swagger-ui-bundle.js");
    expect(asset.status).toBe(200);
    expect((await asset.text()).length).toBeGreaterThan(100_000);
    const spec = (await (await s.call("GET", "/openapi.json")).json()) as Json;
    for (const path of ["/v1/chat/completions", "/v1/completions", "/v1/models", "/tokenize", "/detokenize", "/health", "/ping", "/version"]) {
      expect(spec.paths[path]).toBeDefined();
    }
    expect(spec.components.securitySchemes.bearerAuth).toEqual(expect.objectContaining({ type: "http", scheme: "bearer" }));
    const chatBody = JSON.stringify(spec.paths["/v1/chat/completions"].post.requestBody);
    for (const field of ["top_k", "min_p", "repetition_penalty", "min_tokens", "stop_token_ids", "ignore_eos", "skip_special_tokens", "include_stop_str_in_output", "stream_options"]) {
      expect(chatBody).toContain(`"${field}"`);
    }
    expect(chatBody).toContain("Once upon a time");
    const responses = spec.paths["/v1/chat/completions"].post.responses;
    expect(Object.keys(responses)).toEqual(expect.arrayContaining(["200", "400", "401", "404", "500"]));
    expect(Object.keys(responses["200"].content)).toEqual(["application/json", "text/event-stream"]);
  });
});

describe("messages that say what is wrong", () => {
  test("POST /tokenize {}: neither `prompt` nor `messages` (pydantic's missing fields of both request forms)", async () => {
    const s = testServer();
    const err = await expectError(await s.call("POST", "/tokenize", {}), 400, "prompt", /^2 validation errors: 'prompt' is required \(completion form\), 'messages' is required \(chat form\)$/);
    expect(err.error.message).not.toContain("not both");
    // both given is still the other message
    await expectError(await s.call("POST", "/tokenize", { prompt: "a", messages: [{ role: "user", content: "a" }] }), 400, "messages", /not both/);
  });

  test('a content part {"type":"text"} with no `text` names the missing field', async () => {
    const s = testServer();
    for (const path of ["/v1/chat/completions", "/tokenize"]) {
      const err = await expectError(await s.call("POST", path, { messages: [{ role: "user", content: [{ type: "text", text: "a" }, { type: "text" }] }] }), 400,
        "messages[0].content[1].text", /^1 validation error: 'messages\[0\]\.content\[1\]\.text' is required$/);
      expect(err.error.message).not.toContain("only text parts");
    }
    // an image on a model without a vision projector names --mmproj; another part type is still "only text parts"
    await expectError(await s.call("POST", "/v1/chat/completions", { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }), 400,
      "messages[0].content[0].image_url.url", /^this model takes no images: .*--mmproj FILE/);
    await expectError(await s.call("POST", "/v1/chat/completions", { messages: [{ role: "user", content: [{ type: "input_audio", text: "x" }] }] }), 400,
      "messages[0].content[0].type", /only text parts are supported \(got type "input_audio"\)/);
  });

  test("POST /ping ignores its body, as vLLM does: empty JSON, {} and garbage are all 200", async () => {
    const s = testServer();
    for (const body of ["", "{}", "not json"]) {
      const res = await s.app.handle(new Request("http://localhost/ping", { method: "POST", headers: { "content-type": "application/json" }, body }));
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("");
    }
  });
});

describe("a prompt too long for the model in a large body (refused by the parser Worker)", () => {
  /** the fake tokenizer has one character per token: its longest token is 1 character */
  const bounded = () => {
    const s = testServer({}, { maxModelLen: 256 });
    (s.fake.tokenizer as { maxTokenChars?: number }).maxTokenChars = 1;
    return s;
  };
  const big = "x".repeat(2_000_000); // over the 1 MiB a body is parsed inline up to
  const small = "x".repeat(300_000);

  test("completions (a string and a list) and chat: the route's own 400, param and words, whatever the body's size", async () => {
    const s = bounded();
    const cases = [
      ["/v1/completions", (p: string) => ({ prompt: p }), "prompt"],
      ["/v1/completions", (p: string) => ({ prompt: ["short", p] }), "prompt"],
      ["/v1/chat/completions", (p: string) => ({ messages: [{ role: "user", content: [{ type: "text", text: p }] }] }), "messages"],
    ] as const;
    for (const [path, body, param] of cases) {
      for (const text of [small, big]) {
        await expectError(await s.call("POST", path, body(text)), 400, param,
          new RegExp(`^The prompt has ${text.length} characters; it cannot fit the maximum model length of 256 tokens \\(at most 256 characters: 256 tokens x 1, the vocabulary's longest token\\)\\. Shorten the prompt\\.$`));
      }
    }
    expect(s.fake.requests).toHaveLength(0);
  });

  test("truncate_prompt_tokens: not bounded by characters (vLLM tokenizes it whole, then keeps the tail)", async () => {
    const s = bounded();
    const res = await s.call("POST", "/v1/completions", { prompt: big, truncate_prompt_tokens: 8, max_tokens: 2 });
    expect(res.status).toBe(200);
    expect(s.fake.requests[0]!.promptTokenIds).toHaveLength(8);
  });
});

describe("large bodies (parsed in the Worker from the chunks as they arrived)", () => {
  /** a POST whose body arrives in `size`-byte chunks (cut anywhere, inside UTF-8 sequences too) */
  const chunked = (s: ReturnType<typeof testServer>, path: string, text: string, size: number) => {
    const bytes = new TextEncoder().encode(text);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += size) controller.enqueue(bytes.slice(i, i + size));
        controller.close();
      },
    });
    return s.app.handle(new Request(`http://localhost${path}`, { method: "POST", headers: { "content-type": "application/json" }, body, duplex: "half" } as RequestInit));
  };

  test("multi-byte characters cut between chunks are joined: the same tokens as the whole text", async () => {
    const s = testServer();
    const prompt = "é€😀a".repeat(150_000); // 1.65 MB of UTF-8
    const res = await chunked(s, "/tokenize", JSON.stringify({ prompt, add_special_tokens: false }), 65_537);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { count: number };
    const direct = (await (await s.call("POST", "/tokenize", { prompt: prompt.slice(0, 50), add_special_tokens: false })).json()) as { count: number };
    expect(body.count).toBe(direct.count * 15_000);
  });

  test("not JSON, or nesting past the limit, over the inline size: the same 400s as a small body", async () => {
    const s = testServer();
    await expectError(await chunked(s, "/v1/completions", `{"prompt": "${"x".repeat(2_000_000)}"`, 100_000), 400, null, /^Request body is not valid JSON$/);
    await expectError(await chunked(s, "/v1/completions", `{"prompt": "${"x".repeat(2_000_000)}", "a": ${"[".repeat(200)}1${"]".repeat(200)}}`, 100_000), 400, null,
      /^Request body is refused: its JSON nesting is deeper than the limit of 128 levels/);
  });
});
