/**
 * Turns one logits row into the next token, in vLLM V1's order: a structured-output grammar's token bitmask first
 * (vLLM applies it to the logits in the model runner, before the sampler sees them, so logprobs see it too); logprobs
 * from those logits; then allowed_token_ids, bad_words, min_tokens (stop tokens masked), logit_bias, repetition /
 * frequency / presence penalties; greedy = argmax (lowest id wins a tie); otherwise temperature, min_p, top_k, top_p
 * and a draw from the request's own generator. A request with llama.cpp's sampler fields (params.llama) leaves the
 * penalties and everything after logit_bias to llama.cpp's chain instead (llama-sampler-chain.ts).
 */
import type { PositionLogprobs, TokenLogprob } from "./protocol.ts";
import type { BannedText, SamplingParams } from "./sampling-params.ts";
import type { Rng } from "./rng.ts";
import { llamaChainProbs, sampleLlamaChain, type LlamaChainInput, type LlamaChainState } from "./llama-sampler-chain.ts";
import { forcedReasoningEnd, forceToken } from "./thinking-budget.ts";

/** vLLM treats temperatures below this as greedy */
export const GREEDY_TEMPERATURE = 1e-5;

export interface SamplingContext {
  readonly params: SamplingParams;
  /** [numTokens] prompt then output tokens (repetition penalty looks at both) */
  readonly allTokenIds: readonly number[];
  readonly numPromptTokens: number;
  /** output token id -> count */
  readonly outputCounts: ReadonlyMap<number, number>;
  /** eos ids and stop_token_ids: masked while fewer than min_tokens were generated */
  readonly stopTokenIds: readonly number[];
  readonly rng: Rng;
  /** [ceil(vocabSize / 32)] xgrammar's packed bitmask, bit set = allowed; absent = no grammar */
  readonly tokenBitmask?: Int32Array;
}

/**
 * Sets the logit of every token the bitmask forbids to -inf, in place (xgrammar apply_token_bitmask_inplace); ids past
 * the mask are forbidden too. Returns how many tokens stay allowed.
 * @example const n = applyTokenBitmask(logits, mask);
 */
export function applyTokenBitmask(logits: Float32Array, bitmask: Int32Array): number {
  let numAllowed = 0;
  for (let w = 0; w < bitmask.length; w++) {
    const word = bitmask[w]!;
    const base = w * 32;
    if (word === -1) { numAllowed += Math.min(32, Math.max(0, logits.length - base)); continue; }
    for (let b = 0; b < 32 && base + b < logits.length; b++) {
      if ((word >>> b) & 1) numAllowed++;
      else logits[base + b] = -Infinity;
    }
  }
  if (bitmask.length * 32 < logits.length) logits.fill(-Infinity, bitmask.length * 32);
  return numAllowed;
}

export interface SampleResult {
  readonly tokenId: number;
  readonly logprobs?: PositionLogprobs;
}

/** log-softmax of `logits` as float64 values: logprob(i) = logits[i] - logSumExp */
function logSumExp(logits: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max);
  return max + Math.log(sum);
}

/** The chosen token's logprob and rank plus the `numTop` best tokens (ties: lower id first), from raw logits. */
export function positionLogprobs(logits: Float32Array, chosenId: number, numTop: number): PositionLogprobs {
  const lse = logSumExp(logits);
  const chosenLogit = logits[chosenId]!;
  let rank = 1;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > chosenLogit) rank++;
  const top: TokenLogprob[] = [];
  if (numTop > 0) {
    const ids = topIds(logits, numTop);
    ids.forEach((id, r) => top.push({ tokenId: id, logprob: logits[id]! - lse, rank: r + 1 }));
  }
  return { chosen: { tokenId: chosenId, logprob: chosenLogit - lse, rank }, top };
}

/** the k largest entries' ids, best first, lower id first among equals */
function topIds(values: Float32Array, k: number): number[] {
  const ids: number[] = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (ids.length === k && v <= values[ids[k - 1]!]!) continue;
    let at = ids.length;
    while (at > 0 && values[ids[at - 1]!]! < v) at--;
    ids.splice(at, 0, i);
    if (ids.length > k) ids.pop();
  }
  return ids;
}

