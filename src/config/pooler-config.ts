/**
 * Pooling models' configuration as vLLM takes it (vllm/config/pooler.py PoolerConfig): `--runner`, `--pooler-config`
 * and the matryoshka keys of `--hf-overrides`, parsed on the main thread (one line and exit 2 on a bad value). The
 * engine Worker resolves the parsed record against the GGUF's `<arch>.pooling_type` (engine/resolve-pooler.ts).
 */
import { err, ok, type Result } from "../util/result.ts";

/** vLLM's sequence pooling types fennec computes (ALL and STEP, per-token outputs, are refused). */
export type PoolingType = "LAST" | "MEAN" | "CLS";

/** --runner (vLLM RunnerOption); --task embed and --convert embed mean pooling too. */
export type RunnerOption = "auto" | "generate" | "pooling";

/** --pooler-config as given: every field optional (vLLM: None = the model's default). */
export interface PoolerConfig {
  readonly poolingType: PoolingType | null;
  readonly normalize: boolean | null;
  readonly dimensions: number | null;
}

/** A matryoshka model (vLLM ModelConfig.is_matryoshka / matryoshka_dimensions); dimensions null: any size up to the model's */
export interface Matryoshka {
  readonly dimensions: readonly number[] | null;
}

const POOLING_TYPES: readonly PoolingType[] = ["LAST", "MEAN", "CLS"];

/** PoolerConfig keys vLLM has that fennec refuses, and why. */
const REFUSED_KEYS: Readonly<Record<string, string>> = {
  enable_chunked_processing: "long inputs are refused past --max-model-len instead of being split and averaged",
  max_embed_len: "inputs are bounded by --max-model-len",
  softmax: "fennec serves embedding models, not classifiers",
  activation: "fennec serves embedding models, not classifiers",
  use_activation: "fennec serves embedding models, not classifiers",
  logit_bias: "fennec serves embedding models, not classifiers",
  logit_mean: "fennec serves embedding models, not classifiers",
  logit_sigma: "fennec serves embedding models, not classifiers",
  logit_scale: "fennec serves embedding models, not classifiers",
  step_tag_id: "STEP pooling (reward models) is not implemented",
  returned_token_ids: "STEP pooling (reward models) is not implemented",
};

/**
 * Parses `--pooler-config` (a JSON object with vLLM's PoolerConfig keys).
 * @example parsePoolerConfig('{"pooling_type": "MEAN", "normalize": false}')
 */
export function parsePoolerConfig(raw: string): Result<PoolerConfig> {
  let value: unknown;
  try { value = JSON.parse(raw); } catch { value = undefined; }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return err(`--pooler-config must be a JSON object, e.g. '{"pooling_type": "MEAN", "normalize": true}' (got ${raw})`);
  }
  const o = value as Record<string, unknown>;
  let poolingType: PoolingType | null = null;
  let normalize: boolean | null = null;
  let dimensions: number | null = null;
  for (const [key, v] of Object.entries(o)) {
    if (v === null) continue;
    if (key === "pooling_type" || key === "seq_pooling_type") {
      if (v === "ALL" || v === "STEP") return err(`--pooler-config: pooling_type ${v} (per-token outputs) is not supported by fennec; use LAST, MEAN or CLS`);
      if (typeof v !== "string" || !(POOLING_TYPES as readonly string[]).includes(v)) return err(`--pooler-config: pooling_type must be one of LAST, MEAN, CLS (got ${JSON.stringify(v)})`);
      poolingType = v as PoolingType;
    } else if (key === "normalize") {
      if (typeof v !== "boolean") return err(`--pooler-config: normalize must be true or false (got ${JSON.stringify(v)})`);
      normalize = v;
    } else if (key === "dimensions") {
      if (typeof v !== "number" || !Number.isInteger(v) || v < 1) return err(`--pooler-config: dimensions must be a positive integer (got ${JSON.stringify(v)})`);
      dimensions = v;
    } else if (key === "task") {
      if (v !== "embed") return err(`--pooler-config: task ${JSON.stringify(v)} is not supported by fennec; only embed`);
    } else if (key in REFUSED_KEYS) {
      // false / absent-equivalent values change nothing
      if (v === false) continue;
      return err(`--pooler-config: ${key} is not supported by fennec: ${REFUSED_KEYS[key]}`);
    } else {
      return err(`--pooler-config: unknown key ${JSON.stringify(key)} (vLLM's PoolerConfig keys fennec takes: pooling_type, normalize, dimensions)`);
    }
  }
  return ok({ poolingType, normalize, dimensions });
}

/**
 * --hf-overrides, of which fennec takes vLLM's matryoshka keys only (the GGUF metadata is the rest of the config).
 * @example parseHfOverrides('{"matryoshka_dimensions": [64, 128]}') // ok({ dimensions: [64, 128] })
 */
export function parseHfOverrides(raw: string): Result<Matryoshka | null> {
  let value: unknown;
  try { value = JSON.parse(raw); } catch { value = undefined; }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return err(`--hf-overrides must be a JSON object, e.g. '{"is_matryoshka": true}' (got ${raw})`);
  let isMatryoshka = false;
  let dimensions: number[] | null = null;
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    if (key === "is_matryoshka") {
      if (typeof v !== "boolean") return err(`--hf-overrides: is_matryoshka must be true or false (got ${JSON.stringify(v)})`);
      isMatryoshka = v;
    } else if (key === "matryoshka_dimensions") {
      if (v === null) continue;
      if (!Array.isArray(v) || v.length === 0 || !v.every((d) => typeof d === "number" && Number.isInteger(d) && d > 0)) {
        return err(`--hf-overrides: matryoshka_dimensions must be a list of positive integers (got ${JSON.stringify(v)})`);
      }
      dimensions = v as number[];
    } else {
      return err(`--hf-overrides: ${JSON.stringify(key)} is not supported: fennec takes only is_matryoshka and matryoshka_dimensions; the GGUF metadata is the rest of the config (edit it with gguf-py's gguf_set_metadata.py)`);
    }
  }
  // vLLM: is_matryoshka = bool(matryoshka_dimensions) or is_matryoshka
  return ok(dimensions !== null ? { dimensions } : isMatryoshka ? { dimensions: null } : null);
}
