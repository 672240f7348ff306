/** The reasoning parsers fennec has, by vLLM's `--reasoning-parser` name. */
import { gptOssReasoningParser } from "./gpt-oss.ts";
import { graniteReasoningParser } from "./granite.ts";
import type { ReasoningParser } from "./reasoning-parser.ts";
import { deepseekR1ReasoningParser, qwen3ReasoningParser } from "./think-tags.ts";

export const REASONING_PARSERS: Readonly<Record<string, ReasoningParser>> = {
  deepseek_r1: deepseekR1ReasoningParser,
  granite: graniteReasoningParser,
  openai_gptoss: gptOssReasoningParser,
  qwen3: qwen3ReasoningParser,
};

export const REASONING_PARSER_NAMES: readonly string[] = Object.keys(REASONING_PARSERS);
