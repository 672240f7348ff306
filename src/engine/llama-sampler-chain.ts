/**
 * llama.cpp's sampler chain (common/sampling.cpp common_sampler_init), run when a request sets a llama.cpp sampler
 * field (SamplingParams.llama). The rule: vLLM's order stays the default, so a request without those fields samples
 * exactly as before; with them, the row (after allowed_token_ids, bad_words, min_tokens and logit_bias, which come
 * first in both) goes through llama.cpp's chain: the samplers of `samplers` in that order (default penalties, dry,
 * top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature), then a draw; or, with mirostat 1 or 2, only temperature
 * and Mirostat (llama.cpp leaves the other samplers out then). vLLM's repetition_penalty (llama.cpp's repeat_penalty),
 * frequency_penalty and presence_penalty become llama.cpp's penalties sampler over the last repeat_last_n tokens of
 * prompt and output. temperature below vLLM's greedy threshold counts as 0 (llama.cpp: keep only the best logit).
 */
import { applyDry } from "./llama-dry.ts";
import {
  applyMinP, applyPenalties, applyTemperature, applyTopK, applyTopNSigma, applyTopP, applyTypical, applyXtc, candidatesOf,
  drawCandidate, drawMirostat, softmax, truncateMirostat, truncateMirostatV2, type Candidates,
} from "./llama-samplers.ts";
import type { Rng } from "./rng.ts";
import type { LlamaSamplerName, LlamaSamplingParams, SamplingParams } from "./sampling-params.ts";

/** llama.cpp's Mirostat 1 estimates s from this many best tokens (common_sampler_init passes 100) */
const MIROSTAT_M = 100;

/** Per-request state the chain keeps between tokens: Mirostat's mu (null until the first Mirostat draw). */
export interface LlamaChainState {
  mu: number | null;
}

export interface LlamaChainInput {
  /** [vocabSize] the row after allowed_token_ids, bad_words, min_tokens and logit_bias */
  readonly logits: Float32Array;
  readonly params: SamplingParams;
  readonly llama: LlamaSamplingParams;
  /** the request's temperature, 0 when vLLM would be greedy (below sampler.ts GREEDY_TEMPERATURE) */
  readonly temperature: number;
  /** prompt then output tokens: penalties and DRY read their last tokens */
  readonly allTokenIds: readonly number[];
  readonly rng: Rng;
}

/** the last n tokens (n = -1: all, 0: none) */
function lastTokens(tokens: readonly number[], n: number): readonly number[] {
  if (n < 0) return tokens;
  return n === 0 ? [] : tokens.slice(Math.max(0, tokens.length - n));
}

/** One sampler of the chain, in place. */
function applySampler(name: LlamaSamplerName, c: Candidates, input: LlamaChainInput): void {
  const { params: p, llama: l } = input;
  switch (name) {
    case "penalties":
      applyPenalties(c, lastTokens(input.allTokenIds, l.repeatLastN), p.repetitionPenalty, p.frequencyPenalty, p.presencePenalty);
      return;
    case "dry":
      if (l.dryPenaltyLastN === 0) return;
      applyDry(c, lastTokens(input.allTokenIds, l.dryPenaltyLastN), { multiplier: l.dryMultiplier, base: l.dryBase, allowedLength: l.dryAllowedLength, breakers: l.drySequenceBreakers });
      return;
    case "top_n_sigma": applyTopNSigma(c, l.topNSigma); return;
    case "top_k": applyTopK(c, p.topK); return;
    case "typ_p": applyTypical(c, l.typicalP, l.minKeep); return;
    case "top_p": applyTopP(c, p.topP, l.minKeep); return;
    case "min_p": applyMinP(c, p.minP, l.minKeep); return;
    case "xtc": applyXtc(c, l.xtcProbability, l.xtcThreshold, l.minKeep, input.rng); return;
    case "temperature": applyTemperature(c, input.temperature, l.dynatempRange, l.dynatempExponent); return;
  }
}

/** The candidates the final draw sees (Mirostat: after its cut, for the state's mu). */
function chainCandidates(input: LlamaChainInput, state: LlamaChainState): Candidates {
  const c = candidatesOf(input.logits);
  const l = input.llama;
  if (l.mirostat === 0) {
    for (const name of l.samplers) applySampler(name, c, input);
    return c;
  }
  applyTemperature(c, input.temperature, 0, 1);
  const mu = state.mu ?? 2 * l.mirostatTau;
  if (l.mirostat === 1) truncateMirostat(c, MIROSTAT_M, input.logits.length, mu);
  else truncateMirostatV2(c, mu);
  return c;
}

/**
 * Runs the chain and draws the next token; Mirostat's mu in `state` moves on.
 * @example const state = { mu: null }; const id = sampleLlamaChain(input, state);
 */
export function sampleLlamaChain(input: LlamaChainInput, state: LlamaChainState): number {
  const c = chainCandidates(input, state);
  const l = input.llama;
  if (l.mirostat === 0) return c.list[drawCandidate(c, input.rng)]!.id;
  const { tokenId, mu } = drawMirostat(c, l.mirostatTau, l.mirostatEta, state.mu ?? 2 * l.mirostatTau, input.rng);
  state.mu = mu;
  return tokenId;
}

/**
 * The normalized distribution the chain draws from, as a fresh [vocabSize] array (speculative decoding's target p);
 * state is read, not moved (XTC still takes its draw from the rng, as it would before a draw).
 */
export function llamaChainProbs(input: LlamaChainInput, state: LlamaChainState): Float64Array {
  const c = chainCandidates(input, state);
  softmax(c, false);
  const probs = new Float64Array(input.logits.length); // [vocabSize]
  for (const t of c.list) probs[t.id] = t.p;
  return probs;
}
