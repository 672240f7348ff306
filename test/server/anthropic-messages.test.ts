/**
 * POST /v1/messages and /v1/messages/count_tokens over HTTP (app.handle on the fake orchestrator, whose model
 * "generates" a scripted text one character per token): the request translated into the chat template's messages,
 * the message and its event stream (checked record by record against Anthropic's published event schemas),
 * tool use, thinking and its budget, and Anthropic's error shape and status codes on every refusal.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { llamaTemplatePath } from "../../scripts/llama-vocab.ts";
import { DEFAULT_CHAT_SERVING, type ChatServingOptions } from "../../src/server/chat-serving.ts";
import { testServer, type Json } from "./helpers.ts";
import { checkMessageStream, foldMessageStream } from "../helpers/anthropic-events.ts";
import { MESSAGE_FIELDS } from "../../src/server/anthropic/message-fields.ts";

const chatWith = (over: Partial<ChatServingOptions>): ChatServingOptions => ({ ...DEFAULT_CHAT_SERVING, ...over });
const HERMES = chatWith({ enableAutoToolChoice: true, toolCallParser: "hermes" });
const QWEN3 = chatWith({ reasoningParser: "qwen3" });
const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
const TOOLS = [{ name: "get_weather", description: "Weather in a city", input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
/** prints every message field the translation fills, so the rendered prompt shows it */
const SHOW_TEMPLATE = [
  "{%- for m in messages -%}",
  "[{{ m.role }}]{% if m.reasoning %}(thought:{{ m.reasoning }}){% endif %}{% if m.content is string %}{{ m.content }}{% endif %}",
  "{% if m.tool_calls %}{% for c in m.tool_calls %}<call {{ c.id }} {{ c.function.name }} {{ c.function.arguments | tojson }}>{% endfor %}{% endif %}",
  "{% if m.tool_call_id %}<result for {{ m.tool_call_id }}>{% endif %}|",
  "{%- endfor -%}",
  "{%- if tools %}[tools]{% for t in tools %}{{ t.function.name }}:{{ t.function.parameters | tojson }};{% endfor %}{% endif -%}",
  "{%- if add_generation_prompt %}[assistant]{% endif -%}",
].join("");

function server(chat: ChatServingOptions = DEFAULT_CHAT_SERVING, script?: string, extra: { chatTemplate?: string; apiKey?: string } = {}) {
  const seen: Json[] = [];
  const s = testServer(
    { chat, apiKey: extra.apiKey ?? null, onHttpResponse: (e) => seen.push(e as unknown as Json), accessLog: (e) => seen.push({ access: e }) },
    { maxModelLen: 16384, ...(script === undefined ? {} : { script }), ...(extra.chatTemplate === undefined ? {} : { chatTemplate: extra.chatTemplate }) },
  );
  return { ...s, seen };
}

const ask = (extra: Json = {}): Json => ({ model: "fake-model", max_tokens: 256, messages: [{ role: "user", content: "Weather in Paris?" }], ...extra });

async function post(s: ReturnType<typeof server>, body: unknown, headers: Record<string, string> = {}, path = "/v1/messages") {
  const res = await s.call("POST", path, body, headers);
  return { status: res.status, headers: res.headers, json: (await res.json()) as Json };
}

async function stream(s: ReturnType<typeof server>, body: Json) {
  const res = await s.call("POST", "/v1/messages", { ...body, stream: true });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toStartWith("text/event-stream");
  return foldMessageStream(checkMessageStream(await res.text()));
}

const promptOf = (s: ReturnType<typeof server>, i = 0) => s.fake.tokenizer.decode(s.fake.requests[i]!.promptTokenIds, { skipSpecialTokens: false });

function expectAnthropicError(r: { status: number; json: Json }, status: number, type: string, mentions: string) {
  expect(r.status).toBe(status);
  expect(r.json.type).toBe("error");
  expect(r.json.error.type).toBe(type);
  expect(r.json.error.message).toContain(mentions);
  expect(r.json.request_id).toMatch(/^req_[0-9a-f]{32}$/);
  expect(Object.keys(r.json).sort()).toEqual(["error", "request_id", "type"]);
}

