/**
 * vLLM's `thinking_token_budget` (chat and text completions; vllm/v1/sample/logits_processor/builtin.py
 * ThinkingTokenBudgetLogitsProcessor, its reasoning_config from the reasoning parser's reasoning_start_str and
 * reasoning_end_str): -1 is unlimited; otherwise, once the reasoning holds that many tokens, counted from its start
 * (the prompt's, when the template opened it; else the model's own start marker), the parser's end string, tokenized,
 * is forced token by token and the answer follows in the same request (engine/thinking-budget.ts). vLLM's 400 texts.
 * @example const sampling = withThinkingTokenBudget(tokenizer, parser, body.thinking_token_budget, promptTokenIds, sampling);
 */
import type { SamplingParams } from "../../engine/sampling-params.ts";
import type { Tokenizer } from "../../tokenizer/tokenizer.ts";
import { ApiError } from "../errors.ts";
import type { ReasoningParser } from "./reasoning-parsers/reasoning-parser.ts";

const PARAM = "thinking_token_budget";

/**
 * vLLM's checks of the field (its protocol's validator, then the reasoning config's): the budget to enforce, or null
 * when there is none (absent, null, -1). `parser`: --reasoning-parser's, null without one.
 */
export function checkThinkingTokenBudget(budget: unknown, parser: ReasoningParser | null): number | null {
  if (budget === undefined || budget === null) return null;
  if (typeof budget !== "number" || !Number.isInteger(budget) || budget < -1) {
    throw new ApiError("badRequest", "`thinking_token_budget` must be a non-negative integer or -1 for unlimited.", PARAM);
  }
  if (parser === null) {
    throw new ApiError("badRequest", "thinking_token_budget is set but reasoning_config is not configured. Please set --reasoning-parser and/or --reasoning-config to use thinking_token_budget.", PARAM);
  }
  if (budget === -1) return null;
  // vLLM derives the end to force from the parser's reasoning_end_str; without one it could not force it either
  if (parser.endToken === null) {
    throw new ApiError("badRequest", `thinking_token_budget needs the reasoning parser's end string to force, and the ${parser.name} reasoning parser has none: leave thinking_token_budget out or use -1.`, PARAM);
  }
  return budget;
}

/**
 * `sampling` with the budget for this prompt (its end string's ids; its start string's ids unless the prompt itself
 * opened the reasoning: a start after the prompt's last end, vLLM's in_think from the prompt), or as it was when
 * `budget` is null.
 */
export function withThinkingTokenBudget(tokenizer: Tokenizer, parser: ReasoningParser | null, budget: number | null, promptTokenIds: readonly number[], sampling: SamplingParams): SamplingParams {
  if (budget === null || parser === null || parser.endToken === null) return sampling;
  const encode = (text: string) => tokenizer.encode(text, { addSpecial: false, parseSpecial: true });
  const endTokenIds = encode(parser.endToken);
  const startTokenIds = parser.startToken ? encode(parser.startToken) : [];
  // read on the prompt's text: where the markers are not single tokens, their ids in the prompt depend on what follows
  // them (">\n" is one token in some vocabularies), the text does not
  const text = startTokenIds.length === 0 ? "" : tokenizer.decode(promptTokenIds, { skipSpecialTokens: false });
  const promptOpened = startTokenIds.length === 0 || text.lastIndexOf(parser.startToken!) > text.lastIndexOf(parser.endToken);
  return { ...sampling, thinkingBudget: { budgetTokens: budget, endTokenIds, ...(promptOpened ? {} : { startTokenIds }) } };
}
