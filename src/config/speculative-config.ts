/**
 * `--speculative-config` as vLLM takes it (vllm/config/speculative.py SpeculativeConfig): a JSON object whose keys may
 * use `-` or `_`, with vLLM's defaults and validation messages. fennec runs `ngram` (prompt lookup), `draft_model`
 * (a GGUF draft) and `suffix` (suffix decoding, fennec's own suffix trees in place of Arctic Inference); every other
 * method and every draft knob fennec cannot honour is refused with one line, never ignored.
 * Both threads import this file (the main thread parses and logs, the engine Worker reads the parsed value); the
 * command line's --spec-* shortcuts are merged in command-line/speculative-flags.ts.
 */
import { err, ok, type Result } from "../util/result.ts";

export type SpeculativeMethod = "ngram" | "draft_model" | "suffix";

/** vLLM's suffix_decoding_* keys, defaults resolved. */
export interface SuffixDecodingConfig {
  /** suffix_decoding_max_tree_depth: tokens per tree path (match + draft) */
  readonly maxTreeDepth: number;
  /** suffix_decoding_max_cached_requests: responses the global tree keeps (FIFO); 0: no global tree */
  readonly maxCachedRequests: number;
  /** suffix_decoding_max_spec_factor: at most this x the match length tokens */
  readonly maxSpecFactor: number;
  /** suffix_decoding_min_token_prob: draft only tokens whose estimated probability is at least this */
  readonly minTokenProb: number;
}

/** vLLM's defaults for the suffix_decoding_* keys */
export const SUFFIX_DECODING_DEFAULTS: SuffixDecodingConfig = { maxTreeDepth: 24, maxCachedRequests: 10000, maxSpecFactor: 1.0, minTokenProb: 0.1 };

/** The parsed config: every default resolved (vLLM's __post_init__). */
export interface SpeculativeConfig {
  readonly method: SpeculativeMethod;
  /** draft_model: the draft GGUF path; null for ngram (vLLM prints model=None) */
  readonly model: string | null;
  /** k: tokens drafted per step */
  readonly numSpeculativeTokens: number;
  /** ngram window bounds (0 for the other methods, as vLLM sets them) */
  readonly promptLookupMax: number;
  readonly promptLookupMin: number;
  /** method suffix: its keys (absent for the other methods) */
  readonly suffix?: SuffixDecodingConfig;
  /** method suffix without num_speculative_tokens: k is the tree depth (vLLM logs that) */
  readonly numSpeculativeTokensDefaulted?: boolean;
}

/** vLLM's ngram default when neither bound is given (both mirror each other when only one is) */
const DEFAULT_PROMPT_LOOKUP = 5;

/** Methods vLLM knows that fennec does not run: why, in one line each. */
const UNSUPPORTED_METHODS: Readonly<Record<string, string>> = {
  ngram_gpu: "method 'ngram_gpu' needs a GPU; fennec runs on CPUs: use 'ngram' (the same algorithm)",
  custom_class: "method 'custom_class' (a Python proposer class) is not supported by fennec; use 'ngram', 'suffix' or 'draft_model'",
  extract_hidden_states: "method 'extract_hidden_states' is not supported by fennec; use 'ngram', 'suffix' or 'draft_model'",
};
/** heads on the target's hidden states: fennec's runner exposes logits only */
const HIDDEN_STATE_METHODS = ["medusa", "mlp_speculator", "eagle", "eagle3", "mtp", "dflash", "dspark"];

/**
 * Keys vLLM accepts that fennec refuses, with the reason. `null` values: accepted only at their default (the check
 * is in parseSpeculativeConfig).
 */
