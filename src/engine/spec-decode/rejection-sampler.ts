/**
 * Verifies one request's drafted tokens against the target model's logits at every drafted position plus the bonus
 * position (vLLM vllm/v1/sample/rejection_sampler.py, the algorithm of arXiv 2211.17192), so the emitted tokens are
 * distributed exactly as without speculation:
 * - greedy (temperature < 1e-5): emit the target's argmax at each position; stop after the first that differs from
 *   the draft; all k matched -> the bonus token from the last row;
 * - random: p = the target distribution with every sampling parameter applied (Sampler.targetProbs). The drafters
 *   here give no draft probabilities, so q is one-hot at the draft (vLLM's ngram / greedy-draft case): accept with
 *   probability min(1, p/q) = p(draft); on rejection emit a token from normalize(max(p - q, 0)) = p with the draft
 *   zeroed, and stop.
 * Tokens are handed to `push` one by one, in order, and each is part of the context of the next position (penalties,
 * min_tokens see it), as vLLM extends the output history by the preceding drafts. `push` returns true when the
 * request stopped (EOS, stop token, max_tokens): nothing after it is emitted. Structured outputs: position i's grammar
 * bitmask masks the target's row i, so p(draft) and the replacement are the grammar-constrained distribution.
 */
import type { PositionLogprobs } from "../protocol.ts";
import { drawFrom, GREEDY_TEMPERATURE, positionLogprobs, type Sampler, type SamplingContext } from "../sampler.ts";
import type { Rng } from "../rng.ts";

/** How a random request's draft is accepted or replaced: the standard rule, or a deliberately wrong one in tests. */
export interface RejectionRule {
  /** u ~ U[0, 1), pDraft = p(draft): accept? */
  accept(pDraft: number, u: number): boolean;
  /** the replacement token after a rejection; `probs` [vocabSize] normalized p, may be modified */
  recover(probs: Float64Array, draftId: number, rng: Rng): number;
}

/** vLLM's rule with one-hot q: accept with probability p(draft), else draw from p without the draft, renormalized. */
export const STANDARD_REJECTION: RejectionRule = {
  accept: (pDraft, u) => u < pDraft,
  recover(probs, draftId, rng) {
    probs[draftId] = 0;
    let mass = 0;
    for (let i = 0; i < probs.length; i++) mass += probs[i]!;
    return drawFrom(probs, mass, rng);
  },
};

export interface VerifyOptions {
  /** the acceptance rule for random requests (tests pass a wrong one) */
  readonly rule?: RejectionRule;
  /**
   * structured outputs: [numDrafts + 1] the grammar's bitmask at each position (undefined: none there), applied to
   * the target's row at that position before anything else, as without speculation (vLLM grammar_bitmask per draft)
   */
  readonly bitmasks?: readonly (Int32Array | undefined)[];
}

export interface VerifyResult {
  /**
   * drafts accepted (the bonus / recovered token is not counted, as vLLM counts); a stop inside the run does not end
   * the count (vLLM Scheduler.update_from_output counts the sampler's output before check_stop truncates it)
   */
  readonly numAccepted: number;
  /** accepted drafts that were emitted (positions whose KV is now the request's) */
  readonly numEmitted: number;
}

/**
 * Runs verification for one request. rows: [numDrafts + 1] logits rows, row i is the target's prediction for the
 * token after the i-th scheduled token (row 0 follows the last sampled token).
 * @example verifyDrafts(rows, [5, 9], ctx, sampler, (id) => { req.appendOutput(id); return false; });
 */
export function verifyDrafts(
  rows: readonly Float32Array[], draftTokenIds: readonly number[], ctx: SamplingContext, sampler: Sampler,
  push: (tokenId: number, logprobs: PositionLogprobs | undefined) => boolean, options: VerifyOptions = {},
): VerifyResult {
  const rule = options.rule ?? STANDARD_REJECTION;
  const p = ctx.params;
  const greedy = p.temperature < GREEDY_TEMPERATURE;
  const at = (i: number): SamplingContext => {
    const tokenBitmask = options.bitmasks?.[i];
    return tokenBitmask ? { ...ctx, tokenBitmask } : ctx;
  };
  for (let i = 0; i < draftTokenIds.length; i++) {
    const draft = draftTokenIds[i]!;
    const ctxAt = at(i);
    let tokenId: number;
    let logprobs: PositionLogprobs | undefined;
    if (greedy) {
      ({ tokenId, logprobs } = sampler.sample(rows[i]!, ctxAt));
    } else {
      const probs = sampler.targetProbs(rows[i]!, ctxAt);
      tokenId = rule.accept(probs[draft]!, ctx.rng.nextFloat()) ? draft : rule.recover(probs, draft, ctx.rng);
      if (p.logprobs !== null) logprobs = positionLogprobs(sampler.maskedRow(rows[i]!, ctxAt), tokenId, p.logprobs);
    }
    const accepted = tokenId === draft;
    if (push(tokenId, logprobs)) {
      if (!accepted) return { numAccepted: i, numEmitted: i };
      return { numAccepted: i + 1 + countPastStop(rows, draftTokenIds, i + 1, ctx, sampler, rule, options.bitmasks), numEmitted: i + 1 };
    }
    if (!accepted) return { numAccepted: i, numEmitted: i };
  }
  const bonus = sampler.sample(rows[draftTokenIds.length]!, at(draftTokenIds.length));
  push(bonus.tokenId, bonus.logprobs);
  return { numAccepted: draftTokenIds.length, numEmitted: draftTokenIds.length };
}

/**
 * How many drafts from `from` on the sampler would still accept after the request stopped at `from - 1`: nothing more
 * is emitted, so the context grows on a copy (penalties, min_tokens and bad words see the drafts as in vLLM's batch).
 */
function countPastStop(
  rows: readonly Float32Array[], draftTokenIds: readonly number[], from: number, ctx: SamplingContext, sampler: Sampler,
  rule: RejectionRule, bitmasks: readonly (Int32Array | undefined)[] | undefined,
): number {
  if (from >= draftTokenIds.length) return 0;
  const allTokenIds = [...ctx.allTokenIds];
  const outputCounts = new Map(ctx.outputCounts);
  const greedy = ctx.params.temperature < GREEDY_TEMPERATURE;
  let n = 0;
  for (let j = from; j < draftTokenIds.length; j++) {
    const draft = draftTokenIds[j]!;
    const tokenBitmask = bitmasks?.[j];
    const at: SamplingContext = { ...ctx, allTokenIds, outputCounts, ...(tokenBitmask ? { tokenBitmask } : {}) };
    const accepted = greedy ? sampler.sample(rows[j]!, at).tokenId === draft : rule.accept(sampler.targetProbs(rows[j]!, at)[draft]!, ctx.rng.nextFloat());
    if (!accepted) break;
    n++;
    allTokenIds.push(draft);
    outputCounts.set(draft, (outputCounts.get(draft) ?? 0) + 1);
  }
  return n;
}