describe("the message", () => {
  test("text answer: message object, usage, stop_reason end_turn at EOS", async () => {
    const s = server(DEFAULT_CHAT_SERVING, "Sunny.");
    const r = await post(s, ask());
    expect(r.status).toBe(200);
    expect(r.headers.get("request-id")).toMatch(/^req_/);
    expect(r.json).toMatchObject({ type: "message", role: "assistant", model: "fake-model", content: [{ type: "text", text: "Sunny." }], stop_reason: "end_turn", stop_sequence: null });
    expect(r.json.id).toMatch(/^msg_/);
    expect(r.json.usage).toEqual({ input_tokens: s.fake.requests[0]!.promptTokenIds.length, output_tokens: 6, cache_read_input_tokens: 0 });
  });

  test("max_tokens reached: stop_reason max_tokens, the engine got max_tokens", async () => {
    const s = server();
    const r = await post(s, ask({ max_tokens: 7 }));
    expect(r.json.stop_reason).toBe("max_tokens");
    expect(r.json.usage.output_tokens).toBe(7);
    expect(s.fake.requests[0]!.sampling.maxTokens).toBe(7);
  });

  test("stop_sequences: stop_reason stop_sequence names the one that matched", async () => {
    const s = server();
    const r = await post(s, ask({ stop_sequences: ["zzz", "little"] }));
    expect(r.json.stop_reason).toBe("stop_sequence");
    expect(r.json.stop_sequence).toBe("little");
    expect(r.json.content[0].text).not.toContain("little");
  });

  test("sampling fields reach the engine", async () => {
    const s = server();
    await post(s, ask({ temperature: 0.5, top_p: 0.9, top_k: 7, metadata: { user_id: "u1" } }));
    expect(s.fake.requests[0]!.sampling).toMatchObject({ temperature: 0.5, topP: 0.9, topK: 7 });
  });

  test("system (string and blocks), tool_use, tool_result, thinking become the template's messages", async () => {
    const s = server(HERMES, "ok", { chatTemplate: SHOW_TEMPLATE });
    await post(s, {
      model: "fake-model", max_tokens: 8, tools: TOOLS, tool_choice: { type: "none" },
      system: [{ type: "text", text: "x-anthropic-billing-header: cch=1;" }, { type: "text", text: "Be brief. ", cache_control: { type: "ephemeral" } }, { type: "text", text: "Use tools." }],
      messages: [
        { role: "user", content: [{ type: "text", text: "Weather?" }, { type: "text", text: "In Paris." }] },
        { role: "assistant", content: [{ type: "thinking", thinking: "I should call.", signature: "" }, { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "21C" }] }, { type: "text", text: "And now?" }] },
        { role: "assistant", content: [{ type: "redacted_thinking", data: "opaque" }, { type: "text", text: "Warm." }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_2", content: "boom", is_error: true }] },
      ],
    });
    const prompt = promptOf(s);
    expect(prompt).toBe([
      "[system]Be brief. Use tools.",
      "[user]Weather?\nIn Paris.",
      '[assistant](thought:I should call.)<call toolu_1 get_weather {"city": "Paris"}>',
      "[tool]21C<result for toolu_1>",
      "[user]And now?",
      "[assistant]Warm.",
      "[tool]Error: boom<result for toolu_2>",
      '[tools]get_weather:{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]};[assistant]',
    ].join("|"));
  });

  test("Claude Code's extras: defer_loading tools stay out of the prompt, context_management clears old thinking", async () => {
    const s = server(HERMES, "ok", { chatTemplate: SHOW_TEMPLATE });
    const deferred = { name: "Later", input_schema: { type: "object" }, defer_loading: true };
    const thought = (text: string) => ({ role: "assistant", content: [{ type: "thinking", thinking: text, signature: "" }, { type: "text", text: "." }] });
    await post(s, {
      model: "fake-model", max_tokens: 8, tools: [...TOOLS, deferred], tool_choice: { type: "none" },
      context_management: { edits: [{ type: "clear_thinking_20251015", keep: { type: "thinking_turns", value: 1 } }] },
      messages: [{ role: "user", content: "a" }, thought("old"), { role: "user", content: "b" }, thought("new"), { role: "user", content: "c" }],
    });
    const prompt = promptOf(s);
    expect(prompt).not.toContain("Later");
    expect(prompt).not.toContain("thought:old");
    expect(prompt).toContain("(thought:new)");
    expectAnthropicError(await post(s, ask({ context_management: { edits: [{ type: "clear_tool_uses_20250919" }] } })), 400, "invalid_request_error", "clear_tool_uses_20250919");
  });

  test("a tool_reference loads a deferred tool; a final assistant turn is continued (prefill)", async () => {
    const s = server(HERMES, "ok", { chatTemplate: SHOW_TEMPLATE });
    const deferred = { name: "Later", input_schema: { type: "object" }, defer_loading: true };
    const turns = [
      { role: "user", content: "find a tool" },
      { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "get_weather", input: {} }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: [{ type: "tool_reference", tool_name: "Later" }] }] },
    ];
    await post(s, { model: "fake-model", max_tokens: 8, tools: [...TOOLS, deferred], tool_choice: { type: "none" }, messages: turns });
    expect(promptOf(s)).toContain('Later:{"type": "object"}');
    await post(s, { model: "fake-model", max_tokens: 8, messages: [...turns, { role: "assistant", content: "The answer is" }] });
    // continued: the prompt ends with the last turn's text, no new assistant opener
    expect(promptOf(s, 1)).toEndWith("[assistant]The answer is");
  });

  test("count_tokens counts the prompt the same body renders", async () => {
    const s = server(HERMES);
    const body = ask({ system: "Be brief.", tools: TOOLS });
    const counted = await post(s, { model: body.model, system: body.system, tools: body.tools, messages: body.messages }, {}, "/v1/messages/count_tokens");
    expect(counted.status).toBe(200);
    expect(counted.json).toEqual({ input_tokens: expect.any(Number) });
    const r = await post(s, { ...body, tool_choice: { type: "none" } });
    expect(counted.json.input_tokens).toBe(r.json.usage.input_tokens);
    // sampling fields are not part of a count_tokens request
    expectAnthropicError(await post(s, { ...body, max_tokens: 5 }, {}, "/v1/messages/count_tokens"), 400, "invalid_request_error", "max_tokens");
  });
});