function hasFinite(values: Float32Array): boolean {
  for (let i = 0; i < values.length; i++) if (values[i]! > -Infinity) return true;
  return false;
}

function argmax(values: Float32Array): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

/**
 * vLLM's bad_words (sampler.py apply_bad_words): the last token of a banned sequence is forbidden when the tokens
 * before it were just generated (a one-token word is always forbidden).
 */
function applyBadWords(logits: Float32Array, ctx: SamplingContext): void {
  const outputStart = ctx.numPromptTokens;
  const all = ctx.allTokenIds;
  for (const word of ctx.params.badWordsTokenIds) {
    const prefixLen = word.length - 1;
    if (prefixLen > all.length - outputStart) continue;
    let matches = true;
    for (let i = 0; i < prefixLen && matches; i++) matches = all[all.length - prefixLen + i] === word[i];
    const last = word[prefixLen]!;
    if (matches && last < logits.length) logits[last] = -Infinity;
  }
}

/** A BannedText's tables as lookups, built once per request's params. */
interface BannedTextLookup {
  /** token -> states a match enters in it */
  readonly entering: Map<number, number[]>;
  /** token -> [from, to] */
  readonly advancing: Map<number, [number, number][]>;
  /** state -> tokens that complete the text from it */
  readonly completing: Map<number, number[]>;
}

const bannedTextLookups = new WeakMap<BannedText, BannedTextLookup>();

function lookupOf(ban: BannedText): BannedTextLookup {
  let lookup = bannedTextLookups.get(ban);
  if (lookup) return lookup;
  const push = <K, V>(map: Map<K, V[]>, key: K, value: V): void => { const list = map.get(key); if (list) list.push(value); else map.set(key, [value]); };
  lookup = { entering: new Map(), advancing: new Map(), completing: new Map() };
  for (const [id, state] of ban.entering) push(lookup.entering, id, state);
  for (const [id, from, to] of ban.advancing) push(lookup.advancing, id, [from, to]);
  for (const [id, from] of ban.completing) push(lookup.completing, from, id);
  bannedTextLookups.set(ban, lookup);
  return lookup;
}

/**
 * Forbids every token that would complete a banned text after the output so far, whatever tokens spelled its start:
 * the partial matches at the output's end are found from its last numChars - 1 tokens (a match of j characters
 * began at most j tokens back, each token adding at least one character).
 */
function applyBannedTexts(logits: Float32Array, bans: readonly BannedText[], all: readonly number[], outputStart: number): void {
  for (const ban of bans) {
    const lookup = lookupOf(ban);
    let states = new Set<number>();
    for (let i = Math.max(outputStart, all.length - (ban.numChars - 1)); i < all.length; i++) {
      const id = all[i]!;
      const next = new Set(lookup.entering.get(id));
      for (const [from, to] of lookup.advancing.get(id) ?? []) if (states.has(from)) next.add(to);
      states = next;
    }
    for (const id of ban.containing) if (id < logits.length) logits[id] = -Infinity;
    for (const state of states) for (const id of lookup.completing.get(state) ?? []) if (id < logits.length) logits[id] = -Infinity;
  }
}

