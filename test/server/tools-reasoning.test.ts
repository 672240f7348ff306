/**
 * Tool calling, reasoning and chat-template control over HTTP (app.handle on the fake orchestrator, whose model
 * "generates" a scripted text one character per token): the responses vLLM gives for each, streamed and not, and its
 * errors for what the request or the server's flags do not allow.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { llamaTemplatePath } from "../../scripts/llama-vocab.ts";
import { DEFAULT_CHAT_SERVING, type ChatServingOptions } from "../../src/server/chat-serving.ts";
import { readSse, testServer, type Json } from "./helpers.ts";

const TOOLS = [{ type: "function", function: { name: "get_weather", description: "Weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
const chatWith = (over: Partial<ChatServingOptions>): ChatServingOptions => ({ ...DEFAULT_CHAT_SERVING, ...over });
const HERMES = chatWith({ enableAutoToolChoice: true, toolCallParser: "hermes" });
const QWEN3 = chatWith({ reasoningParser: "qwen3" });
const ask = (extra: Json = {}) => ({ messages: [{ role: "user", content: "Weather in Paris?" }], ...extra });
const qwen3Template = () => readFileSync(llamaTemplatePath("Qwen-Qwen3-0.6B"), "utf8");

function server(chat: ChatServingOptions, script: string, chatTemplate?: string) {
  return testServer({ chat }, { script, maxModelLen: 16384, ...(chatTemplate === undefined ? {} : { chatTemplate }) });
}

async function post(s: ReturnType<typeof server>, body: Json, path = "/v1/chat/completions") {
  const res = await s.call("POST", path, body);
  return { status: res.status, json: (await res.json()) as Json };
}

/** Folds a chat stream's chunks into content, reasoning and tool calls, checking vLLM's delta rules on the way. */
async function foldStream(res: Response) {
  const events = await readSse(res);
  expect(events.at(-1)).toBe("[DONE]");
  const out = { content: "", reasoning: "", calls: [] as { id: string; name: string; arguments: string }[], finish: null as string | null };
  for (const e of events.slice(0, -1) as Json[]) {
    for (const c of e.choices) {
      const d = c.delta;
      // a delta never carries reasoning and content together
      expect(d.reasoning !== undefined && d.content !== undefined && d.content !== "").toBe(false);
      if (typeof d.content === "string") out.content += d.content;
      if (typeof d.reasoning === "string") out.reasoning += d.reasoning;
      for (const t of d.tool_calls ?? []) {
        if (t.id !== undefined) {
          expect(t.id).toMatch(/^chatcmpl-tool-[0-9a-f]{16}$/);
          expect(t.type).toBe("function");
          expect(t.index).toBe(out.calls.length);
          out.calls.push({ id: t.id, name: t.function.name, arguments: t.function.arguments ?? "" });
        } else out.calls[t.index]!.arguments += t.function.arguments;
      }
      if (c.finish_reason !== null) out.finish = c.finish_reason;
    }
  }
  return out;
}