describe("the event stream, record by record against the published schemas", () => {
  test("text: message_start, ping, one text block, message_delta with usage, message_stop", async () => {
    const s = server(DEFAULT_CHAT_SERVING, "Sunny today.");
    const m = await stream(s, ask());
    expect(m.blocks).toEqual([{ type: "text", text: "Sunny today.", partial_json: "" }]);
    expect(m.stop).toEqual({ stop_reason: "end_turn", stop_sequence: null });
    expect(m.outputTokens).toBe(12);
    expect(m.inputTokens).toBe(s.fake.requests[0]!.promptTokenIds.length);
  });

  test("stop sequence and max_tokens in message_delta", async () => {
    expect((await stream(server(), ask({ stop_sequences: ["little"] }))).stop).toEqual({ stop_reason: "stop_sequence", stop_sequence: "little" });
    const m = await stream(server(), ask({ max_tokens: 3 }));
    expect(m.stop).toEqual({ stop_reason: "max_tokens", stop_sequence: null });
    expect(m.outputTokens).toBe(3);
  });
});

describe("failures during generation", () => {
  test("before the first token: a JSON error; after it: an error event in Anthropic's shape ends the stream", async () => {
    const early = testServer({}, { failAfterTokens: 1, maxModelLen: 16384 });
    const r = await early.call("POST", "/v1/messages", ask());
    expectAnthropicError({ status: r.status, json: (await r.json()) as Json }, 500, "api_error", "Internal server error");
    const late = testServer({}, { failAfterTokens: 3, maxModelLen: 16384 });
    const res = await late.call("POST", "/v1/messages", { ...ask(), stream: true });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(() => checkMessageStream(text)).not.toThrow();
    const last = text.trim().split("\n\n").at(-1)!;
    expect(last.split("\n")[0]).toBe("event: error");
    expect(JSON.parse(last.split("\n")[1]!.slice(6))).toMatchObject({ type: "error", error: { type: "api_error" } });
  });
});

