/**
 * Tools and reasoning with no flags: when `--tool-call-parser` / `--reasoning-parser` are not given, the parsers are
 * chosen from markers in the model's chat template, as llama.cpp's `common/chat.cpp`
 * (`common_chat_try_specialized_template`) picks a format from the template source and Ollama picks a parser from its
 * template. An explicit flag always wins; a template with no known tool format keeps vLLM's 400 for
 * `tool_choice: "auto"`. One table per parser family; the first matching row wins.
 */
import type { ChatServingOptions } from "./chat-serving.ts";

interface FormatRule {
  /** the vLLM parser name (a key of tool-parsers/registry.ts or reasoning-parsers/registry.ts) */
  readonly parser: string;
  /** what the template shows, in words, for the start-up line */
  readonly because: string;
  readonly matches: (source: string) => boolean;
}

const has = (source: string, ...markers: string[]): boolean => markers.every((m) => source.includes(m));

/** Tool-call formats (llama.cpp: Qwen3-Coder XML before the JSON `<tool_call>` of Hermes / Qwen2.5 / Qwen3). */
const TOOL_FORMATS: readonly FormatRule[] = [
  { parser: "qwen3_coder", because: "<tool_call> with <function=...> and <parameter=...>", matches: (s) => has(s, "<tool_call>", "<function=", "<parameter=") },
  { parser: "mistral", because: "[TOOL_CALLS]", matches: (s) => has(s, "[TOOL_CALLS]") },
  { parser: "openai", because: "harmony <|channel|> messages to functions.", matches: (s) => has(s, "<|channel|>", "to=", "functions.") },
  { parser: "hermes", because: "<tool_call> JSON", matches: (s) => has(s, "<tool_call>") },
  { parser: "llama3_json", because: "Llama 3 headers with <|python_tag|> or a {\"name\", \"parameters\"} call", matches: (s) => has(s, "<|start_header_id|>") && (has(s, "<|python_tag|>") || has(s, "\"parameters\"")) },
];

/** Reasoning formats: gpt-oss's channels, Granite's "thought process", then <think> blocks. */
const REASONING_FORMATS: readonly FormatRule[] = [
  { parser: "openai_gptoss", because: "harmony <|channel|>", matches: (s) => has(s, "<|channel|>") },
  { parser: "granite", because: "Granite's \"Here is my thought process\"", matches: (s) => has(s, "<|start_of_role|>", "thought process") },
  // Qwen3's template switches thinking with enable_thinking and carries <tool_call>: vLLM's qwen3 parser
  { parser: "qwen3", because: "<think> switched by enable_thinking (Qwen3)", matches: (s) => has(s, "<think>", "enable_thinking", "<tool_call>") },
  // DeepSeek-R1 and its distills open <think> in the prompt: vLLM's deepseek_r1 parser reads output without the opener
  { parser: "deepseek_r1", because: "<think> blocks", matches: (s) => has(s, "<think>") },
];

export interface DetectedFormat {
  readonly parser: string;
  readonly because: string;
}

/**
 * The parsers a chat template's markers name (null where none).
 * @example detectChatFormats("{% if tools %}<tool_call>...").tool?.parser // "hermes"
 */
export function detectChatFormats(source: string): { tool: DetectedFormat | null; reasoning: DetectedFormat | null } {
  const pick = (rules: readonly FormatRule[]): DetectedFormat | null => {
    const rule = rules.find((r) => r.matches(source));
    return rule ? { parser: rule.parser, because: rule.because } : null;
  };
  return { tool: pick(TOOL_FORMATS), reasoning: pick(REASONING_FORMATS) };
}

/**
 * The chat settings with the detected parsers filled in where no flag chose one, and the one start-up line that says
 * so (null: nothing chosen). A detected tool parser also enables "auto" tool choice (llama.cpp `--jinja` and Ollama
 * serve tools with no flags). `templateSource`: the template in use (`--chat-template` or the model's own).
 */
export function withDetectedParsers(chat: ChatServingOptions, templateSource: string | null): { chat: ChatServingOptions; line: string | null } {
  if (templateSource === null) return { chat, line: null };
  const found = detectChatFormats(templateSource);
  const tool = chat.toolCallParser === null ? found.tool : null;
  const reasoning = chat.reasoningParser === null ? found.reasoning : null;
  if (tool === null && reasoning === null) return { chat, line: null };
  const chosen = [
    ...(tool ? [`tool call parser ${tool.parser} (${tool.because}; "auto" tool choice enabled)`] : []),
    ...(reasoning ? [`reasoning parser ${reasoning.parser} (${reasoning.because})`] : []),
  ];
  return {
    chat: {
      ...chat,
      ...(tool ? { toolCallParser: tool.parser, enableAutoToolChoice: true } : {}),
      ...(reasoning ? { reasoningParser: reasoning.parser } : {}),
    },
    line: `Chose from the chat template: ${chosen.join(", ")}. --tool-call-parser / --reasoning-parser override it.`,
  };
}
