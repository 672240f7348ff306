/**
 * llama.cpp's samplers (src/llama-sampler.cpp), each a pure function over the candidate list, written from their
 * definitions: penalties, top-n-sigma, top-k, typical, top-p, min-p, XTC, temperature with its dynamic range, the
 * final draw, and Mirostat 1 and 2. DRY lives in llama-dry.ts, the chain in llama-sampler-chain.ts. Randomness comes
 * only from the request's rng.
 */
import type { Rng } from "./rng.ts";

/** One candidate token (llama_token_data): its logit and, once a softmax ran, its probability. */
export interface Candidate {
  readonly id: number;
  logit: number;
  p: number;
}

/** The candidates (llama_token_data_array); `sorted` = by logit, best first. */
export interface Candidates {
  list: Candidate[];
  sorted: boolean;
}

/** Every token of a logits row as a candidate, in id order. */
export function candidatesOf(logits: Float32Array): Candidates {
  const list: Candidate[] = new Array(logits.length);
  for (let i = 0; i < logits.length; i++) list[i] = { id: i, logit: logits[i]!, p: 0 };
  return { list, sorted: false };
}

/** best logit first; lower id first among equals (a fixed tie-break where llama.cpp's sort is unstable) */
function sortByLogit(c: Candidates): void {
  if (c.sorted) return;
  c.list.sort((a, b) => b.logit - a.logit || a.id - b.id);
  c.sorted = true;
}

/** llama_sampler_softmax_impl: probabilities from logits, sorted first when asked */
export function softmax(c: Candidates, sort: boolean): void {
  if (sort) sortByLogit(c);
  let max = -Infinity;
  for (const t of c.list) if (t.logit > max) max = t.logit;
  let sum = 0;
  for (const t of c.list) { t.p = Math.exp(t.logit - max); sum += t.p; }
  for (const t of c.list) t.p /= sum;
}

/**
 * llama.cpp's penalties sampler: each token seen in `window` (the last repeat_last_n tokens of prompt and output) has
 * its logit divided by `repeat` when positive, multiplied when not, then loses count x `frequency` + `presence`.
 */
export function applyPenalties(c: Candidates, window: readonly number[], repeat: number, frequency: number, presence: number): void {
  if (window.length === 0 || (repeat === 1 && frequency === 0 && presence === 0)) return;
  const counts = new Map<number, number>();
  for (const id of window) counts.set(id, (counts.get(id) ?? 0) + 1);
  for (const t of c.list) {
    const count = counts.get(t.id);
    if (count === undefined) continue;
    t.logit = t.logit <= 0 ? t.logit * repeat : t.logit / repeat;
    t.logit -= count * frequency + presence;
  }
  c.sorted = false;
}

/** top-n-sigma: logits below max - n x (their standard deviation) become -inf (-inf logits are left out of both). */
export function applyTopNSigma(c: Candidates, n: number): void {
  if (n <= 0 || c.list.length <= 1) return;
  let max = -Infinity;
  let sum = 0;
  let count = 0;
  for (const t of c.list) {
    if (t.logit === -Infinity) continue;
    max = Math.max(max, t.logit);
    sum += t.logit;
    count++;
  }
  const mean = count > 0 ? sum / count : 0;
  let acc = 0;
  for (const t of c.list) if (t.logit !== -Infinity) acc += (t.logit - mean) ** 2;
  const std = count > 0 ? Math.sqrt(acc / count) : 0;
  for (const t of c.list) if (t.logit < max - n * std) t.logit = -Infinity;
}

/** top-k: the k best logits (k <= 0: all). */
export function applyTopK(c: Candidates, k: number): void {
  if (k <= 0) return;
  sortByLogit(c);
  c.list.length = Math.min(k, c.list.length);
}

/**
 * Locally typical sampling: tokens ordered by how far their surprise (-ln p) is from the entropy, kept until their
 * mass passes p (and at least minKeep of them); the list is left in that order.
 */
export function applyTypical(c: Candidates, p: number, minKeep: number): void {
  if (p >= 1) return;
  softmax(c, true);
  let entropy = 0;
  for (const t of c.list) if (t.p > 0) entropy -= t.p * Math.log(t.p);
  const order = c.list.map((t) => ({ t, score: Math.abs(-Math.log(t.p) - entropy) }));
  order.sort((a, b) => a.score - b.score); // stable: sorted order among equal scores
  let cum = 0;
  let keep = order.length;
  for (let i = 0; i < order.length; i++) {
    cum += order[i]!.t.p;
    if (cum > p && (minKeep === 0 || i >= minKeep - 1)) { keep = i + 1; break; }
  }
  c.list = order.slice(0, keep).map((o) => o.t);
  c.sorted = false;
}

/** top-p (nucleus): the best tokens until their mass reaches p, at least minKeep. */
export function applyTopP(c: Candidates, p: number, minKeep: number): void {
  if (p >= 1) return;
  softmax(c, true);
  let cum = 0;
  for (let i = 0; i < c.list.length; i++) {
    cum += c.list[i]!.p;
    if (cum >= p && i + 1 >= minKeep) { c.list.length = i + 1; return; }
  }
}