describe("tools", () => {
  test("auto: the parsed call is a tool_use block with its input; stop_reason tool_use", async () => {
    const s = server(HERMES, `Let me check.\n${CALL}`);
    const r = await post(s, ask({ tools: TOOLS }));
    expect(r.json.content).toEqual([
      { type: "text", text: "Let me check.\n" },
      { type: "tool_use", id: expect.stringMatching(/^toolu_[0-9a-f]{24}$/), name: "get_weather", input: { city: "Paris" } },
    ]);
    expect(r.json.stop_reason).toBe("tool_use");
  });

  test("auto, streamed: a text block, then a tool_use block whose input_json_delta pieces join to the input", async () => {
    const m = await stream(server(HERMES, `Let me check.\n${CALL}`), ask({ tools: TOOLS }));
    expect(m.blocks.map((b) => b.type)).toEqual(["text", "tool_use"]);
    expect(m.blocks[0]!.text).toBe("Let me check.\n");
    expect(m.blocks[1]!.name).toBe("get_weather");
    expect(JSON.parse(m.blocks[1]!.partial_json)).toEqual({ city: "Paris" });
    expect(m.stop.stop_reason).toBe("tool_use");
  });

  test("tool_choice any and tool force a grammar; none shows no parser; disable_parallel_tool_use keeps one call", async () => {
    const s = server(HERMES, '[{"name": "get_weather", "parameters": {"city": "Rome"}}]');
    const anyCall = await post(s, ask({ tools: TOOLS, tool_choice: { type: "any" } }));
    expect(s.fake.requests[0]!.sampling.structuredOutputs).not.toBeNull();
    expect(anyCall.json.content).toEqual([{ type: "tool_use", id: expect.any(String), name: "get_weather", input: { city: "Rome" } }]);
    expect(anyCall.json.stop_reason).toBe("tool_use");
    const s2 = server(HERMES, '{"city": "Lyon"}');
    const named = await post(s2, ask({ tools: TOOLS, tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true } }));
    expect(named.json.content).toEqual([{ type: "tool_use", id: expect.any(String), name: "get_weather", input: { city: "Lyon" } }]);
    const s3 = server(HERMES, CALL);
    const none = await post(s3, ask({ tools: TOOLS, tool_choice: { type: "none" } }));
    expect(none.json.content[0].type).toBe("text");
    expect(none.json.stop_reason).toBe("end_turn");
  });

  test("a named tool that does not exist, and tool_choice without tools, are invalid_request_error", async () => {
    const s = server(HERMES);
    expectAnthropicError(await post(s, ask({ tools: TOOLS, tool_choice: { type: "tool", name: "nope" } })), 400, "invalid_request_error", "does not match");
    expectAnthropicError(await post(s, ask({ tools: [{ type: "web_search_20250305", name: "web_search" }] })), 400, "invalid_request_error", "tools[0].type");
  });
});