describe("tool calling (--enable-auto-tool-choice --tool-call-parser hermes)", () => {
  test("tools without tool_choice: auto; the call is parsed, finish_reason tool_calls", async () => {
    const s = server(HERMES, `I will check.\n${CALL}`);
    const { status, json } = await post(s, ask({ tools: TOOLS }));
    expect(status).toBe(200);
    const message = json.choices[0].message;
    expect(message.content).toBe("I will check.\n");
    expect(message.tool_calls).toHaveLength(1);
    expect(message.tool_calls[0].id).toMatch(/^chatcmpl-tool-[0-9a-f]{16}$/);
    expect(message.tool_calls[0]).toMatchObject({ type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } });
    expect(json.choices[0].finish_reason).toBe("tool_calls");
    // hermes keeps special tokens in the text (its tags are special tokens in Qwen's vocab)
    expect(s.fake.requests[0]!.sampling.skipSpecialTokens).toBe(false);
  });

  test("streamed: content, then the call's name, then argument fragments that make valid JSON", async () => {
    const s = server(HERMES, `I will check.\n${CALL}`);
    const res = await s.call("POST", "/v1/chat/completions", ask({ tools: TOOLS, stream: true }));
    const out = await foldStream(res);
    expect(out.content).toBe("I will check.\n");
    expect(out.calls.map((c) => c.name)).toEqual(["get_weather"]);
    expect(JSON.parse(out.calls[0]!.arguments)).toEqual({ city: "Paris" });
    expect(out.finish).toBe("tool_calls");
  });

  test("several calls; parallel_tool_calls false keeps the first", async () => {
    const two = `${CALL}\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lyon"}}\n</tool_call>`;
    const all = await post(server(HERMES, two), ask({ tools: TOOLS }));
    expect(all.json.choices[0].message.tool_calls.map((c: Json) => JSON.parse(c.function.arguments).city)).toEqual(["Paris", "Lyon"]);
    const first = await post(server(HERMES, two), ask({ tools: TOOLS, parallel_tool_calls: false }));
    expect(first.json.choices[0].message.tool_calls).toHaveLength(1);
    const streamed = await foldStream(await server(HERMES, two).call("POST", "/v1/chat/completions", ask({ tools: TOOLS, parallel_tool_calls: false, stream: true })));
    expect(streamed.calls).toHaveLength(1);
  });

  test("tool_choice none: the text stays content, tools still rendered", async () => {
    const { json } = await post(server(HERMES, CALL), ask({ tools: TOOLS, tool_choice: "none" }));
    expect(json.choices[0].message.content).toBe(CALL);
    expect(json.choices[0].message.tool_calls).toEqual([]);
    expect(json.choices[0].finish_reason).toBe("stop");
  });

  test("a malformed call is content, not an error", async () => {
    const bad = '<tool_call>{"name": "get_weather", "arguments": {"city": }}</tool_call>';
    const { status, json } = await post(server(HERMES, bad), ask({ tools: TOOLS }));
    expect(status).toBe(200);
    expect(json.choices[0].message.content).toBe(bad);
    expect(json.choices[0].finish_reason).toBe("stop");
  });

  test("vLLM's tool_choice errors", async () => {
    const cases: [Json, ChatServingOptions, string][] = [
      [ask({ tools: [] }), HERMES, "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely."],
      [ask({ tool_choice: "auto" }), HERMES, "When using `tool_choice`, `tools` must be set."],
      [ask({ tools: TOOLS, tool_choice: "sometimes" }), HERMES, 'Invalid value for `tool_choice`: sometimes! Only named tools, "none", "auto" or "required" are supported.'],
      [ask({ tools: TOOLS, tool_choice: { type: "function", function: { name: "other" } } }), HERMES, "The tool specified in `tool_choice` does not match any of the specified `tools`"],
      [ask({ tools: TOOLS, tool_choice: { type: "function" } }), HERMES, "Invalid value for `function`: `null` in `tool_choice`!"],
      [ask({ tools: TOOLS }), DEFAULT_CHAT_SERVING, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'],
      [ask({ tools: TOOLS, tool_choice: "required" }), DEFAULT_CHAT_SERVING, 'tool_choice="required" requires --tool-call-parser to be set'],
      [ask({ tools: TOOLS, tool_choice: { type: "function", function: { name: "get_weather" } } }), DEFAULT_CHAT_SERVING, 'tool_choice=function "get_weather" requires --tool-call-parser to be set'],
    ];
    for (const [body, chat, message] of cases) {
      const { status, json } = await post(server(chat, "x"), body);
      expect(status).toBe(400);
      expect(json.error.message).toContain(message);
    }
  });
});

