import type { GrammarSpec } from "../grammar/grammar-spec.ts";

/**
 * Every sampling parameter of the OpenAI and vLLM APIs, camelCase inside fennec (the server maps snake_case wire
 * names to this). Defaults and validation follow vLLM's SamplingParams (vllm/sampling_params.py, _verify_args).
 */
export interface SamplingParams {
  readonly n: number;
  /** 0 = greedy */
  readonly temperature: number;
  readonly topP: number;
  /** 0 or -1 = off */
  readonly topK: number;
  readonly minP: number;
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
  readonly repetitionPenalty: number;
  /** token id -> bias added to the logit */
  readonly logitBias: Readonly<Record<number, number>> | null;
  /** per-request reproducible randomness; null = from the engine's generator */
  readonly seed: number | null;
  /** number of top logprobs per generated token (0 = only the sampled token's), null = none */
  readonly logprobs: number | null;
  /** number of top logprobs per prompt token, null = none */
  readonly promptLogprobs: number | null;
  readonly stop: readonly string[];
  readonly stopTokenIds: readonly number[];
  readonly includeStopStrInOutput: boolean;
  readonly ignoreEos: boolean;
  readonly minTokens: number;
  /** null = up to the context length */
  readonly maxTokens: number | null;
  readonly skipSpecialTokens: boolean;
  /** the grammar every sampled token must follow (vLLM SamplingParams.structured_outputs), null = free text */
  readonly structuredOutputs: GrammarSpec | null;
  /** only these token ids may be sampled (vLLM allowed_token_ids), null = any */
  readonly allowedTokenIds: readonly number[] | null;
  /** token sequences that may not be completed (vLLM bad_words, tokenized on the main thread) */
  readonly badWordsTokenIds: readonly (readonly number[])[];
  /** vLLM priority (request-level there): lower runs first under --scheduling-policy priority */
  readonly priority: number;
  /** vLLM cache_salt (request-level there): prefix-cache blocks are shared only between requests with the same salt */
  readonly cacheSalt: string | null;
  /**
   * vLLM kv_transfer_params (SamplingParams.extra_args there): the per-request protocol of the KV connector between
   * instances, read by the engine's connector (engine/kv-connector/peer-connector.ts); null = none
   */
  readonly kvTransferParams?: Readonly<Record<string, unknown>> | null;
}

export const DEFAULT_SAMPLING_PARAMS: SamplingParams = {
  n: 1, temperature: 1, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1,
  logitBias: null, seed: null, logprobs: null, promptLogprobs: null, stop: [], stopTokenIds: [],
  includeStopStrInOutput: false, ignoreEos: false, minTokens: 0, maxTokens: 16, skipSpecialTokens: true,
  structuredOutputs: null, allowedTokenIds: null, badWordsTokenIds: [], priority: 0, cacheSalt: null,
};

/** camelCase field -> the OpenAI / vLLM wire name that error messages and `param` use */
export const SAMPLING_WIRE_NAMES: Readonly<Record<keyof SamplingParams, string>> = {
  n: "n", temperature: "temperature", topP: "top_p", topK: "top_k", minP: "min_p", presencePenalty: "presence_penalty",
  frequencyPenalty: "frequency_penalty", repetitionPenalty: "repetition_penalty", logitBias: "logit_bias", seed: "seed",
  logprobs: "logprobs", promptLogprobs: "prompt_logprobs", stop: "stop", stopTokenIds: "stop_token_ids",
  includeStopStrInOutput: "include_stop_str_in_output", ignoreEos: "ignore_eos", minTokens: "min_tokens",
  maxTokens: "max_tokens", skipSpecialTokens: "skip_special_tokens", structuredOutputs: "structured_outputs",
  allowedTokenIds: "allowed_token_ids", badWordsTokenIds: "bad_words", priority: "priority", cacheSalt: "cache_salt",
  kvTransferParams: "kv_transfer_params",
};

/** vLLM's default --max-logprobs */
export const MAX_LOGPROBS = 20;
/** vLLM's VLLM_MAX_NUM_BAD_WORDS default */
export const MAX_BAD_WORDS = 128;
/** vLLM's VLLM_MAX_N_SEQUENCES default */
export const MAX_N = 16384;

export interface SamplingParamsError {
  /** wire name of the offending field, e.g. "top_p" */
  readonly param: string;
  readonly value: unknown;
  /** one line in vLLM's words, e.g. "top_p must be in (0, 1], got 2." */
  readonly message: string;
}

export interface SamplingLimits {
  readonly maxLogprobs?: number;
  /** token ids (logit_bias keys, stop_token_ids) must be below this */
  readonly vocabSize?: number;
}

/** vLLM prints floats with a trailing ".0" for whole numbers */
const show = (v: number): string => (Number.isInteger(v) ? `${v}.0` : String(v));

/**
 * Checks ranges and combinations as vLLM's SamplingParams._verify_args does; null when valid.
 * @example const e = validateSamplingParams({ ...DEFAULT_SAMPLING_PARAMS, topP: 2 }); // e.message: "top_p must be in (0, 1], got 2.0."
 */
