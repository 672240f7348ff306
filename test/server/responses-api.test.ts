/**
 * POST/GET/DELETE /v1/responses and .../cancel over HTTP (app.handle on the fake orchestrator, whose model writes a
 * scripted text one character per token): the response object, output items, usage, typed stream events checked
 * event by event, input items -> the rendered prompt, store / previous_response_id / background / cancel, and the
 * 400s for what fennec refuses.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { llamaTemplatePath } from "../../scripts/llama-vocab.ts";
import { DEFAULT_CHAT_SERVING, type ChatServingOptions } from "../../src/server/chat-serving.ts";
import { testServer, type Json } from "./helpers.ts";
import { checkEventStream, readEvents } from "./responses-helpers.ts";

const chatWith = (over: Partial<ChatServingOptions>): ChatServingOptions => ({ ...DEFAULT_CHAT_SERVING, ...over });
const HERMES = chatWith({ enableAutoToolChoice: true, toolCallParser: "hermes" });
const QWEN3 = chatWith({ reasoningParser: "qwen3" });
const TOOLS = [{ type: "function", name: "get_weather", description: "Weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
const qwenTemplate = () => readFileSync(llamaTemplatePath("Qwen-Qwen2.5-7B-Instruct"), "utf8");

function server(script: string, chat: ChatServingOptions = DEFAULT_CHAT_SERVING, extra: { chatTemplate?: string; stepDelayMs?: number } = {}) {
  return testServer({ chat }, { script, maxModelLen: 16384, ...extra });
}

async function post(s: ReturnType<typeof server>, body: Json) {
  const res = await s.call("POST", "/v1/responses", body);
  return { status: res.status, json: (await res.json()) as Json };
}

const promptOf = (s: ReturnType<typeof server>, i = -1) => s.fake.tokenizer.decode(s.fake.requests.at(i)!.promptTokenIds, { skipSpecialTokens: false });

describe("POST /v1/responses, not streamed", () => {
  test("a string input: one completed message, usage, the request's fields echoed", async () => {
    const s = server("Hello there.");
    const { status, json } = await post(s, { input: "Hi", instructions: "Be brief.", metadata: { k: "v" }, user: "u1", temperature: 0.5 });
    expect(status).toBe(200);
    expect(json.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(json.object).toBe("response");
    expect(json.status).toBe("completed");
    expect(json.model).toBe("fake-model");
    expect(json.output).toHaveLength(1);
    const message = json.output[0];
    expect(message).toMatchObject({ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Hello there.", annotations: [] }] });
    expect(message.id).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(json.usage.output_tokens).toBe(12);
    expect(json.usage.input_tokens).toBe(s.fake.requests[0]!.promptTokenIds.length);
    expect(json.usage.total_tokens).toBe(json.usage.input_tokens + 12);
    expect(json.usage.input_tokens_details.cached_tokens).toBe(0);
    expect(json.usage.output_tokens_details.reasoning_tokens).toBe(0);
    expect(json).toMatchObject({ instructions: "Be brief.", metadata: { k: "v" }, user: "u1", temperature: 0.5, incomplete_details: null, background: false });
    // instructions become the system message before the input
    expect(promptOf(s)).toBe("system: Be brief.\nuser: Hi\nassistant:");
    expect(s.fake.requests[0]!.sampling.temperature).toBe(0.5);
  });

  test("max_output_tokens: status incomplete, reason max_output_tokens, the budget applied", async () => {
    const s = server("Hello there.");
    const { json } = await post(s, { input: "Hi", max_output_tokens: 3 });
    expect(json.status).toBe("incomplete");
    expect(json.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(json.output[0].content[0].text).toBe("Hel");
    expect(json.max_output_tokens).toBe(3);
    expect(s.fake.requests[0]!.sampling.maxTokens).toBe(3);
  });

  test("a large max_output_tokens is clamped to the context, not refused (vLLM)", async () => {
    const s = server("Hi.");
    const { status, json } = await post(s, { input: "Hi", max_output_tokens: 10_000_000 });
    expect(status).toBe(200);
    expect(json.max_output_tokens).toBe(16384 - s.fake.requests[0]!.promptTokenIds.length);
  });

  test("include message.output_text.logprobs: logprobs on the output text", async () => {
    const { json } = await post(server("Hi."), { input: "Hi", include: ["message.output_text.logprobs"], top_logprobs: 2 });
    const lp = json.output[0].content[0].logprobs;
    expect(lp).toHaveLength(3);
    expect(lp[0].token).toBe("H");
    expect(lp[0].top_logprobs).toHaveLength(2);
  });

  test("text.format json_schema reaches the engine as a JSON grammar", async () => {
    const s = server('{"a": 1}');
    const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"] };
    const { status } = await post(s, { input: "Hi", text: { format: { type: "json_schema", name: "x", schema, strict: true } } });
    expect(status).toBe(200);
    const spec = s.fake.requests[0]!.sampling.structuredOutputs as Json;
    expect(spec.kind).toBe("json");
    expect(JSON.parse(spec.schema)).toEqual(schema);
  });

  test("reasoning.effort reaches the template; a reasoning item and reasoning_tokens with --reasoning-parser qwen3", async () => {
    const s = server("<think>\nLet me see.\n</think>\n\nSunny.", QWEN3);
    const { json } = await post(s, { input: "Weather?", reasoning: { effort: "low", summary: "auto" } });
    expect(json.output.map((i: Json) => i.type)).toEqual(["reasoning", "message"]);
    expect(json.output[0]).toMatchObject({ summary: [], content: [{ type: "reasoning_text", text: "\nLet me see.\n" }] });
    expect(json.output[0].id).toMatch(/^rs_/);
    expect(json.output[1].content[0].text).toBe("\n\nSunny.");
    expect(json.usage.output_tokens_details.reasoning_tokens).toBeGreaterThan(0);
    expect(json.usage.output_tokens_details.reasoning_tokens).toBeLessThan(json.usage.output_tokens);
  });
});

describe("input items -> chat messages", () => {
  test("messages, function_call and function_call_output render as an assistant call and a tool result", async () => {
    const s = server("Sunny.", HERMES, { chatTemplate: qwenTemplate() });
    const input = [
      { role: "user", content: [{ type: "input_text", text: "Weather in Paris?" }] },
      { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
      { type: "function_call_output", call_id: "call_1", output: '{"temp":21}' },
    ];
    const { status, json } = await post(s, { input, tools: TOOLS });
    expect(status).toBe(200);
    const prompt = promptOf(s);
    expect(prompt).toContain("Weather in Paris?");
    // the arguments string is read as JSON for the template (vLLM does the same)
    expect(prompt).toContain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}');
    expect(prompt).toContain('<tool_response>\n{"temp":21}\n</tool_response>');
    expect(prompt).toContain('"name": "get_weather"');
    expect(json.output[0].content[0].text).toBe("Sunny.");
  });

  test("a reasoning item and developer messages; enable_response_messages returns the chat messages", async () => {
    const s = server("ok");
    const input = [
      { type: "message", role: "developer", content: [{ type: "input_text", text: "Rule one." }, { type: "input_text", text: "Rule two." }] },
      { role: "user", content: "Q1" },
      { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "short" }], content: [{ type: "reasoning_text", text: "long thought" }], encrypted_content: null },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "A1", annotations: [] }] },
      { role: "user", content: "Q2" },
    ];
    const { status, json } = await post(s, { input, enable_response_messages: true });
    expect(status).toBe(200);
    // the reasoning and the answer after it are one assistant turn (vLLM merges them)
    expect(json.input_messages).toEqual([
      { role: "developer", content: [{ type: "text", text: "Rule one." }, { type: "text", text: "Rule two." }] },
      { role: "user", content: "Q1" },
      { role: "assistant", content: [{ type: "text", text: "A1" }], reasoning: "long thought" },
      { role: "user", content: "Q2" },
    ]);
    expect(json.output_messages).toEqual([{ role: "assistant", content: "ok" }]);
    expect(promptOf(s)).toContain("developer: Rule one.\nRule two.");
  });

  test("an in-progress assistant message last: the model continues it (no generation prompt)", async () => {
    const s = server("more", DEFAULT_CHAT_SERVING, { chatTemplate: qwenTemplate() });
    await post(s, { input: [{ role: "user", content: "Hi" }, { type: "message", role: "assistant", status: "incomplete", content: [{ type: "output_text", text: "Once" }] }] });
    expect(promptOf(s).endsWith("<|im_start|>assistant\nOnce")).toBe(true);
  });

  test.each([
    [{ input: [{ role: "user", content: [{ type: "input_image", image_url: "http://x/y.png" }] }] }, "input[0].content[0].image_url", "--mmproj"],
    [{ input: [{ type: "reasoning", summary: [], encrypted_content: "xyz" }] }, "input[0].encrypted_content", "Encrypted content is not supported."],
    [{ input: [{ type: "item_reference", id: "x" }] }, "input[0].type", "item_reference"],
    [{ input: "Hi", tools: [{ type: "web_search" }] }, "tools[0].type", "web_search"],
    [{ input: "Hi", tool_choice: "required" }, "tool_choice", "Tool choice 'required' must be specified with 'tools' parameter."],
    [{ input: "Hi", tools: TOOLS, tool_choice: { type: "function", name: "nope" } }, "tool_choice", "Tool choice 'function' not found in 'tools' parameter."],
    [{ input: "Hi", store: false, background: true }, "background", "background can only be used when `store` is true"],
    [{ input: "Hi", prompt: { id: "pmpt_1" } }, "prompt", "prompt template is not supported"],
    [{ input: "Hi", include: ["file_search_call.results"] }, "include[0]", "file_search_call.results"],
    [{ input: "Hi", max_tool_calls: 3 }, "max_tool_calls", "max_tool_calls"],
    [{ input: "Hi", text: { format: { type: "json_object" } }, structured_outputs: { regex: "a" } }, "text.format", "Cannot specify both structured_outputs and text.format"],
    [{ input: "Hi", max_output_tokens: 0 }, "max_output_tokens", "at least 1"],
    [{ input: "Hi", top_logprobs: 2 }, "top_logprobs", "message.output_text.logprobs"],
    [{ input: "Hi", stream_options: { include_obfuscation: true } }, "stream_options.include_obfuscation", "obfuscation"],
    [{ input: "Hi", text: { format: { type: "grammar" } } }, "text.format.type", "json_schema"],
    [{ input: [] }, "input", "input must not be empty"],
  ])("refused with a 400 naming the field: %j", async (body, param, words) => {
    const s = server("x", HERMES);
    const { status, json } = await post(s, body as Json);
    expect(status).toBe(400);
    expect(json.error.param).toBe(param);
    expect(json.error.message).toContain(words);
    expect(json.error.code).toBe(400);
    expect(s.fake.requests).toHaveLength(0);
  });

  test("the request shape codex exec 0.171.0 sends (recorded): accepted, each field honoured or inert", async () => {
    const s = server("Hi!", HERMES, { chatTemplate: qwenTemplate() });
    const body = {
      model: "fake-model", stream: true, store: false, tool_choice: "auto", parallel_tool_calls: true,
      instructions: null, reasoning: { summary: "auto" }, include: ["reasoning.encrypted_content"],
      prompt_cache_key: "019a-thread", client_metadata: { turn_id: "019a-turn" },
      input: [
        { type: "message", id: "msg_1", role: "developer", content: [{ type: "input_text", text: "You are a coding agent." }] },
        { type: "message", id: "msg_2", role: "user", content: [{ type: "input_text", text: "say hi" }] },
      ],
      tools: [
        { type: "function", name: "exec_command", description: "Runs a command", strict: false, parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] } },
        { type: "namespace", name: "multi_agent_v1", description: "Agents", tools: [{ type: "function", name: "spawn", description: "Spawn", strict: false, parameters: { type: "object", properties: {} } }] },
      ],
    };
    const events = await readEvents(await s.call("POST", "/v1/responses", body));
    const final = checkEventStream(events);
    expect(final.output[0].content[0].text).toBe("Hi!");
    expect(promptOf(s)).toContain('"name": "multi_agent_v1__spawn"');
    // store: false keeps nothing
    expect((await s.call("GET", `/v1/responses/${final.id}`)).status).toBe(404);
  });

  test("a model that is not served: 404", async () => {
    const { status, json } = await post(server("x"), { input: "Hi", model: "other" });
    expect(status).toBe(404);
    expect(json.error.param).toBe("model");
  });
});

describe("function tools (--enable-auto-tool-choice --tool-call-parser hermes)", () => {
  test("not streamed: a function_call item with call_id, name and JSON arguments", async () => {
    const s = server(`Checking.\n${CALL}`, HERMES, { chatTemplate: qwenTemplate() });
    const { json } = await post(s, { input: "Weather in Paris?", tools: TOOLS });
    expect(json.output.map((i: Json) => i.type)).toEqual(["message", "function_call"]);
    const call = json.output[1];
    expect(call).toMatchObject({ type: "function_call", name: "get_weather", status: "completed" });
    expect(call.id).toMatch(/^fc_/);
    expect(call.call_id).toMatch(/^call_/);
    expect(JSON.parse(call.arguments)).toEqual({ city: "Paris" });
    expect(json.tool_choice).toBe("auto");
    expect(json.tools).toEqual(TOOLS);
  });

  test("streamed: output_item.added, arguments deltas, arguments.done, item done; the same call in response.completed", async () => {
    const s = server(CALL, HERMES, { chatTemplate: qwenTemplate() });
    const events = await readEvents(await s.call("POST", "/v1/responses", { input: "Weather in Paris?", tools: TOOLS, stream: true }));
    const final = checkEventStream(events);
    const calls = final.output.filter((i: Json) => i.type === "function_call");
    expect(calls).toHaveLength(1);
    const deltas = events.filter((e) => e.type === "response.function_call_arguments.delta").map((e) => e.delta).join("");
    expect(JSON.parse(deltas)).toEqual({ city: "Paris" });
    expect(calls[0].arguments).toBe(deltas);
    expect(events.find((e) => e.type === "response.function_call_arguments.done")!.name).toBe("get_weather");
  });

  test("namespaced tools are flattened to ns__name in the prompt and answered with their namespace", async () => {
    const s = server('<tool_call>\n{"name": "files__read", "arguments": {"path": "a"}}\n</tool_call>', HERMES, { chatTemplate: qwenTemplate() });
    const tools = [{ type: "namespace", name: "files", description: "File tools", tools: [{ type: "function", name: "read", parameters: { type: "object", properties: { path: { type: "string" } } } }] }];
    const { status, json } = await post(s, { input: "Read a", tools });
    expect(status).toBe(200);
    expect(promptOf(s)).toContain('"name": "files__read"');
    expect(json.output.at(-1)).toMatchObject({ type: "function_call", name: "read", namespace: "files" });
  });
});

describe("streaming events", () => {
  test("a text answer: created, in_progress, item added, part added, deltas, done events, completed; numbered from 0", async () => {
    const s = server("Hello.");
    const events = await readEvents(await s.call("POST", "/v1/responses", { input: "Hi", stream: true }));
    expect(events.map((e) => e.type)).toEqual([
      "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      ...Array.from({ length: 6 }, () => "response.output_text.delta"),
      "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed",
    ]);
    const final = checkEventStream(events);
    expect(events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("")).toBe("Hello.");
    expect(final.output[0].content[0].text).toBe("Hello.");
    expect(final.usage.output_tokens).toBe(6);
    expect(final.status).toBe("completed");
  });

  test("reasoning then message: two items in order, reasoning events first", async () => {
    const s = server("<think>\nHmm.\n</think>\n\nSunny.", QWEN3);
    const events = await readEvents(await s.call("POST", "/v1/responses", { input: "Weather?", stream: true }));
    const final = checkEventStream(events);
    expect(final.output.map((i: Json) => i.type)).toEqual(["reasoning", "message"]);
    expect(final.output[0].content[0].text).toBe("\nHmm.\n");
    expect(events.filter((e) => e.type === "response.reasoning_text.delta").map((e) => e.delta).join("")).toBe("\nHmm.\n");
    expect(final.usage.output_tokens_details.reasoning_tokens).toBeGreaterThan(0);
  });

  test("include logprobs, streamed: each text delta carries its tokens' logprobs, the done event all of them", async () => {
    const s = server("Hello.");
    const events = await readEvents(await s.call("POST", "/v1/responses", { input: "Hi", stream: true, include: ["message.output_text.logprobs"], top_logprobs: 1 }));
    const final = checkEventStream(events);
    const deltas = events.filter((e) => e.type === "response.output_text.delta");
    expect(deltas.map((e) => e.logprobs.map((l: Json) => l.token).join(""))).toEqual(deltas.map((e) => e.delta));
    expect(deltas.every((e) => e.logprobs.every((l: Json) => l.top_logprobs.length === 1))).toBe(true);
    const done = events.find((e) => e.type === "response.output_text.done")!;
    expect(done.logprobs).toHaveLength(6);
    expect(final.output[0].content[0].logprobs).toEqual(done.logprobs);
  });

  test("an engine failure mid-stream ends with an error event, no response.completed", async () => {
    const s = testServer({}, { failAfterTokens: 3, script: "Hello there." });
    const events = await readEvents(await s.call("POST", "/v1/responses", { input: "Hi", stream: true }));
    const last = events.at(-1)!;
    expect(last.type).toBe("error");
    expect(last.sequence_number).toBe(events.length - 1);
    expect(events.some((e) => e.type === "response.completed")).toBe(false);
  });
});

describe("store, previous_response_id, GET, DELETE", () => {
  test("a stored response: GET returns it, previous_response_id continues it, DELETE removes it", async () => {
    const s = server("Paris.");
    const first = (await post(s, { input: "Capital of France?", instructions: "Old rules." })).json;
    const got = await s.call("GET", `/v1/responses/${first.id}`);
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual(first);
    const second = await post(s, { input: "And of Italy?", previous_response_id: first.id, instructions: "New rules." });
    expect(second.status).toBe(200);
    expect(second.json.previous_response_id).toBe(first.id);
    // new instructions, the earlier turn without its system message, its answer, the new input
    expect(promptOf(s)).toBe("system: New rules.\nuser: Capital of France?\nassistant: Paris.\nuser: And of Italy?\nassistant:");
    const deleted = await s.call("DELETE", `/v1/responses/${first.id}`);
    expect(await deleted.json()).toEqual({ id: first.id, object: "response", deleted: true });
    const gone = await s.call("GET", `/v1/responses/${first.id}`);
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as Json).error.message).toBe(`Response with id '${first.id}' not found.`);
  });

  test("previous_response_id chains keep function calls: the call a function_call_output answers is replayed", async () => {
    const s = server(CALL, HERMES, { chatTemplate: qwenTemplate() });
    const first = (await post(s, { input: "Weather in Paris?", tools: TOOLS, tool_choice: { type: "function", name: "get_weather" } })).json;
    const call = first.output.find((i: Json) => i.type === "function_call");
    expect(call).toBeDefined();
    const second = await post(s, { previous_response_id: first.id, tools: TOOLS, input: [{ type: "function_call_output", call_id: call.call_id, output: "21C" }] });
    expect(second.status).toBe(200);
    const prompt = promptOf(s);
    expect(prompt).toContain("Weather in Paris?");
    expect(prompt).toContain('<tool_call>\n{"name": "get_weather"');
    expect(prompt).toContain("<tool_response>\n21C\n</tool_response>");
  });

  test("store false: nothing kept; an unknown previous_response_id is a 404", async () => {
    const s = server("x");
    const { json } = await post(s, { input: "Hi", store: false });
    expect((await s.call("GET", `/v1/responses/${json.id}`)).status).toBe(404);
    const chained = await post(s, { input: "Hi", previous_response_id: json.id });
    expect(chained.status).toBe(404);
    expect(chained.json.error.message).toBe(`Response with id '${json.id}' not found.`);
  });

  test("streamed responses are stored once completed; cancel on a finished response is a 400", async () => {
    const s = server("Hey.");
    const events = await readEvents(await s.call("POST", "/v1/responses", { input: "Hi", stream: true }));
    const final = checkEventStream(events);
    const got = (await (await s.call("GET", `/v1/responses/${final.id}`)).json()) as Json;
    expect(got.output).toEqual(final.output);
    const cancel = await s.call("POST", `/v1/responses/${final.id}/cancel`);
    expect(cancel.status).toBe(400);
    expect(((await cancel.json()) as Json).error.message).toBe("Cannot cancel a synchronous response.");
  });

  test("request_id (vLLM) becomes the response id", async () => {
    const { json } = await post(server("x"), { input: "Hi", request_id: "resp_mine" });
    expect(json.id).toBe("resp_mine");
  });
});

describe("per-request metrics (--enable-per-request-metrics)", () => {
  test("the response carries vLLM's metrics object, streamed and not; without the flag there is none", async () => {
    const s = testServer({ enablePerRequestMetrics: true }, { script: "Hey." });
    const plain = (await (await s.call("POST", "/v1/responses", { input: "Hi" })).json()) as Json;
    expect(typeof plain.metrics.time_to_first_token_ms).toBe("number");
    const final = checkEventStream(await readEvents(await s.call("POST", "/v1/responses", { input: "Hi", stream: true })));
    expect(typeof final.metrics.time_to_first_token_ms).toBe("number");
    expect((await post(server("Hey."), { input: "Hi" })).json.metrics).toBeUndefined();
  });
});

describe("background", () => {
  const poll = async (s: ReturnType<typeof server>, id: string, until: (status: string) => boolean) => {
    for (let i = 0; i < 500; i++) {
      const json = (await (await s.call("GET", `/v1/responses/${id}`)).json()) as Json;
      if (until(json.status)) return json;
      await Bun.sleep(5);
    }
    throw new Error("never reached the status");
  };

  test("answers queued at once, then completes; GET shows the result", async () => {
    const s = server("Later.");
    const { status, json } = await post(s, { input: "Hi", background: true });
    expect(status).toBe(200);
    expect(json.status).toBe("queued");
    expect(json.output).toEqual([]);
    const done = await poll(s, json.id, (st) => st === "completed");
    expect(done.output[0].content[0].text).toBe("Later.");
    expect(done.background).toBe(true);
  });

  test("background + stream: live events, and GET ?stream=true&starting_after=N replays the rest", async () => {
    const s = server("Replay me.");
    const live = await readEvents(await s.call("POST", "/v1/responses", { input: "Hi", background: true, stream: true }));
    const final = checkEventStream(live);
    const replay = await readEvents(await s.call("GET", `/v1/responses/${final.id}?stream=true&starting_after=3`));
    expect(replay).toEqual(live.slice(4));
  });

  test("cancel: a running background response ends cancelled and the engine request is aborted", async () => {
    const s = server("A long answer that takes a while to write out.", DEFAULT_CHAT_SERVING, { stepDelayMs: 20 });
    const { json } = await post(s, { input: "Hi", background: true });
    await poll(s, json.id, (st) => st === "in_progress");
    const cancelled = await s.call("POST", `/v1/responses/${json.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(((await cancelled.json()) as Json).status).toBe("cancelled");
    await Bun.sleep(100);
    expect(s.fake.running()).toBe(0);
    expect(((await (await s.call("GET", `/v1/responses/${json.id}`)).json()) as Json).status).toBe("cancelled");
  });

  test("GET ?stream=true on a response without an event buffer: a 400, not a broken stream", async () => {
    const s = server("x");
    const { json } = await post(s, { input: "Hi" });
    const res = await s.call("GET", `/v1/responses/${json.id}?stream=true`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error.param).toBe("stream");
  });
});
