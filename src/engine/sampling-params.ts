import type { GrammarSpec } from "../grammar/grammar-spec.ts";
import type { ThinkingBudget } from "./thinking-budget.ts";

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
  /**
   * the texts of those sequences, compiled to token tables (compileBannedText): no token may complete the text
   * however it is split into tokens; absent = only the token sequences are banned
   */
  readonly badWordsTexts?: readonly BannedText[];
  /** vLLM priority (request-level there): lower runs first under --scheduling-policy priority */
  readonly priority: number;
  /** vLLM cache_salt (request-level there): prefix-cache blocks are shared only between requests with the same salt */
  readonly cacheSalt: string | null;
  /**
   * vLLM kv_transfer_params (SamplingParams.extra_args there): the per-request protocol of the KV connector between
   * instances, read by the engine's connector (engine/kv-connector/peer-connector.ts); null = none
   */
  readonly kvTransferParams?: Readonly<Record<string, unknown>> | null;
  /**
   * llama.cpp's sampler fields (tools/server/server-schema.cpp); null or absent = vLLM's sampler. When set, the row
   * goes through llama.cpp's sampler chain (common/sampling.cpp) instead of vLLM's order: see llama-sampler-chain.ts.
   */
  readonly llama?: LlamaSamplingParams | null;
  /** vLLM thinking_token_budget: the reasoning end forced after this many output tokens (thinking-budget.ts); absent = none */
  readonly thinkingBudget?: ThinkingBudget | null;
}

/** llama.cpp's sampler names (common/sampling.cpp common_sampler_type_to_str) */
export type LlamaSamplerName = "penalties" | "dry" | "top_n_sigma" | "top_k" | "typ_p" | "top_p" | "min_p" | "xtc" | "temperature";

/**
 * A DRY sequence breaker as token ids (llama.cpp llama-sampler.cpp get_overlapping_token_sequences): a token whose
 * text ends with the breaker's first characters (`headTokenId`), then the tokens of the rest (`tailTokenIds`, empty
 * when the head token's text contains the whole breaker).
 */
export interface DryBreaker {
  readonly headTokenId: number;
  readonly tailTokenIds: readonly number[];
}

/**
 * llama.cpp's sampler parameters beyond vLLM's, camelCase (wire names in LLAMA_SAMPLING_WIRE_NAMES). llama.cpp's
 * repeat_penalty is vLLM's repetition_penalty (the same divide-if-positive, multiply-if-negative rule) and lands in
 * SamplingParams.repetitionPenalty; frequency_penalty and presence_penalty are shared too. Under this chain the three
 * look at the last `repeatLastN` tokens of prompt and output, as llama.cpp's penalties sampler does.
 */
export interface LlamaSamplingParams {
  /** tokens the penalties look back over; 0 = penalties off, -1 = the whole context */
  readonly repeatLastN: number;
  /** 1 = off */
  readonly typicalP: number;
  /** 0 = off, 1 = Mirostat, 2 = Mirostat 2.0 (then only logit bias, temperature and mirostat run) */
  readonly mirostat: 0 | 1 | 2;
  readonly mirostatTau: number;
  readonly mirostatEta: number;
  /** 0 = off */
  readonly dryMultiplier: number;
  readonly dryBase: number;
  readonly dryAllowedLength: number;
  /** tokens DRY scans; 0 = off, -1 = the whole context */
  readonly dryPenaltyLastN: number;
  /** tokenized on the main thread (drySequenceBreakerTokens) */
  readonly drySequenceBreakers: readonly DryBreaker[];
  /** 0 = off */
  readonly xtcProbability: number;
  /** above 0.5 = off */
  readonly xtcThreshold: number;
  /** below or at 0 = off */
  readonly topNSigma: number;
  /** 0 = off: temperature is then fixed */
  readonly dynatempRange: number;
  readonly dynatempExponent: number;
  /** samplers keep at least this many tokens (0 = no floor) */
  readonly minKeep: number;
  /** the chain's order; a sampler not named does not run, one named twice runs twice */
  readonly samplers: readonly LlamaSamplerName[];
}

