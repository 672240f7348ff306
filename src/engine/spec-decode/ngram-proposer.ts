/**
 * Prompt-lookup drafting (vLLM vllm/v1/spec_decode/ngram_proposer.py, NgramProposer): find the longest n-gram,
 * prompt_lookup_min <= n <= prompt_lookup_max, that ends the context and also occurs earlier in it (the earliest such
 * occurrence wins; earlier occurrences may overlap the suffix), and propose the tokens that followed it, at most k,
 * cut at the end of the context. No match: no draft.
 *
 *   context  1 2 3 4 2 3      min 2, max 3, k 4
 *   suffix [4 2 3] occurs nowhere earlier; [2 3] occurs at index 1  ->  draft 4 2 3
 *
 * vLLM runs a KMP pass over the reversed context; this walks every earlier position holding the last token and
 * extends the match backwards (at most max steps each): the same result, O(context x max) per request and step.
 */

/**
 * The draft for one request, or an empty array.
 * @example proposeNgram([1, 2, 3, 4, 2, 3], 2, 3, 4) // [4, 2, 3]
 */
export function proposeNgram(context: readonly number[], minN: number, maxN: number, k: number): number[] {
  const len = context.length;
  if (len < minN || k <= 0) return [];
  const last = context[len - 1]!;
  let bestLen = 0;
  let bestEnd = -1;
  // e: where an earlier occurrence ends (e < len - 1, so at least one token follows it)
  for (let e = 0; e < len - 1; e++) {
    if (context[e] !== last) continue;
    let n = 1;
    const limit = Math.min(maxN, e + 1);
    while (n < limit && context[e - n] === context[len - 1 - n]) n++;
    // strictly longer only: among equally long matches the earliest stays
    if (n > bestLen) {
      bestLen = n;
      bestEnd = e;
      if (n === maxN) break;
    }
  }
  if (bestLen < minN) return [];
  return context.slice(bestEnd + 1, Math.min(bestEnd + 1 + k, len));
}
