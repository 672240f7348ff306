/**
 * The `openai` tool parser (gpt-oss's Harmony messages to functions) alone and after the `openai_gptoss` reasoning
 * parser, as the server runs them: whole texts and every split of the stream, reasoning, content and calls apart.
 */
import { describe, expect, test } from "bun:test";
import { ChatStreamProcessor, chatMessageOf, type ChatOutputConfig } from "../../../src/server/openai/chat-output.ts";
import { gptOssReasoningParser } from "../../../src/server/openai/reasoning-parsers/gpt-oss.ts";
import { openaiToolParser } from "../../../src/server/openai/tool-parsers/openai.ts";
import { TOOL_PARSERS } from "../../../src/server/openai/tool-parsers/registry.ts";
import { checkGolden, splits } from "./stream-helpers.ts";

const WEATHER = { name: "get_weather", arguments: { city: "Paris" } };
const CALL = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>';

describe("openai (Harmony) tool parser alone", () => {
  const p = openaiToolParser;
  test("registered under vLLM's name", () => expect(TOOL_PARSERS.openai).toBe(p));
  test("one call on the commentary channel", () => checkGolden(p, { text: CALL, content: "", calls: [WEATHER] }));
  test("the recipient before the channel, after <|start|>", () => checkGolden(p, {
    text: '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>', content: "", calls: [WEATHER],
  }));
  test("a final answer's text, then two calls", () => checkGolden(p, {
    text: `<|channel|>final<|message|>Checking.<|end|><|start|>assistant${CALL}<|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone": "UTC"}<|call|>`,
    content: "Checking.", calls: [WEATHER, { name: "get_time", arguments: { zone: "UTC" } }],
  }));
  test("a call cut off before <|call|> still counts once its JSON is whole", () => checkGolden(p, {
    text: '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}', content: "", calls: [WEATHER],
  }));
  test("malformed calls and plain text are content", () => {
    for (const text of ['<|channel|>commentary to=functions.f<|message|>{"a": }<|call|>', "<|channel|>commentary to=functions.f<|message|>not json<|call|>", "The weather is fine."]) {
      checkGolden(p, { text, content: text, calls: [] });
    }
  });
});

describe("openai_gptoss reasoning, then the openai tool parser (the server's order)", () => {
  const cfg: ChatOutputConfig = {
    reasoning: { parser: gptOssReasoningParser, context: { thinkingEnabled: true }, promptEndsReasoning: false, include: true },
    tools: { parser: openaiToolParser, definitions: [], parallel: true },
  };
  const text = `<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant${CALL}`;
  test("analysis is reasoning, the call is a tool call, no content", () => {
    const m = chatMessageOf(text, cfg);
    expect(m.reasoning).toBe("Need the weather.");
    expect(m.content).toBeNull();
    expect(m.toolCalls.map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) as unknown }))).toEqual([WEATHER]);
  });
  test("a reply without a call: final channel content", () => {
    const m = chatMessageOf("<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>", cfg);
    expect({ reasoning: m.reasoning, content: m.content, calls: m.toolCalls.length }).toEqual({ reasoning: "Easy.", content: "Hello!", calls: 0 });
  });
  test("streamed at every split: the same reasoning and call, nothing leaks into content", () => {
    for (const chunks of splits(text)) {
      const p = new ChatStreamProcessor(cfg);
      let reasoning = "";
      let content = "";
      const names: string[] = [];
      let args = "";
      chunks.forEach((chunk, i) => {
        for (const d of p.push(chunk, i === chunks.length - 1)) {
          reasoning += d.reasoning ?? "";
          content += d.content ?? "";
          for (const c of d.tool_calls ?? []) {
            if (c.function.name !== undefined) names.push(c.function.name);
            args += c.function.arguments ?? "";
          }
        }
      });
      expect({ reasoning, content, names, args: JSON.parse(args) as unknown }).toEqual({ reasoning: "Need the weather.", content: "", names: ["get_weather"], args: WEATHER.arguments });
      expect(p.calledTools).toBe(true);
    }
  });
});
