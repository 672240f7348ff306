/**
 * Ollama's /api/chat and /api/generate over the app with a fake orchestrator: NDJSON streams checked line by line
 * against Ollama's record schemas (ollama-schemas.ts), stream false, options reaching the engine with Ollama's
 * defaults, think / tools / format, the timing fields, and every refusal in Ollama's error shape.
 */
import { describe, expect, test } from "bun:test";
import { DEFAULT_CHAT_SERVING, type ChatServingOptions } from "../../src/server/chat-serving.ts";
import { testServer, type Json } from "./helpers.ts";
import { checkOllama, ndjsonRecords } from "./ollama-schemas.ts";
import { OLLAMA_OPTIONS } from "../../src/server/ollama/options-table.ts";

const chatWith = (over: Partial<ChatServingOptions>): ChatServingOptions => ({ ...DEFAULT_CHAT_SERVING, ...over });
const hi = (extra: Json = {}) => ({ model: "fake-model", messages: [{ role: "user", content: "hi" }], ...extra });

async function error(res: Response, status: number): Promise<string> {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toStartWith("application/json");
  const body = await res.json();
  checkOllama("error", body);
  return body.error;
}

describe("/api/chat", () => {
  test("streams NDJSON by default: partial records, then one done record with done_reason and the timings", async () => {
    const s = testServer();
    const res = await s.call("POST", "/api/chat", hi({ options: { num_predict: 6 } }));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/x-ndjson");
    const records = await ndjsonRecords(res, "chat");
    const last = records.at(-1)!;
    expect(records.slice(0, -1).every((r) => r.done === false)).toBe(true);
    expect(last).toMatchObject({ done: true, done_reason: "length", model: "fake-model:latest", message: { role: "assistant", content: "" }, eval_count: 6 });
    expect(records.map((r) => r.message.content).join("")).toBe("Once u");
    expect(last.prompt_eval_count).toBe(s.fake.requests[0]!.promptTokenIds.length);
    // nanoseconds: a fake step is >= 1 ms, so six tokens take more than 1e6 ns, and the total spans the parts
    expect(last.eval_duration).toBeGreaterThan(1e6);
    expect(last.total_duration).toBeGreaterThanOrEqual(last.eval_duration + last.prompt_eval_duration);
  });

  test("stream false: one record holding the whole answer; the same text as the stream", async () => {
    const s = testServer();
    const res = await s.call("POST", "/api/chat", hi({ stream: false, options: { num_predict: 6, seed: 3 } }));
    const body = await res.json();
    checkOllama("chat", body);
    const streamed = await ndjsonRecords(await s.call("POST", "/api/chat", hi({ options: { num_predict: 6, seed: 3 } })), "chat");
    expect(body.message.content).toBe(streamed.map((r) => r.message.content).join(""));
    expect(body).toMatchObject({ done: true, done_reason: "length", eval_count: 6 });
  });

  test("options reach the engine with Ollama's defaults, over llama.cpp's sampler chain", async () => {
    const s = testServer();
    await (await s.call("POST", "/api/chat", hi({ stream: false, options: { num_predict: 2 } }))).json();
    const d = s.fake.requests[0]!.sampling;
    expect(d).toMatchObject({ temperature: 0.8, topK: 40, topP: 0.9, minP: 0, repetitionPenalty: 1, seed: null, maxTokens: 2, stop: [] });
    expect(d.llama).toMatchObject({ repeatLastN: 64, typicalP: 1, mirostat: 0, mirostatTau: 5, mirostatEta: 0.1 });
    await (await s.call("POST", "/api/chat", hi({ stream: false, options: { num_predict: 3, temperature: 0, top_k: 5, top_p: 0.5, min_p: 0.1, repeat_penalty: 1.2, repeat_last_n: 8, typical_p: 0.7, mirostat: 2, mirostat_tau: 3, seed: 42, stop: ["x"], presence_penalty: 0.5, frequency_penalty: 0.25 } }))).json();
    const g = s.fake.requests[1]!.sampling;
    expect(g).toMatchObject({ temperature: 0, topK: 5, topP: 0.5, minP: 0.1, repetitionPenalty: 1.2, seed: 42, maxTokens: 3, stop: ["x"], presencePenalty: 0.5, frequencyPenalty: 0.25 });
    expect(g.llama).toMatchObject({ repeatLastN: 8, typicalP: 0.7, mirostat: 2, mirostatTau: 3 });
  });

  test.each(Object.entries(OLLAMA_OPTIONS).filter(([, row]) => row.default !== null))("the table's default for %s is what an omitted option gives", async (key, row) => {
    const s = testServer();
    await (await s.call("POST", "/api/chat", hi({ stream: false, options: { num_predict: 2 } }))).json();
    await (await s.call("POST", "/api/chat", hi({ stream: false, options: { num_predict: 2, [key]: row.default } }))).json();
    const [omitted, explicit] = s.fake.requests.map((r) => ({ ...r.sampling, seed: r.sampling.seed }));
    if (key === "num_predict") expect(explicit!.maxTokens).toBeGreaterThan(2); // -1: up to the context
    else expect(explicit).toEqual(omitted!);
  });

  test("--generation-config sits between Ollama's defaults and the request (a Modelfile's PARAMETERs)", async () => {
    const s = testServer({ generationDefaults: { temperature: 0.3, max_new_tokens: 4 } });
    await (await s.call("POST", "/api/chat", hi({ stream: false }))).json();
    expect(s.fake.requests[0]!.sampling).toMatchObject({ temperature: 0.3, maxTokens: 4, topK: 40 });
    await (await s.call("POST", "/api/chat", hi({ stream: false, options: { temperature: 0.9 } }))).json();
    expect(s.fake.requests[1]!.sampling.temperature).toBe(0.9);
  });

  test("num_ctx limits prompt plus output; larger than --max-model-len is refused", async () => {
    const s = testServer({}, { maxModelLen: 64 });
    await (await s.call("POST", "/api/chat", hi({ stream: false, options: { num_ctx: 30 } }))).json();
    const r = s.fake.requests[0]!;
    expect(r.promptTokenIds.length + r.sampling.maxTokens!).toBe(30);
    expect(await error(await s.call("POST", "/api/chat", hi({ options: { num_ctx: 65 } })), 400)).toContain("--max-model-len 64");
    expect(await error(await s.call("POST", "/api/chat", hi({ options: { num_ctx: 5 } })), 400)).toContain("exceeds the context length");
  });

  test.each([
    [{ options: { temperature: "hot" } }, 'option "temperature" must be of type float'],
    [{ options: { top_k: 1.5 } }, 'option "top_k" must be of type integer'],
    [{ options: { numa: true } }, 'invalid option provided: "numa"'],
    [{ options: { num_gpu: 8 } }, 'option "num_gpu" cannot be changed per request'],
    [{ options: { num_predict: 0 } }, 'option "num_predict" must be positive'],
    [{ options: { mirostat: 3 } }, 'option "mirostat" must be 0, 1 or 2'],
    [{ keep_alive: 0 }, "keep_alive 0 asks to unload the model"],
    [{ keep_alive: "5 minutes" }, 'time: invalid duration "5 minutes"'],
    [{ think: true }, '"fake-model:latest" does not support thinking'],
    [{ think: "extreme" }, "invalid think value"],
    [{ tools: [{ type: "function", function: { name: "f" } }] }, "does not support tools"],
    [{ messages: [{ role: "user", content: "hi", images: ["aGk="] }] }, "started without a vision projector (serve it with --mmproj"],
    [{ format: 5 }, "invalid format"],
    [{ top_logprobs: 21, logprobs: true }, "top_logprobs must be between 0 and 20"],
    [{ truncate: true }, "truncate true is not supported"],
    [{ shift: true }, "shift true is not supported"],
  ])("refused in Ollama's error shape: %j", async (extra, message) => {
    const s = testServer();
    expect(await error(await s.call("POST", "/api/chat", hi(extra)), 400)).toContain(message);
    expect(s.fake.requests).toHaveLength(0);
  });

  test("an unknown model is Ollama's 404; a missing one 400; bad JSON and no body 400, all as {error}", async () => {
    const s = testServer();
    expect(await error(await s.call("POST", "/api/chat", hi({ model: "llama3.2" })), 404)).toBe("model 'llama3.2' not found");
    expect(await error(await s.call("POST", "/api/chat", { messages: [] }), 400)).toBe("model is required");
    expect(await error(await s.call("POST", "/api/chat", "{not json"), 400)).toContain("not valid JSON");
    expect(await error(await s.call("POST", "/api/chat", "[1]"), 400)).toContain("JSON object");
  });

  test("a wrong method and an unknown /api path answer in Ollama's shape too; GET routes answer HEAD", async () => {
    const s = testServer();
    expect(await error(await s.call("GET", "/api/chat"), 405)).toBe("Method Not Allowed");
    expect(await error(await s.call("POST", "/api/nothing", {}), 404)).toBe("Not Found");
    expect(await error(await s.call("POST", "/api/chat", hi(), { "content-length": String(64 * 1024 * 1024) }), 413)).toContain("larger than the limit");
    for (const path of ["/api/tags", "/api/ps", "/api/version"]) expect((await s.call("HEAD", path)).status).toBe(200);
  });

  test("name:tag forms resolve to the served name, case-insensitively; answers carry the display name", async () => {
    const s = testServer({ servedModelAliases: ["other"] });
    for (const model of ["fake-model", "fake-model:latest", "FAKE-MODEL:Latest", "other"]) {
      const body = await (await s.call("POST", "/api/chat", hi({ model, stream: false, options: { num_predict: 1 } }))).json();
      expect(body.model).toBe(model === "other" ? "fake-model:latest" : "fake-model:latest");
    }
  });

  test("empty messages: the load answer (done_reason load), nothing generated", async () => {
    const s = testServer();
    const records = await ndjsonRecords(await s.call("POST", "/api/chat", { model: "fake-model", messages: [] }), "chat");
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ done: true, done_reason: "load" });
    expect(s.fake.requests).toHaveLength(0);
  });

  test("an engine failure mid-stream: one {error} line, status 200 (ollama streamResponse)", async () => {
    const s = testServer({}, { failAfterTokens: 3 });
    const res = await s.call("POST", "/api/chat", hi({ options: { num_predict: 10 } }));
    expect(res.status).toBe(200);
    const records = await ndjsonRecords(res, "chat");
    expect(records.at(-1)!.error).toBeString();
    expect(records.slice(0, -1).every((r) => r.done === false)).toBe(true);
  });

  test("format json and a schema become structured outputs", async () => {
    const s = testServer();
    await (await s.call("POST", "/api/chat", hi({ stream: false, format: "json", options: { num_predict: 1 } }))).json();
    expect(s.fake.requests[0]!.sampling.structuredOutputs).toMatchObject({ kind: "json_object" });
    const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"] };
    await (await s.call("POST", "/api/chat", hi({ stream: false, format: schema, options: { num_predict: 1 } }))).json();
    const spec = s.fake.requests[1]!.sampling.structuredOutputs as { kind: string; schema: string };
    expect(JSON.parse(spec.schema)).toEqual(schema);
  });

  test("logprobs: one entry per token, with top_logprobs", async () => {
    const s = testServer();
    const body = await (await s.call("POST", "/api/chat", hi({ stream: false, logprobs: true, top_logprobs: 2, options: { num_predict: 3 } }))).json();
    checkOllama("chat", body);
    expect(body.logprobs).toHaveLength(3);
    expect(body.logprobs[0].top_logprobs).toHaveLength(2);
    expect(body.logprobs.map((l: Json) => l.token).join("")).toBe(body.message.content);
  });

  test("tools: calls parsed by the server's tool parser, arguments as objects, Ollama's call ids; streamed whole", async () => {
    const script = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    const s = testServer({ chat: chatWith({ enableAutoToolChoice: true, toolCallParser: "hermes" }) }, { script });
    const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
    const body = await (await s.call("POST", "/api/chat", hi({ stream: false, tools }))).json();
    checkOllama("chat", body);
    expect(body.message.tool_calls).toHaveLength(1);
    expect(body.message.tool_calls[0].function).toEqual({ index: 0, name: "get_weather", arguments: { city: "Paris" } });
    const records = await ndjsonRecords(await s.call("POST", "/api/chat", hi({ tools })), "chat");
    const calls = records.flatMap((r) => r.message.tool_calls ?? []);
    expect(calls.map((c: Json) => c.function.arguments)).toEqual([{ city: "Paris" }]);
    expect(records.map((r) => r.message.content).join("")).not.toContain("tool_call");
    // a tool result goes back with tool_name; earlier calls with object arguments
    const followUp = hi({ stream: false, tools, messages: [{ role: "user", content: "w?" }, { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris" } } }] }, { role: "tool", content: "sunny", tool_name: "get_weather" }] });
    expect((await s.call("POST", "/api/chat", followUp)).status).toBe(200);
  });

  test("think: thinking split off by the reasoning parser; think false turns it off through the template", async () => {
    const s = testServer({ chat: chatWith({ reasoningParser: "deepseek_r1" }) }, { script: "<think>hmm</think>yes" });
    const body = await (await s.call("POST", "/api/chat", hi({ stream: false, think: true }))).json();
    checkOllama("chat", body);
    expect(body.message).toMatchObject({ thinking: "hmm", content: "yes" });
    const records = await ndjsonRecords(await s.call("POST", "/api/chat", hi({ think: "high" })), "chat");
    expect(records.map((r) => r.message.thinking ?? "").join("")).toBe("hmm");
    expect(records.map((r) => r.message.content).join("")).toBe("yes");
  });

  test("each request counts once in the HTTP metrics under its route", async () => {
    const events: Json[] = [];
    const s = testServer({ onHttpResponse: (e) => void events.push(e) });
    await (await s.call("POST", "/api/chat", hi({ options: { num_predict: 2 } }))).text();
    await (await s.call("POST", "/api/chat", hi({ model: "nope" }))).text();
    await Bun.sleep(20);
    expect(events.map((e) => [e.handler, e.status])).toEqual([["/api/chat", 200], ["/api/chat", 404]]);
  });
});

describe("/api/generate", () => {
  test("through the chat template (system + prompt); streamed records of `response`", async () => {
    const s = testServer();
    const records = await ndjsonRecords(await s.call("POST", "/api/generate", { model: "fake-model", prompt: "hello", system: "be brief", options: { num_predict: 4 } }), "generate");
    expect(records.map((r) => r.response).join("")).toBe("Once");
    expect(records.at(-1)).toMatchObject({ done: true, done_reason: "length", response: "" });
    expect(s.fake.tokenizer.decode([...s.fake.requests[0]!.promptTokenIds])).toBe("system: be brief\nuser: hello\nassistant:");
  });

  test("raw: the prompt as it is, no template", async () => {
    const s = testServer();
    const body = await (await s.call("POST", "/api/generate", { model: "fake-model", prompt: "abc", raw: true, stream: false, options: { num_predict: 2 } })).json();
    checkOllama("generate", body);
    expect(s.fake.tokenizer.decode([...s.fake.requests[0]!.promptTokenIds], { skipSpecialTokens: true })).toBe("abc");
  });

  test("empty prompt: load answer; keep_alive reported by /api/ps", async () => {
    const s = testServer();
    const before = Date.now();
    const body = await (await s.call("POST", "/api/generate", { model: "fake-model", keep_alive: "1h", stream: false })).json();
    expect(body).toMatchObject({ done: true, done_reason: "load", response: "" });
    const ps = await (await s.call("GET", "/api/ps")).json();
    checkOllama("ps", ps);
    const expires = Date.parse(ps.models[0].expires_at);
    expect(expires).toBeGreaterThanOrEqual(before + 3_600_000 - 5);
    expect(expires).toBeLessThan(Date.now() + 3_600_000 + 5);
    await (await s.call("POST", "/api/generate", { model: "fake-model", keep_alive: -1, stream: false })).json();
    expect(new Date((await (await s.call("GET", "/api/ps")).json()).models[0].expires_at).getUTCFullYear()).toBe(2318);
  });

  test.each([
    [{ raw: true, system: "s" }, "raw mode does not support template, system, or context"],
    [{ suffix: "end" }, "does not support insert"],
    [{ template: "{{ .Prompt }}" }, "template is not supported"],
    [{ context: [1, 2, 3] }, "context (the deprecated token list"],
    [{ images: ["aGk="] }, "started without a vision projector (serve it with --mmproj"],
    [{ raw: true, think: true }, "does not support thinking"],
  ])("refused: %j", async (extra, message) => {
    const s = testServer();
    expect(await error(await s.call("POST", "/api/generate", { model: "fake-model", prompt: "p", ...extra }), 400)).toContain(message);
  });

  test("suffix: fill-in-the-middle with the GGUF's FIM tokens (llama.cpp's prefix-suffix-middle prompt); capability insert", async () => {
    const metadata = new Map<string, number>([["tokenizer.ggml.fim_pre_token_id", 120], ["tokenizer.ggml.fim_suf_token_id", 121], ["tokenizer.ggml.fim_mid_token_id", 122]]);
    const s = testServer({ ollama: { metadata } });
    const body = await (await s.call("POST", "/api/generate", { model: "fake-model", prompt: "ab", suffix: "cd", stream: false, options: { num_predict: 2 } })).json();
    checkOllama("generate", body);
    const enc = (text: string) => s.fake.tokenizer.encode(text, { addSpecial: false, parseSpecial: false });
    expect(s.fake.requests[0]!.promptTokenIds).toEqual([s.fake.tokenizer.bosId!, 120, ...enc("ab"), 121, ...enc("cd"), 122]);
    expect((await (await s.call("POST", "/api/show", { model: "fake-model" })).json()).capabilities).toContain("insert");
    expect(await error(await s.call("POST", "/api/generate", { model: "fake-model", prompt: "ab", suffix: "cd", raw: true }), 400)).toContain("does not take raw or system");
  });

  test("think on a raw prompt of a thinking model is refused (no template to turn it on or off)", async () => {
    const s = testServer({ chat: chatWith({ reasoningParser: "deepseek_r1" }) });
    expect(await error(await s.call("POST", "/api/generate", { model: "fake-model", prompt: "p", raw: true, think: false }), 400)).toContain("think does not apply to raw or suffix prompts");
  });
});
