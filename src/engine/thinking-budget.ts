/**
 * A reasoning budget inside the engine (vLLM's thinking_token_budget: vllm/v1/sample/logits_processor/builtin.py
 * ThinkingTokenBudgetLogitsProcessor; llama.cpp's reasoning budget in common/chat.cpp): once the output holds
 * `budget` tokens and no reasoning end, the end token ids are forced one per step, so the reasoning closes and the
 * answer follows in the same request (one engine request: one count in /metrics). Stateless: the state is read from
 * the output tokens each step, so speculative decoding's per-position contexts need no bookkeeping.
 * @example const forced = forcedReasoningEnd(params.thinkingBudget, allTokenIds, numPromptTokens); // id or null
 */

/** How many output tokens the reasoning may take, and the tokens that close it (the reasoning parser's end). */
export interface ThinkingBudget {
  /** tokens allowed before the end is forced (counted from the output's start, as max_tokens is, or from startTokenIds) */
  readonly budgetTokens: number;
  /** [numEndTokens] the reasoning end, tokenized (e.g. Qwen3's one `</think>` token) */
  readonly endTokenIds: readonly number[];
  /**
   * [numStartTokens] the reasoning start, tokenized, when the prompt has not opened the reasoning: the count starts
   * after the output's first start, and nothing is forced before one (vLLM's in_think state); absent: from the output's
   * start (a prompt that opened the reasoning, or Anthropic's budget_tokens)
   */
  readonly startTokenIds?: readonly number[] | null;
}

/** where `all[from..]` first holds `seq`, or -1 */
function indexOf(all: readonly number[], from: number, seq: readonly number[]): number {
  outer: for (let i = from; i + seq.length <= all.length; i++) {
    for (let j = 0; j < seq.length; j++) if (all[i + j] !== seq[j]) continue outer;
    return i;
  }
  return -1;
}

/** true when `all[from..]` holds `seq` */
function contains(all: readonly number[], from: number, seq: readonly number[]): boolean {
  return indexOf(all, from, seq) >= 0;
}

/** The longest start of `seq` the output ends with (a forced end under way), at most seq.length - 1. */
function partialEnd(all: readonly number[], from: number, seq: readonly number[]): number {
  for (let k = Math.min(seq.length - 1, all.length - from); k > 0; k--) {
    let match = true;
    for (let j = 0; j < k && match; j++) match = all[all.length - k + j] === seq[j];
    if (match) return k;
  }
  return 0;
}

/** The token id the next step must sample, or null when the budget does not constrain it. */
export function forcedReasoningEnd(budget: ThinkingBudget | null | undefined, all: readonly number[], numPromptTokens: number): number | null {
  if (!budget || budget.endTokenIds.length === 0) return null;
  let from = numPromptTokens;
  const start = budget.startTokenIds;
  if (start && start.length > 0) {
    // vLLM counts the tokens inside the reasoning: none is forced until the model opened it
    const at = indexOf(all, numPromptTokens, start);
    if (at < 0) return null;
    from = at + start.length;
  }
  if (all.length - from < budget.budgetTokens) return null;
  if (contains(all, from, budget.endTokenIds)) return null;
  const k = partialEnd(all, from, budget.endTokenIds);
  // a partial end written before the budget ran out was the model's own: forcing continues it either way
  return budget.endTokenIds[k]!;
}

/** Forces `tokenId`: every other logit becomes -inf (in place). */
export function forceToken(logits: Float32Array, tokenId: number): void {
  if (tokenId >= logits.length) return;
  const keep = logits[tokenId]!;
  logits.fill(-Infinity);
  // a forced token keeps a finite logit whatever the model gave it, so every sampler path picks it
  logits[tokenId] = Number.isFinite(keep) ? keep : 0;
}