describe("reasoning (--reasoning-parser qwen3)", () => {
  const SCRIPT = "<think>\nThe user wants weather.\n</think>\n\nIt is sunny.";
  test("reasoning and content apart, not streamed", async () => {
    const { json } = await post(server(QWEN3, SCRIPT), ask());
    expect(json.choices[0].message.reasoning).toBe("\nThe user wants weather.\n");
    expect(json.choices[0].message.content).toBe("\n\nIt is sunny.");
    expect(json.choices[0].message.reasoning_content).toBeUndefined();
  });

  test("streamed as separate reasoning and content deltas", async () => {
    const out = await foldStream(await server(QWEN3, SCRIPT).call("POST", "/v1/chat/completions", ask({ stream: true })));
    expect(out.reasoning).toBe("\nThe user wants weather.\n");
    expect(out.content).toBe("\n\nIt is sunny.");
    expect(out.content).not.toContain("<think>");
  });

  test("include_reasoning false: reasoning null, the content unchanged", async () => {
    const { json } = await post(server(QWEN3, SCRIPT), ask({ include_reasoning: false, logprobs: true }));
    expect(json.choices[0].message.reasoning).toBeNull();
    expect(json.choices[0].message.content).toBe("\n\nIt is sunny.");
    expect(json.choices[0].logprobs).toBeNull();
    const out = await foldStream(await server(QWEN3, SCRIPT).call("POST", "/v1/chat/completions", ask({ stream: true, include_reasoning: false })));
    expect(out.reasoning).toBe("");
    expect(out.content).toBe("\n\nIt is sunny.");
  });

  test("with Qwen3's template, enable_thinking false closes the block in the prompt: all output is content", async () => {
    const s = server(QWEN3, "Sunny.", qwen3Template());
    const { json } = await post(s, ask({ chat_template_kwargs: { enable_thinking: false } }));
    expect(json.choices[0].message).toMatchObject({ content: "Sunny.", reasoning: null });
    const prompt = s.fake.tokenizer.decode(s.fake.requests[0]!.promptTokenIds);
    expect(prompt.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(true);
    // --default-chat-template-kwargs does the same for every request; the request's kwargs win
    const d = server(chatWith({ reasoningParser: "qwen3", defaultTemplateKwargs: { enable_thinking: false } }), "<think>a</think>b", qwen3Template());
    expect((await post(d, ask())).json.choices[0].message).toMatchObject({ content: "<think>a</think>b", reasoning: null });
    expect((await post(d, ask({ chat_template_kwargs: { enable_thinking: true } }))).json.choices[0].message).toMatchObject({ content: "b", reasoning: "a" });
  });

  test("a cut-off answer (no </think>) is all reasoning", async () => {
    const { json } = await post(server(QWEN3, "<think>still thinking"), ask());
    expect(json.choices[0].message).toMatchObject({ reasoning: "still thinking", content: null });
  });

  test("tools are parsed from the part after the reasoning", async () => {
    const s = server(chatWith({ reasoningParser: "qwen3", enableAutoToolChoice: true, toolCallParser: "hermes" }), `<think>I need the tool.</think>\n${CALL}`);
    const { json } = await post(s, ask({ tools: TOOLS }));
    expect(json.choices[0].message.reasoning).toBe("I need the tool.");
    expect(json.choices[0].message.tool_calls[0].function.name).toBe("get_weather");
    expect(json.choices[0].finish_reason).toBe("tool_calls");
  });
});

describe("chat template control", () => {
  const turns = [{ role: "user", content: "Tell a story" }, { role: "assistant", content: "Once upon" }];
  test("continue_final_message: the prompt ends inside the last message, the answer keeps its role", async () => {
    const s = server(DEFAULT_CHAT_SERVING, " a time.", readFileSync(llamaTemplatePath("Qwen-Qwen2.5-7B-Instruct"), "utf8"));
    const { status, json } = await post(s, { messages: turns, continue_final_message: true, add_generation_prompt: false });
    expect(status).toBe(200);
    expect(s.fake.tokenizer.decode(s.fake.requests[0]!.promptTokenIds).endsWith("<|im_start|>assistant\nOnce upon")).toBe(true);
    expect(json.choices[0].message.role).toBe("assistant");
    const both = await post(s, { messages: turns, continue_final_message: true, add_generation_prompt: true });
    expect(both.status).toBe(400);
    expect(both.json.error.message).toBe("Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
    // only continue_final_message: add_generation_prompt defaults to true, and the template layer refuses the pair
    const implicit = await post(s, { messages: turns, continue_final_message: true });
    expect(implicit.status).toBe(400);
    expect(implicit.json.error.message).toContain("continue_final_message and add_generation_prompt are not compatible");
  });

  test("a request's chat_template only with --trust-request-chat-template", async () => {
    const template = "{% for m in messages %}<<{{ m.role }}>>{{ m.content }}{% endfor %}";
    const refused = await post(server(DEFAULT_CHAT_SERVING, "ok"), ask({ chat_template: template }));
    expect(refused.status).toBe(400);
    expect(refused.json.error.message).toBe("Chat template is passed with request, but --trust-request-chat-template is not set. Refused request with untrusted chat template.");
    const viaKwargs = await post(server(DEFAULT_CHAT_SERVING, "ok"), ask({ chat_template_kwargs: { chat_template: template } }));
    expect(viaKwargs.status).toBe(400);
    const trusted = server(chatWith({ trustRequestChatTemplate: true }), "ok");
    expect((await post(trusted, ask({ chat_template: template }))).status).toBe(200);
    expect(trusted.fake.tokenizer.decode(trusted.fake.requests[0]!.promptTokenIds)).toBe("<<user>>Weather in Paris?");
  });

  test("chat_template_kwargs may not carry `tokenize`", async () => {
    const { status, json } = await post(server(DEFAULT_CHAT_SERVING, "ok"), ask({ chat_template_kwargs: { tokenize: true } }));
    expect(status).toBe(400);
    expect(json.error.message).toBe('Found unexpected chat template kwargs from request: {"tokenize":true}');
  });

  test("--response-role names the answer's role", async () => {
    const { json } = await post(server(chatWith({ responseRole: "model" }), "ok"), ask());
    expect(json.choices[0].message.role).toBe("model");
  });

  test("the tool conversation reaches the template intact (tool_calls, tool results)", async () => {
    const s = server(DEFAULT_CHAT_SERVING, "ok", readFileSync(llamaTemplatePath("Qwen-Qwen2.5-7B-Instruct"), "utf8"));
    const messages = [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "sunny" },
    ];
    expect((await post(s, { messages, tools: TOOLS, tool_choice: "none" })).status).toBe(200);
    const prompt = s.fake.tokenizer.decode(s.fake.requests[0]!.promptTokenIds);
    expect(prompt).toContain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>');
    expect(prompt).toContain("<tool_response>\nsunny\n</tool_response>");
    expect(prompt).toContain('"name": "get_weather", "description": "Weather in a city"');
  });

  test("/tokenize's chat form takes the same template fields", async () => {
    const s = server(DEFAULT_CHAT_SERVING, "ok", readFileSync(llamaTemplatePath("Qwen-Qwen2.5-7B-Instruct"), "utf8"));
    const withTools = await post(s, { messages: [{ role: "user", content: "Hi" }], tools: TOOLS }, "/tokenize");
    const without = await post(s, { messages: [{ role: "user", content: "Hi" }] }, "/tokenize");
    expect(withTools.json.count).toBeGreaterThan(without.json.count + 50);
    const cont = await post(s, { messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hel" }], continue_final_message: true, add_generation_prompt: false }, "/tokenize");
    expect(s.fake.tokenizer.decode(cont.json.tokens).endsWith("assistant\nHel")).toBe(true);
    expect((await post(s, { messages: [{ role: "user", content: "Hi" }], continue_final_message: true, add_generation_prompt: true }, "/tokenize")).status).toBe(400);
    expect((await post(s, { messages: [{ role: "user", content: "Hi" }], chat_template: "{{ 1 }}" }, "/tokenize")).status).toBe(400);
  });
});

describe("tool_choice required and named (a JSON-schema grammar over the tools' parameters)", () => {
  const TWO_TOOLS = [...TOOLS, { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { $ref: "#/$defs/zone" } }, $defs: { zone: { type: "string" } } } } }];
  test("named: the constraint is that function's parameters; the output is its arguments, finish_reason stays stop", async () => {
    const s = server(HERMES, '{"city": "Paris"}');
    const { status, json } = await post(s, ask({ tools: TOOLS, tool_choice: { type: "function", function: { name: "get_weather" } } }));
    expect(status).toBe(200);
    const spec = s.fake.requests[0]!.sampling.structuredOutputs!;
    expect(spec.kind).toBe("json");
    expect(JSON.parse((spec as { schema: string }).schema)).toEqual(TOOLS[0]!.function.parameters);
    expect(json.choices[0].message.content).toBe("");
    expect(json.choices[0].message.tool_calls).toHaveLength(1);
    expect(json.choices[0].message.tool_calls[0]).toMatchObject({ type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } });
    expect(json.choices[0].finish_reason).toBe("stop");
    const out = await foldStream(await server(HERMES, '{"city": "Paris"}').call("POST", "/v1/chat/completions", ask({ tools: TOOLS, tool_choice: { type: "function", function: { name: "get_weather" } }, stream: true })));
    expect(out.calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([["get_weather", { city: "Paris" }]]);
    expect(out.finish).toBe("stop");
  });

  test("required: an array of {name, parameters} with $defs hoisted; finish_reason tool_calls", async () => {
    const script = '[{"name": "get_time", "parameters": {"zone": "UTC"}}, {"name": "get_weather", "parameters": {"city": "Paris"}}]';
    const s = server(HERMES, script);
    const { json } = await post(s, ask({ tools: TWO_TOOLS, tool_choice: "required" }));
    const schema = JSON.parse((s.fake.requests[0]!.sampling.structuredOutputs as { schema: string }).schema);
    expect(schema).toMatchObject({ type: "array", minItems: 1, $defs: { zone: { type: "string" } } });
    expect(schema.items.anyOf.map((a: Json) => a.properties.name.enum[0])).toEqual(["get_weather", "get_time"]);
    expect(schema.items.anyOf[1].properties.parameters.$defs).toBeUndefined();
    expect(json.choices[0].message.content).toBe("");
    expect(json.choices[0].message.tool_calls.map((c: Json) => [c.function.name, c.function.arguments])).toEqual([["get_time", '{"zone": "UTC"}'], ["get_weather", '{"city": "Paris"}']]);
    expect(json.choices[0].finish_reason).toBe("tool_calls");
    const out = await foldStream(await server(HERMES, script).call("POST", "/v1/chat/completions", ask({ tools: TWO_TOOLS, tool_choice: "required", stream: true })));
    expect(out.calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([["get_time", { zone: "UTC" }], ["get_weather", { city: "Paris" }]]);
    expect(out.finish).toBe("tool_calls");
  });

  test("conflicting $defs across tools: vLLM's 400", async () => {
    const clash = [TWO_TOOLS[1]!, { type: "function", function: { name: "other", parameters: { type: "object", $defs: { zone: { type: "integer" } } } } }];
    const { status, json } = await post(server(HERMES, "[]"), ask({ tools: clash, tool_choice: "required" }));
    expect(status).toBe(400);
    expect(json.error.message).toBe("Tool definition 'zone' has multiple schemas, which is not supported.");
  });
});

describe("a grammar starts after the reasoning (vLLM is_reasoning_end gating)", () => {
  const QWEN3_TOOLS = chatWith({ reasoningParser: "qwen3", enableAutoToolChoice: true, toolCallParser: "hermes" });
  const NAMED = { tools: TOOLS, tool_choice: { type: "function", function: { name: "get_weather" } } };
  /** The fake tokenizer with `</think>` as one token, as in Qwen3's vocabulary (id 130 stands for it). */
  function withThinkToken(s: ReturnType<typeof server>) {
    const encode = s.fake.tokenizer.encode;
    Object.assign(s.fake.tokenizer, { encode: (text: string, o: { addSpecial: boolean; parseSpecial: boolean }) => (text === "</think>" && o.parseSpecial ? [130] : encode(text, o)) });
    return s;
  }

  test("qwen3 with a one-token </think>: the grammar carries its id; the reasoning is split off, the call is the rest", async () => {
    const s = withThinkToken(server(QWEN3_TOOLS, '<think>Paris is a city.</think>{"city": "Paris"}'));
    const { json } = await post(s, ask(NAMED));
    expect((s.fake.requests[0]!.sampling.structuredOutputs as { reasoningEndTokenIds?: readonly number[] | null }).reasoningEndTokenIds).toEqual([130]);
    expect(json.choices[0].message.reasoning).toBe("Paris is a city.");
    expect(json.choices[0].message.tool_calls[0].function.arguments).toBe('{"city": "Paris"}');
    const out = await foldStream(await withThinkToken(server(QWEN3_TOOLS, '<think>Paris is a city.</think>{"city": "Paris"}')).call("POST", "/v1/chat/completions", ask({ ...NAMED, stream: true })));
    expect(out.reasoning).toBe("Paris is a city.");
    expect(out.calls.map((c) => c.arguments)).toEqual(['{"city": "Paris"}']);
  });

  test("response_format json_schema: gated the same way; the content is the JSON", async () => {
    const s = withThinkToken(server(QWEN3, '<think>hmm</think>{"a": 1}'));
    const { json } = await post(s, ask({ response_format: { type: "json_schema", json_schema: { name: "a", schema: { type: "object" } } } }));
    expect((s.fake.requests[0]!.sampling.structuredOutputs as { reasoningEndTokenIds?: readonly number[] | null }).reasoningEndTokenIds).toEqual([130]);
    expect(json.choices[0].message.reasoning).toBe("hmm");
    expect(json.choices[0].message.content).toBe('{"a": 1}');
  });

  test("the prompt already ends the reasoning (enable_thinking false): no gate, all content", async () => {
    const s = withThinkToken(server(QWEN3_TOOLS, '{"city": "Paris"}', qwen3Template()));
    const { json } = await post(s, ask({ ...NAMED, chat_template_kwargs: { enable_thinking: false } }));
    expect((s.fake.requests[0]!.sampling.structuredOutputs as { reasoningEndTokenIds?: unknown }).reasoningEndTokenIds).toBeUndefined();
    expect(json.choices[0].message.reasoning).toBeNull();
    expect(json.choices[0].message.tool_calls[0].function.arguments).toBe('{"city": "Paris"}');
  });

  test("an end that is not one token of the vocabulary (the plain fake spells </think> in 8): from the first token, all content", async () => {
    const s = server(QWEN3_TOOLS, '{"city": "Paris"}');
    const { json } = await post(s, ask(NAMED));
    expect((s.fake.requests[0]!.sampling.structuredOutputs as { reasoningEndTokenIds?: unknown }).reasoningEndTokenIds).toBeUndefined();
    expect(json.choices[0].message.reasoning).toBeNull();
    expect(json.choices[0].message.tool_calls[0].function.arguments).toBe('{"city": "Paris"}');
  });
});

test("--exclude-tools-when-tool-choice-none leaves the tools out of the prompt for tool_choice none only", async () => {
  const template = readFileSync(llamaTemplatePath("Qwen-Qwen2.5-7B-Instruct"), "utf8");
  const s = server(chatWith({ excludeToolsWhenToolChoiceNone: true, enableAutoToolChoice: true, toolCallParser: "hermes" }), "ok", template);
  await post(s, ask({ tools: TOOLS, tool_choice: "none" }));
  await post(s, ask({ tools: TOOLS }));
  const [none, auto] = s.fake.requests.map((r) => s.fake.tokenizer.decode(r.promptTokenIds));
  expect(none).not.toContain("get_weather");
  expect(auto).toContain("get_weather");
});

test("thinking_token_budget: vLLM's errors; a budget reaches the engine with the parser's end tokenized (test/server/thinking-token-budget.test.ts runs it)", async () => {
  const noParser = await post(server(DEFAULT_CHAT_SERVING, "ok"), ask({ thinking_token_budget: 10 }));
  expect(noParser.status).toBe(400);
  expect(noParser.json.error.message).toBe("thinking_token_budget is set but reasoning_config is not configured. Please set --reasoning-parser and/or --reasoning-config to use thinking_token_budget.");
  const negative = await post(server(QWEN3, "ok"), ask({ thinking_token_budget: -2 }));
  expect(negative.json.error.message).toBe("`thinking_token_budget` must be a non-negative integer or -1 for unlimited.");
  const budgeted = server(QWEN3, "ok");
  expect((await post(budgeted, ask({ thinking_token_budget: 10 }))).status).toBe(200);
  const endTokenIds = budgeted.fake.tokenizer.encode("</think>", { addSpecial: false, parseSpecial: true });
  expect(budgeted.fake.requests[0]!.sampling.thinkingBudget).toMatchObject({ budgetTokens: 10, endTokenIds });
  const unlimited = server(QWEN3, "ok");
  expect((await post(unlimited, ask({ thinking_token_budget: -1 }))).status).toBe(200);
  expect(unlimited.fake.requests[0]!.sampling.thinkingBudget).toBeUndefined();
});
