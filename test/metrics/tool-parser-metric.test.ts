/**
 * vllm:tool_call_parser_invocations_total as vLLM exposes it: only with --tool-call-parser, every (mode, outcome,
 * request_type) child pre-created at 0 with model_name only, with or without engine stats; counted once per choice
 * without streaming and once per delta when streaming, by the chat route.
 */
import { expect, test } from "bun:test";
import { makeDeprecationGate } from "../../src/metrics/deprecation.ts";
import { MetricsRecorder, type RecorderOptions } from "../../src/metrics/recorder.ts";
import { DEFAULT_CHAT_SERVING } from "../../src/server/chat-serving.ts";
import { testServer } from "../server/helpers.ts";
import { parseExposition, sampleValue } from "./exposition.ts";

const NAME = "vllm:tool_call_parser_invocations_total";

function recorder(overrides: Partial<RecorderOptions> = {}): MetricsRecorder {
  const gate = makeDeprecationGate("0.2.0", null);
  if (!gate.ok) throw new Error(gate.error);
  return new MetricsRecorder({ modelName: "tiny", maxModelLen: 512, logStats: true, enableMfuMetrics: false, deprecation: gate.value, processMetrics: false, ...overrides });
}

test("the series exist only with a parser, pre-created, labelled model_name mode outcome request_type", async () => {
  expect(await recorder().exposition()).not.toContain(NAME);
  for (const logStats of [true, false]) {
    const samples = parseExposition(await recorder({ toolCallParser: true, logStats }).exposition()).filter((s) => s.name === NAME);
    expect(samples).toHaveLength(2 * 2 * 3);
    for (const s of samples) {
      expect(Object.keys(s.labels).sort()).toEqual(["mode", "model_name", "outcome", "request_type"]);
      expect(s.value).toBe(0);
    }
  }
  expect(await recorder({ toolCallParser: true }).exposition()).toContain("# HELP vllm:tool_call_parser_invocations_total Total number of ToolParser invocations. Non-streaming increments once per choice; streaming increments once per delta.");
});

test("the chat route counts each choice (non-streaming) and each delta (streaming)", async () => {
  const r = recorder({ toolCallParser: true });
  const s = testServer({ chat: { ...DEFAULT_CHAT_SERVING, enableAutoToolChoice: true, toolCallParser: "hermes" }, onToolParserInvocation: (e) => r.onToolParserInvocation(e) },
    { script: '<tool_call>{"name": "f", "arguments": {}}</tool_call>', maxModelLen: 4096 });
  const body = { messages: [{ role: "user", content: "hi" }], tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }], n: 2, temperature: 1 };
  expect((await s.call("POST", "/v1/chat/completions", body)).status).toBe(200);
  let samples = parseExposition(await r.exposition());
  expect(sampleValue(samples, NAME, { mode: "non_streaming", outcome: "tool_call", request_type: "chat_completions" })).toBe(2);
  const res = await s.call("POST", "/v1/chat/completions", { ...body, n: 1, stream: true });
  await res.text();
  samples = parseExposition(await r.exposition());
  const calls = sampleValue(samples, NAME, { mode: "streaming", outcome: "tool_call", request_type: "chat_completions" })!;
  const none = sampleValue(samples, NAME, { mode: "streaming", outcome: "no_tool_call", request_type: "chat_completions" })!;
  // one invocation per generated token (the fake streams one character per delta); the ones that sent tool-call deltas
  expect(calls + none).toBe('<tool_call>{"name": "f", "arguments": {}}</tool_call>'.length);
  expect(calls).toBeGreaterThanOrEqual(2);
  // a request without tools does not run the parser
  await s.call("POST", "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] });
  expect(sampleValue(parseExposition(await r.exposition()), NAME, { mode: "non_streaming", outcome: "no_tool_call", request_type: "chat_completions" })).toBe(0);
});
