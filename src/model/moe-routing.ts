/**
 * Mixture-of-experts routing, the same for the oracle and the batched forward: router logits -> the k experts of each
 * row and their weights, as llama.cpp's build_moe_ffn (llama-graph.cpp) computes them for softmax gating:
 * probs = softmax(logits) over every expert; the k largest probabilities in descending order (ggml_argsort_top_k;
 * ties: the lower id first); weights = those probabilities, divided by their sum clamped at 6.103515625e-5 when the
 * architecture renormalises (norm_w). gpt-oss (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT): the k largest logits,
 * then a softmax over those k. The experts' outputs are later added in this slot order.
 */
import type { MoeConfig } from "./model-config.ts";

/** The smallest normal f16, llama.cpp's clamp of the weights' sum before the renormalising division */
const MIN_WEIGHT_SUM = 6.103515625e-5;

export interface ExpertRouting {
  /** [numRows, k] the chosen experts of each row, best first */
  readonly ids: Int32Array;
  /** [numRows, k] their weights */
  readonly weights: Float32Array;
}

/**
 * Routes numRows rows of router logits [numRows, expertCount].
 * @example const { ids, weights } = routeExperts(logits, 1, config.moe!);
 */
export function routeExperts(logits: Float32Array, numRows: number, moe: MoeConfig): ExpertRouting {
  const { expertCount: n, expertUsedCount: k } = moe;
  const ids = new Int32Array(numRows * k);
  const weights = new Float32Array(numRows * k);
  const probs = new Float32Array(n); // [expertCount]
  const order = new Int32Array(k);
  for (let r = 0; r < numRows; r++) {
    if (moe.gating === "softmaxWeight") {
      for (let e = 0; e < n; e++) probs[e] = logits[r * n + e]!;
      topK(probs, k, order);
      let top = -Infinity;
      for (let s = 0; s < k; s++) top = Math.max(top, probs[order[s]!]!);
      let total = 0;
      for (let s = 0; s < k; s++) {
        ids[r * k + s] = order[s]!;
        weights[r * k + s] = Math.exp(probs[order[s]!]! - top);
        total += weights[r * k + s]!;
      }
      const inv = Math.fround(1 / total);
      for (let s = 0; s < k; s++) weights[r * k + s] = weights[r * k + s]! * inv;
      continue;
    }
    // ggml_soft_max: max-subtracted exponentials in f32, then scaled by 1 / sum
    let max = -Infinity;
    for (let e = 0; e < n; e++) max = Math.max(max, logits[r * n + e]!);
    let sum = 0;
    for (let e = 0; e < n; e++) {
      probs[e] = Math.exp(logits[r * n + e]! - max);
      sum += probs[e]!;
    }
    const inv = Math.fround(1 / sum);
    for (let e = 0; e < n; e++) probs[e] = probs[e]! * inv;
    topK(probs, k, order);
    let chosen = 0;
    for (let s = 0; s < k; s++) {
      ids[r * k + s] = order[s]!;
      weights[r * k + s] = probs[order[s]!]!;
      chosen += weights[r * k + s]!;
    }
    if (moe.normTopK) {
      const d = Math.fround(Math.max(chosen, MIN_WEIGHT_SUM));
      for (let s = 0; s < k; s++) weights[r * k + s] = weights[r * k + s]! / d;
    }
  }
  return { ids, weights };
}

/**
 * order[0..k) = the indices of the k largest values, largest first, ties to the lower index (a sort's first k by
 * descending value then ascending index): k scans of the row instead of sorting every expert (top-k is a small part
 * of a decode step's CPU time, a full sort was about 45 us a row of 128).
 */
function topK(values: Float32Array, k: number, order: Int32Array): void {
  for (let s = 0; s < k; s++) {
    let best = -1;
    for (let e = 0; e < values.length; e++) {
      if (best >= 0 && !(values[e]! > values[best]!)) continue;
      let taken = false;
      for (let t = 0; t < s; t++) if (order[t] === e) taken = true;
      if (!taken) best = e;
    }
    order[s] = best;
  }
}

/**
 * The routed rows grouped by expert, in token order within each expert (ggml_compute_forward_mul_mat_id's
 * matrix_rows: scanning tokens, then slots): each chosen expert's weights are then read once for all its rows.
 * @example for (const g of groupByExpert(ids, k, expertCount)) run(g.expert, g.rows, g.slots);
 */
export function groupByExpert(ids: Int32Array, k: number, expertCount: number): { expert: number; rows: Int32Array; slots: Int32Array }[] {
  const lists: number[][] = Array.from({ length: expertCount }, () => []);
  for (let i = 0; i < ids.length; i++) lists[ids[i]!]!.push(i);
  const groups: { expert: number; rows: Int32Array; slots: Int32Array }[] = [];
  lists.forEach((slots, expert) => {
    if (slots.length > 0) groups.push({ expert, rows: Int32Array.from(slots, (i) => Math.floor(i / k)), slots: Int32Array.from(slots) });
  });
  return groups;
}