export function validateSamplingParams(p: SamplingParams, limits: SamplingLimits = {}): SamplingParamsError | null {
  const fail = (field: keyof SamplingParams, message: string): SamplingParamsError => ({ param: SAMPLING_WIRE_NAMES[field], value: p[field], message });
  const finite = (v: number): boolean => Number.isFinite(v);
  const maxLogprobs = limits.maxLogprobs ?? MAX_LOGPROBS;
  if (!Number.isInteger(p.n) || p.n < 1) return fail("n", `n must be at least 1, got ${p.n}.`);
  if (p.n > MAX_N) return fail("n", `n must be at most ${MAX_N}, got ${p.n}.`);
  if (!finite(p.temperature) || p.temperature < 0 || p.temperature > 2) return fail("temperature", `temperature must be in [0, 2], got ${show(p.temperature)}.`);
  if (p.n > 1 && p.temperature < 1e-5) return fail("n", `n must be 1 when using greedy sampling, got ${p.n}.`);
  if (!finite(p.topP) || p.topP <= 0 || p.topP > 1) return fail("topP", `top_p must be in (0, 1], got ${show(p.topP)}.`);
  if (!Number.isInteger(p.topK) || p.topK < -1) return fail("topK", `top_k must be 0 (disable), -1 (disable), or at least 1, got ${p.topK}.`);
  if (!finite(p.minP) || p.minP < 0 || p.minP > 1) return fail("minP", `min_p must be in [0, 1], got ${show(p.minP)}.`);
  if (!finite(p.presencePenalty) || p.presencePenalty < -2 || p.presencePenalty > 2) return fail("presencePenalty", `presence_penalty must be in [-2, 2], got ${show(p.presencePenalty)}.`);
  if (!finite(p.frequencyPenalty) || p.frequencyPenalty < -2 || p.frequencyPenalty > 2) return fail("frequencyPenalty", `frequency_penalty must be in [-2, 2], got ${show(p.frequencyPenalty)}.`);
  if (!finite(p.repetitionPenalty) || p.repetitionPenalty <= 0) return fail("repetitionPenalty", `repetition_penalty must be greater than zero, got ${show(p.repetitionPenalty)}.`);
  if (p.logitBias) {
    for (const [key, bias] of Object.entries(p.logitBias)) {
      const id = Number(key);
      if (!Number.isInteger(id) || id < 0 || (limits.vocabSize !== undefined && id >= limits.vocabSize)) return fail("logitBias", `logit_bias has token id ${key} out of vocabulary range [0, ${limits.vocabSize ?? "vocab"}).`);
      if (!finite(bias)) return fail("logitBias", `logit_bias for token ${key} must be a finite number, got ${bias}.`);
    }
  }
  if (p.seed !== null && !Number.isSafeInteger(p.seed)) return fail("seed", `seed must be an integer, got ${p.seed}.`);
  if (p.maxTokens !== null && (!Number.isInteger(p.maxTokens) || p.maxTokens < 1)) return fail("maxTokens", `max_tokens must be at least 1, got ${p.maxTokens}.`);
  if (!Number.isInteger(p.minTokens) || p.minTokens < 0) return fail("minTokens", `min_tokens must be greater than or equal to 0, got ${p.minTokens}.`);
  if (p.maxTokens !== null && p.minTokens > p.maxTokens) return fail("minTokens", `min_tokens must be less than or equal to max_tokens=${p.maxTokens}, got ${p.minTokens}.`);
  for (const which of ["logprobs", "promptLogprobs"] as const) {
    const v = p[which];
    if (v === null) continue;
    if (!Number.isInteger(v) || v < 0) return fail(which, `${SAMPLING_WIRE_NAMES[which]} must be non-negative, got ${v}.`);
    if (v > maxLogprobs) return fail(which, `Requested ${which === "logprobs" ? "sample" : "prompt"} logprobs of ${v}, which is greater than max allowed: ${maxLogprobs}`);
  }
  if (p.stop.some((s) => s === "")) return fail("stop", "stop cannot contain an empty string.");
  if (p.allowedTokenIds !== null) {
    if (p.allowedTokenIds.length === 0) return fail("allowedTokenIds", "allowed_token_ids is not None and empty!");
    if (p.allowedTokenIds.some((id) => !Number.isInteger(id) || id < 0 || (limits.vocabSize !== undefined && id >= limits.vocabSize))) return fail("allowedTokenIds", "allowed_token_ids contains out-of-vocab token id!");
  }
  if (p.badWordsTokenIds.length > MAX_BAD_WORDS) return fail("badWordsTokenIds", `Too many bad words after tokenization: ${p.badWordsTokenIds.length}. The max number is ${MAX_BAD_WORDS}.`);
  if (!Number.isInteger(p.priority)) return fail("priority", `priority must be an integer, got ${p.priority}.`);
  if (p.cacheSalt !== null && p.cacheSalt === "") return fail("cacheSalt", "Parameter 'cache_salt' must be a non-empty string if provided.");
  for (const id of p.stopTokenIds) {
    if (!Number.isInteger(id) || id < 0 || (limits.vocabSize !== undefined && id >= limits.vocabSize)) return fail("stopTokenIds", `stop_token_ids contains ${id}, which is not a token id of this model.`);
  }
  return null;
}