const REFUSED_KEYS: Readonly<Record<string, string>> = {
  quantization: "the draft GGUF's own weight types are used",
  moe_backend: "fennec has no MoE kernels",
  attention_backend: "fennec has one attention kernel",
  kv_cache_dtype: "the draft's KV cache uses the target's dtype",
  max_model_len: "the draft runs at the target's --max-model-len",
  revision: "the draft is a local GGUF file",
  code_revision: "the draft is a local GGUF file",
  draft_load_config: "the draft is a local GGUF file",
  enforce_eager: "fennec always runs eagerly",
  disable_padded_drafter_batch: "fennec's drafter batch is never padded",
  use_local_argmax_reduction: "fennec has no tensor parallelism",
  use_heterogeneous_vocab: "the draft must share the target's vocabulary",
  parallel_drafting: "only dflash/dspark draft in parallel",
  num_speculative_tokens_per_batch_size: "k is fixed per server",
  synthetic_acceptance_rates: "only rejection_sample_method 'standard' is supported",
  synthetic_acceptance_length: "only rejection_sample_method 'standard' is supported",
  enable_adaptive_verification: "DSpark only",
  dspark_draft_topk: "DSpark only",
};
const SUFFIX_KEYS = ["suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob"];
const KNOWN_KEYS = new Set([
  "method", "model", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min", "draft_tensor_parallel_size",
  "tensor_parallel_size", "rejection_sample_method", "draft_sample_method", ...SUFFIX_KEYS, ...Object.keys(REFUSED_KEYS),
]);

/** pydantic's one-line messages for a field of the wrong type or out of range */
function intField(raw: Record<string, unknown>, key: string, bound: "gt0" | "ge1"): Result<number | null> {
  const v = raw[key];
  if (v === undefined || v === null) return ok(null);
  if (typeof v !== "number" || !Number.isInteger(v)) return err(`SpeculativeConfig: ${key}: Input should be a valid integer (got ${JSON.stringify(v)})`);
  if (bound === "gt0" && v <= 0) return err(`SpeculativeConfig: ${key}: Input should be greater than 0 (got ${v})`);
  if (bound === "ge1" && v < 1) return err(`SpeculativeConfig: ${key}: Input should be greater than or equal to 1 (got ${v})`);
  return ok(v);
}

function numberField(raw: Record<string, unknown>, key: string, integer: boolean): Result<number | null> {
  const v = raw[key];
  if (v === undefined || v === null) return ok(null);
  if (typeof v !== "number" || !Number.isFinite(v) || (integer && !Number.isInteger(v))) {
    return err(`SpeculativeConfig: ${key}: Input should be a valid ${integer ? "integer" : "number"} (got ${JSON.stringify(v)})`);
  }
  return ok(v);
}

/** vLLM's suffix_decoding_* keys with its defaults and bounds (SpeculativeConfig._verify_args). */
function suffixConfig(raw: Record<string, unknown>): Result<SuffixDecodingConfig> {
  const depth = numberField(raw, "suffix_decoding_max_tree_depth", true);
  if (!depth.ok) return depth;
  const cached = numberField(raw, "suffix_decoding_max_cached_requests", true);
  if (!cached.ok) return cached;
  const factor = numberField(raw, "suffix_decoding_max_spec_factor", false);
  if (!factor.ok) return factor;
  const minProb = numberField(raw, "suffix_decoding_min_token_prob", false);
  if (!minProb.ok) return minProb;
  const c: SuffixDecodingConfig = {
    maxTreeDepth: depth.value ?? SUFFIX_DECODING_DEFAULTS.maxTreeDepth,
    maxCachedRequests: cached.value ?? SUFFIX_DECODING_DEFAULTS.maxCachedRequests,
    maxSpecFactor: factor.value ?? SUFFIX_DECODING_DEFAULTS.maxSpecFactor,
    minTokenProb: minProb.value ?? SUFFIX_DECODING_DEFAULTS.minTokenProb,
  };
  if (c.maxTreeDepth < 1) return err(`suffix_decoding_max_tree_depth=${c.maxTreeDepth} must be >= 1`);
  if (c.maxCachedRequests < 0) return err(`suffix_decoding_max_cached_requests=${c.maxCachedRequests} must be >= 0`);
  if (c.maxSpecFactor < 0) return err(`suffix_decoding_max_spec_factor=${c.maxSpecFactor} must be >= 0`);
  if (c.minTokenProb < 0 || c.minTokenProb > 1) return err(`suffix_decoding_min_token_prob=${c.minTokenProb} must be in [0, 1]`);
  return ok(c);
}

