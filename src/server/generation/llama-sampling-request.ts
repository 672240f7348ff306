/**
 * llama.cpp's sampler and cache fields of a request body (tools/server/server-schema.cpp) -> SamplingParams: the
 * `llama` parameters that switch the row to llama.cpp's sampler chain (engine/llama-sampler-chain.ts), set only when
 * the body has at least one of llama.cpp's sampler fields, so every other request keeps vLLM's sampler; repeat_penalty
 * (vLLM's repetition_penalty rule); cache_prompt. Ranges are checked once, with the rest, by fitPrompt
 * (validateSamplingParams); where llama.cpp silently clamps a value the check is a 400 instead. Framework-free;
 * throws ApiError (400) naming the field.
 * @example const overrides = llamaSampling(body, tokenizer, sampling); // {} when the body has no llama.cpp field
 */
import {
  DEFAULT_LLAMA_SAMPLING_PARAMS, LLAMA_DEFAULT_DRY_BREAKERS, drySequenceBreakerTokens, parseLlamaSamplers,
  type DryBreaker, type LlamaSamplingParams, type SamplingParams,
} from "../../engine/sampling-params.ts";
import type { Tokenizer } from "../../tokenizer/tokenizer.ts";
import { invalidParam } from "../errors.ts";

/** llama.cpp's fields as they come past the schema (types right, ranges not yet checked). */
export interface LlamaSamplingBody {
  readonly repeat_penalty?: number | null;
  readonly repeat_last_n?: number | null;
  readonly typical_p?: number | null;
  readonly mirostat?: number | null;
  readonly mirostat_tau?: number | null;
  readonly mirostat_eta?: number | null;
  readonly dry_multiplier?: number | null;
  readonly dry_base?: number | null;
  readonly dry_allowed_length?: number | null;
  readonly dry_penalty_last_n?: number | null;
  readonly dry_sequence_breakers?: readonly string[] | null;
  readonly xtc_probability?: number | null;
  readonly xtc_threshold?: number | null;
  readonly top_n_sigma?: number | null;
  readonly dynatemp_range?: number | null;
  readonly dynatemp_exponent?: number | null;
  readonly min_keep?: number | null;
  readonly samplers?: string | readonly string[] | null;
  readonly cache_prompt?: boolean | null;
}

/** the body fields that select llama.cpp's chain (repeat_penalty included: its window is repeat_last_n's) */
const LLAMA_SAMPLER_FIELDS = [
  "repeat_penalty", "repeat_last_n", "typical_p", "mirostat", "mirostat_tau", "mirostat_eta", "dry_multiplier", "dry_base",
  "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability", "xtc_threshold", "top_n_sigma",
  "dynatemp_range", "dynatemp_exponent", "min_keep", "samplers",
] as const satisfies readonly (keyof LlamaSamplingBody)[];

/** llama.cpp's DRY base when a request's is below 1 (server-schema.cpp: "replaced with the default value") */
const DRY_BASE_DEFAULT = 1.75;

/** The default breakers' tokens, per tokenizer: a scan of the whole vocabulary per breaker, done once. */
const defaultBreakers = new WeakMap<Tokenizer, DryBreaker[]>();

function breakerTokens(tokenizer: Tokenizer, list: readonly string[] | null | undefined): DryBreaker[] {
  const vocab = {
    vocabSize: tokenizer.vocabSize,
    piece: (id: number) => (tokenizer.isSpecial(id) ? "" : tokenizer.tokenText(id)),
    encode: (text: string) => tokenizer.encode(text, { addSpecial: false, parseSpecial: false }),
  };
  if (list !== undefined && list !== null) return drySequenceBreakerTokens(list, vocab);
  let cached = defaultBreakers.get(tokenizer);
  if (cached === undefined) {
    cached = drySequenceBreakerTokens(LLAMA_DEFAULT_DRY_BREAKERS, vocab);
    defaultBreakers.set(tokenizer, cached);
  }
  return cached;
}

const given = <T>(v: T | null | undefined): v is T => v !== undefined && v !== null;