/** min-p: tokens whose probability is at least p x the best one's (logit >= max + ln p), at least minKeep. */
export function applyMinP(c: Candidates, p: number, minKeep: number): void {
  if (p <= 0 || c.list.length === 0) return;
  let max = -Infinity;
  for (const t of c.list) max = Math.max(max, t.logit);
  const minLogit = max + Math.log(p);
  const kept = c.list.filter((t) => t.logit >= minLogit);
  if (kept.length > 0 && kept.length >= minKeep) { c.list = kept; return; }
  sortByLogit(c);
  let i = 1;
  while (i < c.list.length && (c.list[i]!.logit >= minLogit || i < minKeep)) i++;
  c.list.length = i;
}

/**
 * XTC (exclude top choices): with chance `probability` (one draw from the rng whenever XTC can act), every token at or
 * above `threshold` except the least likely of them is removed, unless that leaves fewer than minKeep.
 */
export function applyXtc(c: Candidates, probability: number, threshold: number, minKeep: number, rng: Rng): void {
  if (probability <= 0 || threshold > 0.5 || c.list.length < 2) return;
  if (rng.nextFloat() > probability) return;
  softmax(c, true);
  let posLast = 0;
  for (let i = 0; i < c.list.length && c.list[i]!.p >= threshold; i++) posLast = i;
  if (c.list.length - posLast >= minKeep && posLast > 0) c.list = c.list.slice(posLast);
}

/** llama_sampler_temp_impl: logits / temp; temp <= 0 keeps only the best logit (first in list order among equals). */
function scaleByTemperature(c: Candidates, temp: number): void {
  if (c.list.length === 0) return;
  if (temp <= 0) {
    let best = 0;
    for (let i = 1; i < c.list.length; i++) if (c.list[i]!.logit > c.list[best]!.logit) best = i;
    c.list.forEach((t, i) => { if (i !== best) t.logit = -Infinity; });
    return;
  }
  for (const t of c.list) t.logit /= temp;
}

/**
 * The temperature sampler (llama_sampler_temp_ext): with range > 0 the temperature is picked from
 * [temp - range, temp + range] by the normalized entropy of the candidates raised to `exponent`; returns it.
 */
export function applyTemperature(c: Candidates, temp: number, range: number, exponent: number): number {
  if (range <= 0) { scaleByTemperature(c, temp); return temp; }
  if (c.list.length <= 1) return temp;
  const minTemp = Math.max(0, temp - range);
  const maxTemp = temp + range;
  const maxEntropy = Math.log(c.list.length);
  softmax(c, true);
  let entropy = 0;
  for (const t of c.list) if (t.p > 0) entropy -= t.p * Math.log(t.p);
  const dynTemp = minTemp + (maxTemp - minTemp) * Math.pow(entropy / maxEntropy, exponent);
  scaleByTemperature(c, dynTemp);
  softmax(c, false);
  return dynTemp;
}

/**
 * The final draw (llama_sampler_dist): one uniform u, the first candidate (in list order) where the running mass
 * reaches u x total. Returns the candidate's index in the list.
 */
export function drawCandidate(c: Candidates, rng: Rng): number {
  softmax(c, false);
  const target = rng.nextFloat();
  let run = 0;
  for (let i = 0; i < c.list.length; i++) {
    run += c.list[i]!.p;
    if (run >= target && c.list[i]!.p > 0) return i;
  }
  let last = c.list.length - 1;
  while (last > 0 && c.list[last]!.p === 0) last--;
  return last;
}

/** A Mirostat draw: the token and the updated mu (mu starts at 2 x tau). */
export interface MirostatResult {
  readonly tokenId: number;
  readonly mu: number;
}

/**
 * Mirostat 1's cut (arXiv 2007.14966, llama_sampler_mirostat): estimates the Zipf exponent s from the `m` best tokens
 * and keeps the top k that target surprise mu needs for a vocabulary of `numVocab`; leaves probabilities normalized.
 */
export function truncateMirostat(c: Candidates, m: number, numVocab: number, mu: number): void {
  softmax(c, true);
  let sumTiBi = 0;
  let sumTiSq = 0;
  for (let i = 0; i < m - 1 && i < c.list.length - 1; i++) {
    const ti = Math.log((i + 2) / (i + 1));
    const bi = Math.log(c.list[i]!.p / c.list[i + 1]!.p);
    sumTiBi += ti * bi;
    sumTiSq += ti * ti;
  }
  const sHat = sumTiBi / sumTiSq;
  const epsilonHat = sHat - 1;
  const k = Math.pow((epsilonHat * Math.pow(2, mu)) / (1 - Math.pow(numVocab, -epsilonHat)), 1 / sHat);
  applyTopK(c, Math.max(Number.isFinite(k) ? Math.trunc(k) : 1, 1));
  softmax(c, true);
}

/** Mirostat 2's cut (llama_sampler_mirostat_v2): drops tokens whose surprise (-log2 p) is above mu, the best one stays. */
export function truncateMirostatV2(c: Candidates, mu: number): void {
  softmax(c, true);
  let keep = c.list.findIndex((t) => -Math.log2(t.p) > mu);
  if (keep < 0) keep = c.list.length;
  c.list.length = Math.max(keep, 1);
  softmax(c, true);
}

/** Both Mirostats after their cut: draw, then move mu by eta x (tau - the drawn token's surprise). */
export function drawMirostat(c: Candidates, tau: number, eta: number, mu: number, rng: Rng): MirostatResult {
  const at = drawCandidate(c, rng);
  const surprise = -Math.log2(c.list[at]!.p);
  return { tokenId: c.list[at]!.id, mu: mu - eta * (surprise - tau) };
}