/** llama.cpp's default chain (common/common.h common_params_sampling::samplers) */
export const LLAMA_DEFAULT_SAMPLERS: readonly LlamaSamplerName[] = ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"];

/** llama.cpp's default DRY sequence breakers, as text (common/common.h) */
export const LLAMA_DEFAULT_DRY_BREAKERS: readonly string[] = ["\n", ":", "\"", "*"];

/** llama.cpp's defaults (common/common.h common_params_sampling) for the fields beyond vLLM's */
export const DEFAULT_LLAMA_SAMPLING_PARAMS: LlamaSamplingParams = {
  repeatLastN: 64, typicalP: 1, mirostat: 0, mirostatTau: 5, mirostatEta: 0.1, dryMultiplier: 0, dryBase: 1.75,
  dryAllowedLength: 2, dryPenaltyLastN: 64, drySequenceBreakers: [], xtcProbability: 0, xtcThreshold: 0.1, topNSigma: -1,
  dynatempRange: 0, dynatempExponent: 1, minKeep: 0, samplers: LLAMA_DEFAULT_SAMPLERS,
};

/** camelCase field -> llama.cpp's wire name */
export const LLAMA_SAMPLING_WIRE_NAMES: Readonly<Record<keyof LlamaSamplingParams, string>> = {
  repeatLastN: "repeat_last_n", typicalP: "typical_p", mirostat: "mirostat", mirostatTau: "mirostat_tau",
  mirostatEta: "mirostat_eta", dryMultiplier: "dry_multiplier", dryBase: "dry_base", dryAllowedLength: "dry_allowed_length",
  dryPenaltyLastN: "dry_penalty_last_n", drySequenceBreakers: "dry_sequence_breakers", xtcProbability: "xtc_probability",
  xtcThreshold: "xtc_threshold", topNSigma: "top_n_sigma", dynatempRange: "dynatemp_range",
  dynatempExponent: "dynatemp_exponent", minKeep: "min_keep", samplers: "samplers",
};

/** llama.cpp's one-letter sampler codes (common/sampling.cpp common_sampler_type_to_chr) */
const LLAMA_SAMPLER_CHARS: Readonly<Record<string, LlamaSamplerName>> = {
  e: "penalties", d: "dry", s: "top_n_sigma", k: "top_k", y: "typ_p", p: "top_p", m: "min_p", x: "xtc", t: "temperature",
};

/** every spelling llama.cpp accepts for a sampler name (common_sampler_types_from_names): canonical, kebab, no dash, misc */
const LLAMA_SAMPLER_ALIASES: Readonly<Record<string, LlamaSamplerName>> = (() => {
  const out: Record<string, LlamaSamplerName> = { nucleus: "top_p", temp: "temperature", typ: "typ_p" };
  for (const name of LLAMA_DEFAULT_SAMPLERS) {
    out[name] = name;
    out[name.replaceAll("_", "-")] = name;
    out[name.replaceAll("_", "")] = name;
  }
  return out;
})();

/**
 * The `samplers` field: an array of names (any case, llama.cpp's aliases) or a string of one-letter codes. llama.cpp
 * skips an unknown name with a warning; here it is an error, since a sampler silently left out changes the output.
 * @example parseLlamaSamplers("kt"); // ["top_k", "temperature"]
 */