/** llama.cpp's sampler parameters from the body, or null when it sends none of them. */
function llamaParams(b: LlamaSamplingBody, tokenizer: Tokenizer): LlamaSamplingParams | null {
  if (!LLAMA_SAMPLER_FIELDS.some((k) => given(b[k]))) return null;
  const d = DEFAULT_LLAMA_SAMPLING_PARAMS;
  if (given(b.dry_sequence_breakers) && b.dry_sequence_breakers.length === 0) {
    throw invalidParam("dry_sequence_breakers", "dry_sequence_breakers must be a non-empty array of strings", b.dry_sequence_breakers);
  }
  let samplers = d.samplers;
  if (given(b.samplers)) {
    const parsed = parseLlamaSamplers(b.samplers);
    if ("error" in parsed) throw invalidParam("samplers", parsed.error, b.samplers);
    samplers = parsed;
  }
  const dryMultiplier = b.dry_multiplier ?? d.dryMultiplier;
  const dryBase = b.dry_base ?? d.dryBase;
  return {
    repeatLastN: b.repeat_last_n ?? d.repeatLastN,
    typicalP: b.typical_p ?? d.typicalP,
    mirostat: (b.mirostat ?? d.mirostat) as LlamaSamplingParams["mirostat"],
    mirostatTau: b.mirostat_tau ?? d.mirostatTau,
    mirostatEta: b.mirostat_eta ?? d.mirostatEta,
    dryMultiplier,
    dryBase: dryBase < 1 ? DRY_BASE_DEFAULT : dryBase,
    dryAllowedLength: b.dry_allowed_length ?? d.dryAllowedLength,
    dryPenaltyLastN: b.dry_penalty_last_n ?? d.dryPenaltyLastN,
    // tokenized only when DRY runs: the scan is of the whole vocabulary
    drySequenceBreakers: dryMultiplier > 0 ? breakerTokens(tokenizer, b.dry_sequence_breakers) : [],
    xtcProbability: b.xtc_probability ?? d.xtcProbability,
    xtcThreshold: b.xtc_threshold ?? d.xtcThreshold,
    topNSigma: b.top_n_sigma ?? d.topNSigma,
    dynatempRange: b.dynatemp_range ?? d.dynatempRange,
    dynatempExponent: b.dynatemp_exponent ?? d.dynatempExponent,
    minKeep: b.min_keep ?? d.minKeep,
    samplers,
  };
}

/**
 * The parts of SamplingParams llama.cpp's fields set, over `base` (toSamplingParams's): `llama`, repeat_penalty as
 * repetitionPenalty (a 400 when repetition_penalty says otherwise), and cache_prompt false as a cache namespace of
 * the request's own (no cached block matches it: the prefix-cache lookup finds nothing, as llama.cpp's re-evaluation).
 */
export function llamaSampling(body: LlamaSamplingBody & { readonly repetition_penalty?: number | null }, tokenizer: Tokenizer, base: SamplingParams): Partial<SamplingParams> {
  const out: { -readonly [K in keyof SamplingParams]?: SamplingParams[K] } = {};
  const llama = llamaParams(body, tokenizer);
  if (llama !== null) out.llama = llama;
  if (given(body.repeat_penalty)) {
    if (given(body.repetition_penalty) && body.repetition_penalty !== body.repeat_penalty) {
      throw invalidParam("repeat_penalty", `repeat_penalty (${body.repeat_penalty}) disagrees with repetition_penalty (${body.repetition_penalty}); send one of them.`, body.repeat_penalty);
    }
    if (!(body.repeat_penalty > 0)) throw invalidParam("repeat_penalty", `repeat_penalty must be greater than 0, got ${body.repeat_penalty}.`, body.repeat_penalty);
    out.repetitionPenalty = body.repeat_penalty;
  }
  if (body.cache_prompt === false) out.cacheSalt = `${base.cacheSalt ?? ""}\u0000cache_prompt=false:${crypto.randomUUID()}`;
  return out;
}