describe("thinking (--reasoning-parser qwen3)", () => {
  const template = () => readFileSync(llamaTemplatePath("Qwen-Qwen3-0.6B"), "utf8");

  test("the reasoning is a thinking block before the text; streamed with thinking_delta and a signature_delta", async () => {
    const script = "<think>I reason.</think>Sunny.";
    const r = await post(server(QWEN3, script, { chatTemplate: template() }), ask({ max_tokens: 2000, thinking: { type: "enabled", budget_tokens: 1024 } }));
    expect(r.json.content).toEqual([{ type: "thinking", thinking: "I reason.", signature: "" }, { type: "text", text: "Sunny." }]);
    const m = await stream(server(QWEN3, script, { chatTemplate: template() }), ask({ max_tokens: 2000, thinking: { type: "enabled", budget_tokens: 1024 } }));
    expect(m.blocks.map((b) => [b.type, b.thinking ?? b.text])).toEqual([["thinking", "I reason."], ["text", "Sunny."]]);
  });

  test("display omitted: the model thinks, the answer leaves the thinking out", async () => {
    const s = server(QWEN3, "<think>I reason.</think>Sunny.", { chatTemplate: template() });
    const r = await post(s, ask({ thinking: { type: "adaptive", display: "omitted" } }));
    expect(r.json.content).toEqual([{ type: "text", text: "Sunny." }]);
  });

  test("disabled: enable_thinking false reaches the template (Qwen3 closes the think block in the prompt)", async () => {
    const s = server(QWEN3, "Sunny.", { chatTemplate: template() });
    const r = await post(s, ask({ thinking: { type: "disabled" } }));
    expect(promptOf(s)).toEndWith("<think>\n\n</think>\n\n");
    expect(r.json.content).toEqual([{ type: "text", text: "Sunny." }]);
  });

  test("budget_tokens reaches the engine as one request: the budget and the reasoning end's token ids", async () => {
    // the engine's sampler forces the end (engine/thinking-budget.ts; test/engine/thinking-budget.test.ts); the fake
    // engine only shows what it was asked
    const s = server(QWEN3, "<think>xx</think>Done.", { chatTemplate: template() });
    const r = await post(s, ask({ max_tokens: 1100, thinking: { type: "enabled", budget_tokens: 1024 } }));
    expect(r.status).toBe(200);
    expect(s.fake.requests).toHaveLength(1);
    const endTokenIds = s.fake.tokenizer.encode("</think>", { addSpecial: false, parseSpecial: true });
    expect(s.fake.requests[0]!.sampling).toMatchObject({ maxTokens: 1100, thinkingBudget: { budgetTokens: 1024, endTokenIds } });
    // a budget that cannot bind before max_tokens is left out
    const loose = server(QWEN3, "<think>xx</think>Done.", { chatTemplate: template() });
    await post(loose, ask({ max_tokens: 1025, thinking: { type: "adaptive" } }));
    expect(loose.fake.requests[0]!.sampling.thinkingBudget).toBeUndefined();
  });

  test("a reasoning that ends within the budget runs once", async () => {
    const s = server(QWEN3, "<think>short</think>Done.", { chatTemplate: template() });
    await post(s, ask({ max_tokens: 2000, thinking: { type: "enabled", budget_tokens: 1024 } }));
    expect(s.fake.requests).toHaveLength(1);
  });

  test("refusals: below 1024, not below max_tokens, no reasoning parser, a forced tool", async () => {
    expectAnthropicError(await post(server(QWEN3), ask({ thinking: { type: "enabled", budget_tokens: 100 } })), 400, "invalid_request_error", "thinking.budget_tokens");
    expectAnthropicError(await post(server(QWEN3), ask({ max_tokens: 1024, thinking: { type: "enabled", budget_tokens: 1024 } })), 400, "invalid_request_error", "less than max_tokens");
    expectAnthropicError(await post(server(), ask({ max_tokens: 2000, thinking: { type: "enabled", budget_tokens: 1024 } })), 400, "invalid_request_error", "--reasoning-parser");
    const forced = ask({ max_tokens: 2000, tools: TOOLS, tool_choice: { type: "any" }, thinking: { type: "enabled", budget_tokens: 1024 } });
    expectAnthropicError(await post(server(chatWith({ ...QWEN3, toolCallParser: "hermes" })), forced), 400, "invalid_request_error", "forces tool use");
  });
});