export function parseLlamaSamplers(value: string | readonly string[]): LlamaSamplerName[] | { readonly error: string } {
  const out: LlamaSamplerName[] = [];
  if (typeof value === "string") {
    for (const ch of value) {
      const name = LLAMA_SAMPLER_CHARS[ch];
      if (!name) return { error: `samplers has an unknown sampler code '${ch}'; the codes are ${Object.keys(LLAMA_SAMPLER_CHARS).join("")}.` };
      out.push(name);
    }
    return out;
  }
  for (const raw of value) {
    const name = LLAMA_SAMPLER_ALIASES[raw.toLowerCase()];
    if (!name) return { error: `samplers has an unknown sampler '${raw}'; the samplers are ${LLAMA_DEFAULT_SAMPLERS.join(", ")}.` };
    out.push(name);
  }
  return out;
}

/** What tokenizing DRY's breakers needs of the vocabulary. */
export interface DryVocabulary {
  readonly vocabSize: number;
  /** the text of one token */
  piece(tokenId: number): string;
  /** text to token ids, no special tokens */
  encode(text: string): number[];
}

/** llama.cpp's limits on a breaker (llama_sampler_init_dry): characters kept, tail tokens kept */
const DRY_MAX_BREAKER_CHARS = 40;
const DRY_MAX_TAIL_TOKENS = 20;

/**
 * DRY's breakers as token sequences, llama.cpp's way (get_overlapping_token_sequences): every token whose text contains
 * the breaker is a breaker by itself; every token whose text ends with the breaker's first characters is a head whose
 * tail is the rest of the breaker, tokenized.
 */
export function drySequenceBreakerTokens(breakers: readonly string[], vocab: DryVocabulary): DryBreaker[] {
  const out: DryBreaker[] = [];
  const seen = new Set<string>();
  const add = (headTokenId: number, tailTokenIds: readonly number[]): void => {
    const key = `${headTokenId}:${tailTokenIds.join(",")}`;
    if (!seen.has(key)) { seen.add(key); out.push({ headTokenId, tailTokenIds }); }
  };
  for (const full of breakers) {
    const breaker = full.slice(0, DRY_MAX_BREAKER_CHARS);
    if (breaker === "") continue;
    for (let id = 0; id < vocab.vocabSize; id++) {
      const word = vocab.piece(id);
      if (word.includes(breaker)) { add(id, []); continue; }
      // the word's tail equals the breaker's start: the rest must follow in the next tokens
      for (let pos = word.indexOf(breaker[0]!); pos >= 0; pos = word.indexOf(breaker[0]!, pos + 1)) {
        if (breaker.startsWith(word.slice(pos))) add(id, vocab.encode(breaker.slice(word.length - pos)).slice(0, DRY_MAX_TAIL_TOKENS));
      }
    }
  }
  return out;
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
  allowedTokenIds: "allowed_token_ids", badWordsTokenIds: "bad_words", badWordsTexts: "bad_words", priority: "priority", cacheSalt: "cache_salt",
  kvTransferParams: "kv_transfer_params", llama: "llama.cpp sampler fields", thinkingBudget: "thinking_token_budget",
};

/**
 * A banned text as token tables, so the engine (which holds no text) can refuse every token that would complete it,
 * however the output spells it: a state is how many of its characters the output's end already matches.
 */
export interface BannedText {
  /** characters in the text */
  readonly numChars: number;
  /** tokens whose text contains the whole text */
  readonly containing: readonly number[];
  /** [tokenId, state]: the token's text ends with the first `state` characters (a match starts in it) */
  readonly entering: readonly (readonly [number, number])[];
  /** [tokenId, from, to]: the token's text is characters from..to of the text (a match goes on) */
  readonly advancing: readonly (readonly [number, number, number])[];
  /** [tokenId, from]: the token's text starts with the characters from `from` to the end (a match completes) */
  readonly completing: readonly (readonly [number, number])[];
}

/** What compiling a banned text needs of the vocabulary: each token's text, "" for special tokens. */
export interface TokenTexts {
  readonly vocabSize: number;
  tokenText(tokenId: number): string;
}

/**
 * vLLM bans the last token of a bad word's token sequence only, so a model may spell the same text with other
 * tokens (a small vocabulary's "e" + "d" for the banned "ed"); the compiled text bans every spelling.
 * @example const ban = compileBannedText(" surrounded", tokenizer);
 */
