/**
 * Reasoning parsers on their formats (cases written from the formats after reading vLLM's tests/reasoning/*): the
 * non-streaming split, and the stream at every split point agreeing with it, never sending reasoning and content in
 * one delta.
 */
import { describe, expect, test } from "bun:test";
import { ChatStreamProcessor, chatMessageOf, type ChatOutputConfig } from "../../src/server/openai/chat-output.ts";
import { graniteReasoningParser } from "../../src/server/openai/reasoning-parsers/granite.ts";
import { gptOssReasoningParser } from "../../src/server/openai/reasoning-parsers/gpt-oss.ts";
import type { ReasoningParser } from "../../src/server/openai/reasoning-parsers/reasoning-parser.ts";
import { deepseekR1ReasoningParser, qwen3ReasoningParser } from "../../src/server/openai/reasoning-parsers/think-tags.ts";
import { splits } from "./tool-parsers/stream-helpers.ts";

function config(parser: ReasoningParser, thinkingEnabled = true, prompt = ""): ChatOutputConfig {
  return { reasoning: { parser, context: { thinkingEnabled }, promptEndsReasoning: parser.promptEndsReasoning(prompt), include: true }, tools: null };
}

function check(cfg: ChatOutputConfig, text: string, reasoning: string | null, content: string | null, streamed?: { reasoning: string; content: string }) {
  const message = chatMessageOf(text, cfg);
  expect({ reasoning: message.reasoning, content: message.content }).toEqual({ reasoning, content });
  const expected = streamed ?? { reasoning: reasoning ?? "", content: content ?? "" };
  for (const chunks of splits(text)) {
    const p = new ChatStreamProcessor(cfg);
    const got = { reasoning: "", content: "" };
    chunks.forEach((chunk, i) => {
      for (const d of p.push(chunk, i === chunks.length - 1)) {
        expect(d.reasoning !== undefined && d.content !== undefined).toBe(false);
        got.reasoning += d.reasoning ?? "";
        got.content += d.content ?? "";
      }
    });
    for (const d of p.push("", true)) { got.reasoning += d.reasoning ?? ""; got.content += d.content ?? ""; }
    expect(got).toEqual(expected);
  }
}

describe("qwen3", () => {
  const q = config(qwen3ReasoningParser);
  test("<think> block then the answer", () => check(q, "<think>\nHmm.\n</think>\n\nHello!", "\nHmm.\n", "\n\nHello!"));
  test("the template opened the block: only </think> in the output", () => check(q, "Hmm.</think>Hello!", "Hmm.", "Hello!"));
  test("cut off while thinking: all reasoning", () => check(q, "<think>Hmm, let me", "Hmm, let me", null));
  test("empty reasoning stays an empty string", () => check(q, "<think></think>Hi", "", "Hi"));
  test("enable_thinking false: no </think> means all content", () => check(config(qwen3ReasoningParser, false), "Hello <b>world</b>", null, "Hello <b>world</b>"));
  test("the prompt closed the block: everything is content, even a </think>", () => check(config(qwen3ReasoningParser, true, "<|im_start|>assistant\n<think>\n\n</think>\n\n"), "a</think>b", null, "a</think>b"));
  test("<tool_call><function=...> inside the block ends the reasoning (Qwen3.5)", () => check(q, "Need a tool.\n<tool_call>\n<function=f>\n</function>\n</tool_call>", "Need a tool.\n", "<tool_call>\n<function=f>\n</function>\n</tool_call>"));
  test("a <tool_call> mention without <function is reasoning", () => check(q, "I could use <tool_call> here", "I could use <tool_call> here", null));
});

describe("deepseek_r1", () => {
  const d = config(deepseekR1ReasoningParser);
  test("with and without the opening tag", () => {
    check(d, "<think>Plan.</think>Answer.", "Plan.", "Answer.");
    check(d, "Plan.</think>Answer.", "Plan.", "Answer.");
  });
  test("no </think>: all reasoning, even when thinking is 'off' (R1 has no switch)", () => check(config(deepseekR1ReasoningParser, false), "Just text", "Just text", null));
});

describe("granite", () => {
  const g = config(graniteReasoningParser);
  test("both markers", () => check(g, "Here is my thought process: think hard. Here is my response: done.", " think hard. ", " done."));
  test("Here's spelling", () => check(g, "Here's my thought process:a Here's my response:b", "a ", "b"));
  test("no markers: all content", () => check(g, "Hello there.", null, "Hello there."));
});

describe("openai_gptoss (Harmony channels)", () => {
  const g = config(gptOssReasoningParser);
  test("analysis is reasoning, final is content", () => check(g, "<|channel|>analysis<|message|>User asks.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>", "User asks.", "Hello!"));
  test("cut off while analysing: reasoning only", () => check(g, "<|channel|>analysis<|message|>Thinking about", "Thinking about", null));
  test("not Harmony: all content", () => check(g, "plain text", null, "plain text"));
});