/** allowed_token_ids, bad_words, min_tokens, logit_bias and the penalties, in place on a copy of the logits. */
function applyLogitsProcessors(logits: Float32Array, ctx: SamplingContext, allowed: Uint8Array): void {
  const p = ctx.params;
  const numOutput = ctx.allTokenIds.length - ctx.numPromptTokens;
  if (p.allowedTokenIds !== null) {
    allowed.fill(0);
    for (const id of p.allowedTokenIds) if (id < logits.length) allowed[id] = 1;
    for (let i = 0; i < logits.length; i++) if (!allowed[i]) logits[i] = -Infinity;
  }
  if (p.badWordsTokenIds.length > 0) applyBadWords(logits, ctx);
  if (p.badWordsTexts && p.badWordsTexts.length > 0) applyBannedTexts(logits, p.badWordsTexts, ctx.allTokenIds, ctx.numPromptTokens);
  if (numOutput < p.minTokens) for (const id of ctx.stopTokenIds) if (id < logits.length) logits[id] = -Infinity;
  if (p.logitBias) {
    for (const [key, bias] of Object.entries(p.logitBias)) {
      const id = Number(key);
      if (id >= 0 && id < logits.length) logits[id]! += bias;
    }
  }
  if (p.llama) return; // the penalties run in llama.cpp's chain, over its window
  if (p.repetitionPenalty !== 1) {
    const seen = new Set(ctx.allTokenIds);
    for (const id of seen) {
      if (id >= logits.length) continue;
      const v = logits[id]!;
      logits[id] = v > 0 ? v / p.repetitionPenalty : v * p.repetitionPenalty;
    }
  }
  if (p.frequencyPenalty !== 0 || p.presencePenalty !== 0) {
    for (const [id, count] of ctx.outputCounts) {
      if (id >= logits.length) continue;
      logits[id]! -= p.frequencyPenalty * count + p.presencePenalty;
    }
  }
}

/**
 * Buckets of probabilities for selection without a full sort: 16 per octave, read off a float64's exponent and top 4
 * mantissa bits (no log per token). Only their order matters (a higher probability never lands in a later bucket);
 * the bucket the boundary falls in is sorted exactly.
 */
const BUCKETS_PER_OCTAVE = 16;
const NUM_BUCKETS = 64 * BUCKETS_PER_OCTAVE + 1;

/** Bucket of probability p (0 < p <= 1) from the high word of its float64 bits; p = 1 (the best token) is bucket 0. */
function bucketOf(high: number, p: number): number {
  if (p >= 1) return 0;
  const exponent = high >>> 20; // 1022 for [0.5, 1)
  const top4 = (high >>> 16) & 15;
  return Math.min(NUM_BUCKETS - 1, (1023 - exponent) * BUCKETS_PER_OCTAVE - 1 - top4);
}

/** Scratch for selecting the best tokens of a vocabulary. */
interface SelectScratch {
  /** [vocabSize] 1 where a token is kept */
  readonly keep: Uint8Array;
  /** [vocabSize] bucket of each token */
  readonly bucket: Uint16Array;
}

/**
 * Narrows `keep` to its best tokens (probability first, lower id first among equals) until `maxCount` tokens or
 * `massTarget` probability mass are reached: the same set a full sort would give, found with one bucketing pass
 * and a sort of the one bucket the boundary falls in. Returns the kept mass.
 * probs: [vocabSize] unnormalized, at most 1.
 */
function keepBest(probs: Float64Array, scratch: SelectScratch, maxCount: number, massTarget: number): number {
  const { keep, bucket } = scratch;
  const words = new Uint32Array(probs.buffer, probs.byteOffset, probs.length * 2); // [vocabSize, 2] little-endian
  const counts = new Float64Array(NUM_BUCKETS); // [NUM_BUCKETS]
  const masses = new Float64Array(NUM_BUCKETS); // [NUM_BUCKETS]
  for (let i = 0; i < probs.length; i++) {
    if (!keep[i]) continue;
    const p = probs[i]!;
    const b = bucketOf(words[2 * i + 1]!, p);
    bucket[i] = b;
    counts[b]! += 1;
    masses[b]! += p;
  }
  let count = 0;
  let mass = 0;
  let boundary = NUM_BUCKETS;
  for (let b = 0; b < NUM_BUCKETS; b++) {
    if (count + counts[b]! >= maxCount || mass + masses[b]! >= massTarget) { boundary = b; break; }
    count += counts[b]!;
    mass += masses[b]!;
  }
  const inBoundary: number[] = [];
  for (let i = 0; i < probs.length; i++) {
    if (!keep[i] || bucket[i]! < boundary) continue;
    if (bucket[i] === boundary) inBoundary.push(i);
    keep[i] = 0;
  }
  inBoundary.sort((a, b) => probs[b]! - probs[a]! || a - b);
  for (const id of inBoundary) {
    if (count >= maxCount || mass >= massTarget) break;
    keep[id] = 1;
    count++;
    mass += probs[id]!;
  }
  return mass;
}