describe("errors in Anthropic's shape, with Anthropic's status codes", () => {
  const cases: [string, Json, string][] = [
    ["max_tokens missing", { model: "fake-model", messages: [{ role: "user", content: "hi" }] }, "max_tokens: Field required"],
    ["max_tokens 0", ask({ max_tokens: 0 }), "max_tokens"],
    ["messages missing", { model: "fake-model", max_tokens: 5 }, "messages"],
    ["messages empty", ask({ messages: [] }), "messages"],
    ["an unknown field", ask({ frobnicate: 1 }), "frobnicate: Extra inputs are not permitted"],
    ["a refused field", ask({ mcp_servers: [{ type: "url", url: "http://x" }] }), "mcp_servers: not supported"],
    ["an image block", ask({ messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }] }), "started without a vision projector (serve it with --mmproj"],
    ["an image in a tool result", ask({ messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: [{ type: "image", source: { type: "url", url: "http://x/a.png" } }] }] }] }), "tool results may hold text and tool_reference blocks only"],
    ["a bad role", ask({ messages: [{ role: "robot", content: "hi" }] }), "messages[0].role"],
    ["an unknown block key", ask({ messages: [{ role: "user", content: [{ type: "text", text: "hi", colour: "red" }] }] }), "messages[0].content[0].colour"],
    ["tool_use in a user turn", ask({ messages: [{ role: "user", content: [{ type: "tool_use", id: "a", name: "b", input: {} }] }] }), "tool_use blocks belong in assistant messages"],
    ["a bad tool_choice", ask({ tool_choice: { type: "sometimes" } }), "tool_choice.type"],
    ["a string temperature", ask({ temperature: "hot" }), "temperature"],
    ["temperature out of range", ask({ temperature: 5 }), "temperature"],
  ];
  test.each(cases)("%s: 400 invalid_request_error", async (_, body, mentions) => {
    expectAnthropicError(await post(server(), body), 400, "invalid_request_error", mentions);
  });

  test("unknown model: 404 not_found_error; invalid JSON and a wrong media type: 400", async () => {
    const s = server();
    expectAnthropicError(await post(s, ask({ model: "claude-opus" })), 404, "not_found_error", "claude-opus");
    expectAnthropicError(await post(s, "{nope"), 400, "invalid_request_error", "JSON");
    const res = await s.call("POST", "/v1/messages", undefined, { "content-type": "text/plain" });
    expectAnthropicError({ status: res.status, json: (await res.json()) as Json }, 400, "invalid_request_error", "application/json");
  });

  test("refusals before routing keep the shape: 413 request_too_large, 405 on GET", async () => {
    const s = testServer({ maxBodyBytes: 100 });
    const big = await s.call("POST", "/v1/messages", ask({ system: "x".repeat(200) }));
    expectAnthropicError({ status: big.status, json: (await big.json()) as Json }, 413, "request_too_large", "larger than the limit");
    const get = await s.call("GET", "/v1/messages");
    expectAnthropicError({ status: get.status, json: (await get.json()) as Json }, 405, "invalid_request_error", "Method Not Allowed");
  });

  test("--api-key: x-api-key or a bearer token opens /v1/messages; without either 401 authentication_error", async () => {
    const s = server(DEFAULT_CHAT_SERVING, "ok", { apiKey: "sekret" });
    expectAnthropicError(await post(s, ask()), 401, "authentication_error", "x-api-key");
    expectAnthropicError(await post(s, ask(), { "x-api-key": "wrong" }), 401, "authentication_error", "API key");
    expect((await post(s, ask(), { "x-api-key": "sekret", "anthropic-version": "2023-06-01" })).status).toBe(200);
    expect((await post(s, ask(), { authorization: "Bearer sekret" })).status).toBe(200);
    // the Authorization header, when present, is the one checked (llama.cpp)
    expect((await post(s, ask(), { authorization: "Bearer wrong", "x-api-key": "sekret" })).status).toBe(401);
    // other dialects keep the OpenAI error shape
    const openai = await post(s, { messages: [{ role: "user", content: "hi" }] }, {}, "/v1/chat/completions");
    expect(openai.json.error.code).toBe(401);
  });
});

describe("the field table", () => {
  test("docs/anthropic.md lists exactly the fields of message-fields.ts", () => {
    const doc = readFileSync(new URL("../../docs/anthropic.md", import.meta.url), "utf8");
    const section = doc.slice(doc.indexOf("## What a request may hold"), doc.indexOf("## Thinking budget"));
    const documented = section.split("\n").filter((l) => l.startsWith("| `")).flatMap((l) => [...l.split("|")[1]!.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!));
    expect(documented.sort()).toEqual(MESSAGE_FIELDS.map((f) => f.name).sort());
  });

  test.each(MESSAGE_FIELDS.filter((f) => f.fate === "refused").map((f) => [f.name]))("refused %s: a 400 naming it", async (name) => {
    expectAnthropicError(await post(server(), ask({ [name]: [{ type: "x" }] })), 400, "invalid_request_error", `${name}: not supported`);
  });
});

describe("observability", () => {
  test("each request is one HTTP metrics event under its route and one access log line", async () => {
    const s = server(DEFAULT_CHAT_SERVING, "ok");
    await post(s, ask());
    await (await s.call("POST", "/v1/messages", { ...ask(), stream: true })).text();
    await post(s, ask({ max_tokens: 0 }));
    // the after-response hook runs once the response is out
    await Bun.sleep(50);
    const metrics = s.seen.filter((e) => e.handler !== undefined);
    expect(metrics.map((e) => [e.handler, e.method, e.status])).toEqual([["/v1/messages", "POST", 200], ["/v1/messages", "POST", 200], ["/v1/messages", "POST", 400]]);
    expect(s.seen.filter((e) => e.access !== undefined).map((e) => [e.access.target, e.access.status])).toEqual([["/v1/messages", 200], ["/v1/messages", 200], ["/v1/messages", 400]]);
  });
});
