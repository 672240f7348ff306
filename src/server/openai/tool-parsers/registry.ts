/** The tool-call parsers fennec has, by vLLM's `--tool-call-parser` name. */
import { hermesToolParser } from "./hermes.ts";
import { llama3JsonToolParser } from "./llama3-json.ts";
import { mistralToolParser } from "./mistral.ts";
import { openaiToolParser } from "./openai.ts";
import { pythonicToolParser } from "./pythonic.ts";
import { qwen3CoderToolParser, qwen3XmlToolParser } from "./qwen3-coder.ts";
import type { ToolParser } from "./tool-parser.ts";

export const TOOL_PARSERS: Readonly<Record<string, ToolParser>> = {
  hermes: hermesToolParser,
  llama3_json: llama3JsonToolParser,
  // vLLM registers llama4_json on the same parser
  llama4_json: { ...llama3JsonToolParser, name: "llama4_json" },
  mistral: mistralToolParser,
  openai: openaiToolParser,
  pythonic: pythonicToolParser,
  qwen3_coder: qwen3CoderToolParser,
  qwen3_xml: qwen3XmlToolParser,
};

export const TOOL_PARSER_NAMES: readonly string[] = Object.keys(TOOL_PARSERS);