/**
 * The distribution sampling draws from, after temperature, min_p, top_k and top_p (vLLM semantics): `probs` is filled
 * with unnormalized probabilities, 0 for every excluded token; returns their total mass.
 */
function randomProbs(logits: Float32Array, p: SamplingParams, probs: Float64Array, scratch: SelectScratch): number {
  const vocabSize = logits.length;
  const invTemp = 1 / p.temperature;
  let max = -Infinity;
  for (let i = 0; i < vocabSize; i++) if (logits[i]! > max) max = logits[i]!;
  // probs: [vocabSize] unnormalized probabilities (scratch, overwritten)
  let total = 0;
  for (let i = 0; i < vocabSize; i++) {
    const e = Math.exp((logits[i]! - max) * invTemp);
    probs[i] = e;
    total += e;
  }
  // min_p: drop tokens below min_p x the top probability (the top one has e = 1)
  if (p.minP > 0) {
    for (let i = 0; i < vocabSize; i++) if (probs[i]! < p.minP) { total -= probs[i]!; probs[i] = 0; }
  }
  const topK = p.topK > 0 ? Math.min(p.topK, vocabSize) : vocabSize;
  if (topK < vocabSize || p.topP < 1) {
    const keep = scratch.keep;
    for (let i = 0; i < vocabSize; i++) keep[i] = probs[i]! > 0 ? 1 : 0;
    // top_p applies to the renormalized mass top_k left
    let mass = topK < vocabSize ? keepBest(probs, scratch, topK, Infinity) : total;
    if (p.topP < 1) mass = keepBest(probs, scratch, Infinity, p.topP * mass);
    for (let i = 0; i < vocabSize; i++) if (!keep[i]) probs[i] = 0;
    return mass;
  }
  return total;
}

/**
 * One draw from unnormalized `probs` of total `mass` (0 = excluded), in id order; the last nonzero id if rounding
 * leaves some of u over.
 * @example const id = drawFrom(probs, mass, rng);
 */
export function drawFrom(probs: Float64Array, mass: number, rng: Rng): number {
  let u = rng.nextFloat() * mass;
  let last = 0;
  for (let i = 0; i < probs.length; i++) {
    if (probs[i] === 0) continue;
    last = i;
    u -= probs[i]!;
    if (u < 0) return i;
  }
  return last;
}

/** Samples from the processed logits with temperature, min_p, top_k and top_p (vLLM semantics). */
function sampleRandom(logits: Float32Array, p: SamplingParams, rng: Rng, probs: Float64Array, scratch: SelectScratch): number {
  return drawFrom(probs, randomProbs(logits, p, probs, scratch), rng);
}

/** true when some logits processor would change this row */
function needsProcessing(ctx: SamplingContext): boolean {
  const p = ctx.params;
  const numOutput = ctx.allTokenIds.length - ctx.numPromptTokens;
  const penalties = !p.llama && (p.repetitionPenalty !== 1 || (ctx.outputCounts.size > 0 && (p.frequencyPenalty !== 0 || p.presencePenalty !== 0)));
  return (numOutput < p.minTokens && ctx.stopTokenIds.length > 0) || p.logitBias !== null || penalties ||
    p.allowedTokenIds !== null || p.badWordsTokenIds.length > 0 || (p.badWordsTexts !== undefined && p.badWordsTexts.length > 0) ||
    forcedReasoningEnd(p.thinkingBudget, ctx.allTokenIds, ctx.numPromptTokens) !== null;
}

/**
 * Samples rows for one engine; keeps its scratch buffers between calls (one Sampler per engine, no per-token
 * allocation of vocabulary-sized arrays).
 * @example const sampler = new Sampler(); const { tokenId } = sampler.sample(row, ctx);
 */
export class Sampler {
  private masked = new Float32Array(0); // [vocabSize] logits after the grammar's bitmask
  private processed = new Float32Array(0); // [vocabSize] logits after the processors
  private probs = new Float64Array(0); // [vocabSize] unnormalized probabilities
  private select: SelectScratch = { keep: new Uint8Array(0), bucket: new Uint16Array(0) };
  /** llama.cpp's chain state (Mirostat's mu) per request, keyed by the request's own generator */
  private llamaStates = new WeakMap<Rng, LlamaChainState>();