/**
 * Parses the flag's JSON text (or an already-parsed object from a stage config) into a SpeculativeConfig.
 * @example parseSpeculativeConfig('{"method":"ngram","num_speculative_tokens":4}') // ok: prompt_lookup 5..5
 */
export function parseSpeculativeConfig(input: string | unknown): Result<SpeculativeConfig> {
  let value: unknown = input;
  if (typeof input === "string") {
    try {
      value = JSON.parse(input);
    } catch (e) {
      return err(`--speculative-config is not valid JSON (${e instanceof Error ? e.message : String(e)}); e.g. '{"method": "ngram", "num_speculative_tokens": 4}'`);
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return err("--speculative-config must be a JSON object, e.g. '{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'");
  // vLLM converts dashes to underscores in the keys
  const raw: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) raw[k.replaceAll("-", "_")] = v;
  if ("tensor_parallel_size" in raw) return err("'tensor_parallel_size' is not a valid argument in the speculative_config. Please pass 'draft_tensor_parallel_size' instead.");
  for (const key of Object.keys(raw)) {
    if (!KNOWN_KEYS.has(key)) return err(`SpeculativeConfig: ${key}: Extra inputs are not permitted`);
    const why = REFUSED_KEYS[key];
    if (why !== undefined && raw[key] !== null) return err(`--speculative-config key '${key}' is not supported by fennec (${why}); remove it`);
  }
  const k = intField(raw, "num_speculative_tokens", "gt0");
  if (!k.ok) return k;
  const lookupMax = intField(raw, "prompt_lookup_max", "ge1");
  if (!lookupMax.ok) return lookupMax;
  const lookupMin = intField(raw, "prompt_lookup_min", "ge1");
  if (!lookupMin.ok) return lookupMin;
  const draftTp = intField(raw, "draft_tensor_parallel_size", "ge1");
  if (!draftTp.ok) return draftTp;
  // fennec's target runs on one engine: tensor_parallel_size is 1
  if (draftTp.value !== null && draftTp.value !== 1) return err(`speculative_draft_tensor_parallel_size=${draftTp.value} cannot be other value than 1 or target model tensor_parallel_size`);
  const rejection = raw["rejection_sample_method"];
  if (rejection !== undefined && rejection !== null && rejection !== "standard") {
    if (rejection === "synthetic" || rejection === "block") return err(`rejection_sample_method='${rejection}' is not supported by fennec; use 'standard' (the default)`);
    return err(`SpeculativeConfig: rejection_sample_method: Input should be 'standard', 'synthetic' or 'block' (got ${JSON.stringify(rejection)})`);
  }
  const draftSample = raw["draft_sample_method"];
  if (draftSample !== undefined && draftSample !== null && draftSample !== "greedy") {
    if (draftSample === "probabilistic") return err("draft_sample_method='probabilistic' is not supported by fennec; use 'greedy' (the default)");
    return err(`SpeculativeConfig: draft_sample_method: Input should be 'greedy' or 'probabilistic' (got ${JSON.stringify(draftSample)})`);
  }
  const modelRaw = raw["model"];
  if (modelRaw !== undefined && modelRaw !== null && typeof modelRaw !== "string") return err(`SpeculativeConfig: model: Input should be a valid string (got ${JSON.stringify(modelRaw)})`);
  const methodRaw = raw["method"];
  if (methodRaw !== undefined && methodRaw !== null && typeof methodRaw !== "string") return err(`SpeculativeConfig: method: Input should be a valid string (got ${JSON.stringify(methodRaw)})`);
  let model = (modelRaw ?? null) as string | null;
  let method = (methodRaw ?? null) as string | null;

  // vLLM's method detection: "ngram"/"[ngram]" as model means ngram; a dotted path a custom class; else a draft model
  if (method === null && model !== null) {
    if (model === "ngram" || model === "[ngram]") method = "ngram";
    else if (/^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+$/.test(model) && !/\.gguf$/i.test(model)) method = "custom_class";
    else method = "draft_model";
  }
  if (method === null) {
    // no method and no model: vLLM's messages for the two ways this happens
    if (k.value === null) return err("num_speculative_tokens must be provided with speculative model unless the draft model config contains an n_predict parameter.");
    return err("num_speculative_tokens was provided but without speculative model.");
  }
  const unsupported = UNSUPPORTED_METHODS[method];
  if (unsupported !== undefined) return err(unsupported);
  if (HIDDEN_STATE_METHODS.includes(method)) return err(`method '${method}' needs the target model's hidden states, which fennec's runner does not expose; use 'ngram', 'suffix' or 'draft_model'`);
  if (method !== "ngram" && method !== "draft_model" && method !== "suffix") return err(`Unsupported speculative method: '${method}'`);
  // the suffix keys are read by method suffix only: anywhere else they would be accepted and ignored
  if (method !== "suffix") {
    const key = SUFFIX_KEYS.find((x) => raw[x] !== undefined && raw[x] !== null);
    if (key !== undefined) return err(`${key} applies to method 'suffix' only; remove it for method '${method}'`);
  }

  if (method === "suffix") {
    if (model !== null && model !== "suffix") return err(`method 'suffix' takes no draft model (got model=${JSON.stringify(model)}); drop "model"`);
    for (const key of ["prompt_lookup_max", "prompt_lookup_min"]) {
      if (raw[key] !== undefined && raw[key] !== null) return err(`${key} applies to method 'ngram' only; remove it for method 'suffix'`);
    }
    const suffix = suffixConfig(raw);
    if (!suffix.ok) return suffix;
    // vLLM: "Defaulted num_speculative_tokens to %s for suffix decoding." (k = the tree depth)
    return ok({
      method, model: null, numSpeculativeTokens: k.value ?? suffix.value.maxTreeDepth, promptLookupMax: 0, promptLookupMin: 0,
      suffix: suffix.value, ...(k.value === null ? { numSpeculativeTokensDefaulted: true } : {}),
    });
  }

  if (method === "ngram") {
    if (model !== null && model !== "ngram" && model !== "[ngram]") return err(`method 'ngram' takes no draft model (got model=${JSON.stringify(model)}); drop "model" or use method 'draft_model'`);
    model = null;
    if (k.value === null) return err("num_speculative_tokens must be provided with speculative model unless the draft model config contains an n_predict parameter.");
    const max = lookupMax.value ?? lookupMin.value ?? DEFAULT_PROMPT_LOOKUP;
    const min = lookupMin.value ?? lookupMax.value ?? DEFAULT_PROMPT_LOOKUP;
    if (min > max) return err(`prompt_lookup_min=${min} must be <= prompt_lookup_max=${max}`);
    return ok({ method, model, numSpeculativeTokens: k.value, promptLookupMax: max, promptLookupMin: min });
  }
  // draft_model
  if (model === null) return err("num_speculative_tokens was provided but without speculative model.");
  if (k.value === null) return err("A speculative model was provided, but `num_speculative_tokens` was not provided");
  for (const key of ["prompt_lookup_max", "prompt_lookup_min"]) {
    if (raw[key] !== undefined && raw[key] !== null) return err(`${key} applies to method 'ngram' only; remove it for a draft model`);
  }
  return ok({ method, model, numSpeculativeTokens: k.value, promptLookupMax: 0, promptLookupMin: 0 });
}

/** vLLM's log line when suffix decoding's k comes from the tree depth, or null. */
export function speculativeConfigNote(c: SpeculativeConfig): string | null {
  return c.numSpeculativeTokensDefaulted ? `Defaulted num_speculative_tokens to ${c.numSpeculativeTokens} for suffix decoding.` : null;
}

/**
 * vLLM's startup repr of the config.
 * @example speculativeConfigRepr(cfg) // "SpeculativeConfig(method='ngram', model=None, num_spec_tokens=4)"
 */
export function speculativeConfigRepr(c: SpeculativeConfig): string {
  return `SpeculativeConfig(method='${c.method}', model=${c.model === null ? "None" : `'${c.model}'`}, num_spec_tokens=${c.numSpeculativeTokens})`;
}