export function compileBannedText(text: string, vocab: TokenTexts): BannedText {
  const n = text.length;
  const containing: number[] = [];
  const entering: [number, number][] = [];
  const advancing: [number, number, number][] = [];
  const completing: [number, number][] = [];
  const prefixes = Array.from({ length: n }, (_, k) => text.slice(0, k)); // [n] the first k characters
  const suffixes = Array.from({ length: n }, (_, from) => text.slice(from)); // [n] the characters from `from` on
  for (let id = 0; id < vocab.vocabSize; id++) {
    const piece = vocab.tokenText(id);
    if (piece === "") continue;
    if (piece.includes(text)) { containing.push(id); continue; }
    const last = piece[piece.length - 1];
    // a character compare first: most tokens share no edge character with the text
    for (let k = 1; k < n && k <= piece.length; k++) if (text[k - 1] === last && piece.endsWith(prefixes[k]!)) entering.push([id, k]);
    for (let from = 1; from < n; from++) {
      if (text[from] !== piece[0]) continue;
      if (piece.startsWith(suffixes[from]!)) completing.push([id, from]);
      else if (from + piece.length < n && text.startsWith(piece, from)) advancing.push([id, from, from + piece.length]);
    }
  }
  return { numChars: n, containing, entering, advancing, completing };
}

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
  return p.llama ? validateLlamaSamplingParams(p.llama) : null;
}

/** one row of LLAMA_RANGES: the check and how its message names the valid values */
interface LlamaRange {
  readonly ok: (v: number) => boolean;
  readonly range: string;
}

const inRange = (lo: number, hi: number): LlamaRange => ({ ok: (v) => Number.isFinite(v) && v >= lo && v <= hi, range: `in [${show(lo)}, ${show(hi)}]` });
const atLeast = (lo: number): LlamaRange => ({ ok: (v) => Number.isFinite(v) && v >= lo, range: `at least ${show(lo)}` });
const intFrom = (lo: number): LlamaRange => ({ ok: (v) => Number.isInteger(v) && v >= lo, range: `an integer of at least ${lo}` });
const anyFinite: LlamaRange = { ok: Number.isFinite, range: "a finite number" };

/**
 * llama.cpp's numeric fields and their valid values (tools/server/server-schema.cpp; where llama.cpp clamps a value
 * silently, e.g. xtc_probability, an out-of-range value is an error here)
 */
const LLAMA_RANGES: Readonly<Partial<Record<keyof LlamaSamplingParams, LlamaRange>>> = {
  repeatLastN: intFrom(-1), typicalP: inRange(0, 1), mirostat: { ok: (v) => v === 0 || v === 1 || v === 2, range: "0, 1 or 2" },
  mirostatTau: atLeast(0), mirostatEta: atLeast(0), dryMultiplier: atLeast(0), dryBase: atLeast(1), dryAllowedLength: intFrom(0),
  dryPenaltyLastN: intFrom(-1), xtcProbability: inRange(0, 1), xtcThreshold: inRange(0, 1), topNSigma: anyFinite,
  dynatempRange: atLeast(0), dynatempExponent: anyFinite, minKeep: intFrom(0),
};

/** Checks llama.cpp's fields against LLAMA_RANGES; null when valid. */
export function validateLlamaSamplingParams(p: LlamaSamplingParams): SamplingParamsError | null {
  for (const [field, rule] of Object.entries(LLAMA_RANGES) as [keyof LlamaSamplingParams, LlamaRange][]) {
    const v = p[field] as number;
    if (!rule.ok(v)) return { param: LLAMA_SAMPLING_WIRE_NAMES[field], value: v, message: `${LLAMA_SAMPLING_WIRE_NAMES[field]} must be ${rule.range}, got ${v}.` };
  }
  return null;
}