  private llamaState(rng: Rng): LlamaChainState {
    let state = this.llamaStates.get(rng);
    if (!state) { state = { mu: null }; this.llamaStates.set(rng, state); }
    return state;
  }

  private llamaInput(logits: Float32Array, ctx: SamplingContext): LlamaChainInput {
    const p = ctx.params;
    const temperature = p.temperature < GREEDY_TEMPERATURE ? 0 : p.temperature;
    return { logits, params: p, llama: p.llama!, temperature, allTokenIds: ctx.allTokenIds, rng: ctx.rng };
  }

  /** row: the grammar-masked row (logprobs read it); logits: after the processors too */
  private processedLogits(row: Float32Array, ctx: SamplingContext): { row: Float32Array; logits: Float32Array } {
    if (this.processed.length !== row.length) {
      this.masked = new Float32Array(row.length);
      this.processed = new Float32Array(row.length);
      this.probs = new Float64Array(row.length);
      this.select = { keep: new Uint8Array(row.length), bucket: new Uint16Array(row.length) };
    }
    if (ctx.tokenBitmask) {
      this.masked.set(row);
      applyTokenBitmask(this.masked, ctx.tokenBitmask);
      row = this.masked;
    }
    let logits = row;
    if (needsProcessing(ctx)) {
      logits = this.processed;
      logits.set(row);
      applyLogitsProcessors(logits, ctx, this.select.keep);
      // the reasoning budget last: the end token wins over every other processor (vLLM forces it the same way)
      const forced = forcedReasoningEnd(ctx.params.thinkingBudget, ctx.allTokenIds, ctx.numPromptTokens);
      if (forced !== null) forceToken(logits, forced);
      // the grammar wins when the processors leave nothing it allows (min_tokens masking the only stop token)
      if (ctx.tokenBitmask && !hasFinite(logits)) logits = row;
    }
    return { row, logits };
  }

  /** The row logprobs are read from, as `sample` reads them: a grammar-masked copy, or `row` itself. */
  maskedRow(row: Float32Array, ctx: SamplingContext): Float32Array {
    if (!ctx.tokenBitmask) return row;
    const masked = row.slice(); // [vocabSize]
    applyTokenBitmask(masked, ctx.tokenBitmask);
    return masked;
  }

  /**
   * The normalized distribution a random (temperature > 0) request draws its next token from, every sampling
   * parameter (and the grammar's bitmask) applied exactly as `sample` applies it: the target p of speculative
   * decoding's rejection sampler. Returns a fresh [vocabSize] array.
   */
  targetProbs(row: Float32Array, ctx: SamplingContext): Float64Array {
    const { logits } = this.processedLogits(row, ctx);
    if (ctx.params.llama) return llamaChainProbs(this.llamaInput(logits, ctx), this.llamaState(ctx.rng));
    const mass = randomProbs(logits, ctx.params, this.probs, this.select);
    const probs = new Float64Array(row.length); // [vocabSize]
    for (let i = 0; i < row.length; i++) probs[i] = this.probs[i]! / mass;
    return probs;
  }

  /** Picks the next token for one sequence from its logits row (not modified). */
  sample(row: Float32Array, ctx: SamplingContext): SampleResult {
    const p = ctx.params;
    const processed = this.processedLogits(row, ctx);
    const logits = processed.logits;
    row = processed.row;
    const tokenId = p.llama ? sampleLlamaChain(this.llamaInput(logits, ctx), this.llamaState(ctx.rng))
      : p.temperature < GREEDY_TEMPERATURE ? argmax(logits) : sampleRandom(logits, p, ctx.rng, this.probs, this.select);
    if (p.logprobs === null) return { tokenId };
    return { tokenId, logprobs: positionLogprobs(row, tokenId, p.logprobs) };
  }
}

/** One-off sampling (tests, tools); engines keep a Sampler. */
export function sample(row: Float32Array, ctx: SamplingContext): SampleResult {
  return new Sampler().sample(row, ctx);
}
