/**
 * Tools and reasoning with no flags: the parsers chosen from real chat templates (llama.cpp's models/templates, read
 * at test time from the tree node-llama-cpp ships), an explicit flag winning, and a template with no tool format
 * keeping vLLM's refusal of tool_choice "auto".
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { llamaModelsDir } from "../../scripts/llama-vocab.ts";
import { DEFAULT_CHAT_SERVING } from "../../src/server/chat-serving.ts";
import { detectChatFormats, withDetectedParsers } from "../../src/server/chat-format-detection.ts";
import { REASONING_PARSER_NAMES } from "../../src/server/openai/reasoning-parsers/registry.ts";
import { TOOL_PARSER_NAMES } from "../../src/server/openai/tool-parsers/registry.ts";
import { resolveToolChoice } from "../../src/server/openai/chat-request.ts";

const AUTO_WITH_TOOL = { messages: [], tool_choice: "auto", tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }] } as Parameters<typeof resolveToolChoice>[0];
const template = (name: string): string => readFileSync(join(llamaModelsDir(), "templates", `${name}.jinja`), "utf8");

// [template, tool parser, reasoning parser]: the parsers vLLM's docs name for each family
const CASES: readonly [string, string | null, string | null][] = [
  ["Qwen-Qwen2.5-7B-Instruct", "hermes", null],
  ["Qwen-Qwen3-0.6B", "hermes", "qwen3"],
  ["Qwen3-Coder", "qwen3_coder", null],
  ["NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes", null],
  ["meta-llama-Llama-3.1-8B-Instruct", "llama3_json", null],
  ["meta-llama-Llama-3.2-3B-Instruct", "llama3_json", null],
  ["meta-llama-Llama-3.3-70B-Instruct", "llama3_json", null],
  ["mistralai-Mistral-Nemo-Instruct-2407", "mistral", null],
  ["openai-gpt-oss-120b", "openai", "openai_gptoss"],
  ["ibm-granite-granite-3.3-2B-Instruct", null, "granite"],
  ["deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", null, "deepseek_r1"],
  ["google-gemma-2-2b-it", null, null],
  ["microsoft-Phi-3.5-mini-instruct", null, null],
];

describe("parsers chosen from the chat template's markers", () => {
  test.each(CASES)("%s -> tool %p, reasoning %p", (name, tool, reasoning) => {
    const found = detectChatFormats(template(name));
    expect(found.tool?.parser ?? null).toBe(tool);
    expect(found.reasoning?.parser ?? null).toBe(reasoning);
  });

  test("every parser the table can choose is registered", () => {
    for (const [, tool, reasoning] of CASES) {
      if (tool !== null) expect(TOOL_PARSER_NAMES).toContain(tool);
      if (reasoning !== null) expect(REASONING_PARSER_NAMES).toContain(reasoning);
    }
  });
});

describe("withDetectedParsers", () => {
  test("no flags: the detected tool parser serves tool_choice auto, with one start-up line", () => {
    const { chat, line } = withDetectedParsers(DEFAULT_CHAT_SERVING, template("Qwen-Qwen3-0.6B"));
    expect(chat.toolCallParser).toBe("hermes");
    expect(chat.enableAutoToolChoice).toBe(true);
    expect(chat.reasoningParser).toBe("qwen3");
    expect(line).toContain("tool call parser hermes");
    expect(line).toContain("reasoning parser qwen3");
    expect(() => resolveToolChoice(AUTO_WITH_TOOL, chat)).not.toThrow();
  });

  test("an explicit flag wins over the template", () => {
    const given = { ...DEFAULT_CHAT_SERVING, toolCallParser: "pythonic", enableAutoToolChoice: true, reasoningParser: "deepseek_r1" };
    const { chat, line } = withDetectedParsers(given, template("Qwen-Qwen3-0.6B"));
    expect(chat).toEqual(given);
    expect(line).toBeNull();
  });

  test("an explicit tool parser keeps its own auto switch; only the reasoning parser is detected", () => {
    const given = { ...DEFAULT_CHAT_SERVING, toolCallParser: "hermes", enableAutoToolChoice: false };
    const { chat } = withDetectedParsers(given, template("Qwen-Qwen3-0.6B"));
    expect(chat.enableAutoToolChoice).toBe(false);
    expect(chat.reasoningParser).toBe("qwen3");
  });

  test("a template with no tool format keeps vLLM's 400 for tool_choice auto", () => {
    const { chat, line } = withDetectedParsers(DEFAULT_CHAT_SERVING, template("google-gemma-2-2b-it"));
    expect(chat).toEqual(DEFAULT_CHAT_SERVING);
    expect(line).toBeNull();
    expect(() => resolveToolChoice(AUTO_WITH_TOOL, chat)).toThrow(/--enable-auto-tool-choice/);
  });
});
