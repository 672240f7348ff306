/**
 * Pooling models (vLLM's `--runner pooling`): whether the engine pools at all and how. The engine Worker resolves the
 * parsed --pooler-config (config/pooler-config.ts) against the GGUF's `<arch>.pooling_type` once the model is loaded
 * (resolvePooler), and tells the main thread the result in its ready message (ResolvedPooler).
 */
import type { GgufPoolingType } from "../model/model-config.ts";
import type { Matryoshka, PoolerConfig, PoolingType, RunnerOption } from "../config/pooler-config.ts";
import { err, ok, type Result } from "../util/result.ts";

/** What a pooling engine does with every request: the pooling type, and the defaults of the per-request fields. */
export interface ResolvedPooler {
  readonly poolingType: PoolingType;
  /** default of the request's `normalize` (vLLM: true for embed) */
  readonly normalize: boolean;
  /** default of the request's `dimensions` (null: the model's full hidden size) */
  readonly dimensions: number | null;
  /** the model's full embedding size */
  readonly hiddenSize: number;
  /**
   * matryoshka models (vLLM is_matryoshka / matryoshka_dimensions): a request's `dimensions` keeps the first d
   * values; null: the model is not one, and `dimensions` is vLLM's 400. A GGUF says nothing about it: --hf-overrides
   * does, as in vLLM.
   */
  readonly matryoshka: Matryoshka | null;
  /** where the pooling type came from, for the start-up line */
  readonly source: "--pooler-config" | "gguf" | "default";
}

const FROM_GGUF: Readonly<Record<GgufPoolingType, PoolingType | null>> = { none: null, mean: "MEAN", cls: "CLS", last: "LAST", rank: null };

/**
 * Pooling or generation, from --runner, the GGUF's pooling type and --pooler-config (vLLM ModelConfig: runner auto
 * picks pooling for a pooling model; a decoder converted with --runner pooling pools LAST, VllmModelForPooling's
 * default_pooling_type). null: a generative engine.
 */
export function resolvePooler(runner: RunnerOption, model: { readonly poolingType?: GgufPoolingType; readonly dim: number; readonly name: string }, config: PoolerConfig | null, matryoshka: Matryoshka | null = null): Result<ResolvedPooler | null> {
  const gguf = model.poolingType ?? null;
  if (gguf === "rank" && runner !== "generate") {
    return err("the model's pooling_type is rank (a reranker with a classification head), which fennec does not implement; it serves embedding models (mean, cls or last pooling)");
  }
  const pooling = runner === "pooling" || (runner === "auto" && gguf !== null && FROM_GGUF[gguf] !== null);
  if (!pooling) {
    if (config !== null) return err("--pooler-config needs a pooling model: this model generates text; add --runner pooling to serve it as an embedding model");
    if (matryoshka !== null) return err("--hf-overrides matryoshka keys need a pooling model: this model generates text; add --runner pooling to serve it as an embedding model");
    return ok(null);
  }
  const fromGguf = gguf === null ? null : FROM_GGUF[gguf];
  const poolingType = config?.poolingType ?? fromGguf ?? "LAST";
  const dimensions = config?.dimensions ?? null;
  const bad = matryoshka?.dimensions?.find((d) => d > model.dim);
  if (bad !== undefined) return err(`--hf-overrides: matryoshka dimension ${bad} is larger than the model's hidden size ${model.dim}`);
  if (dimensions !== null) {
    const refused = checkDimensions(dimensions, { hiddenSize: model.dim, matryoshka }, model.name);
    if (refused !== null) return err(`--pooler-config: ${refused}`);
  }
  return ok({
    poolingType, normalize: config?.normalize ?? true, dimensions, hiddenSize: model.dim, matryoshka,
    source: config?.poolingType ? "--pooler-config" : fromGguf !== null ? "gguf" : "default",
  });
}

/**
 * vLLM's PoolingParams._set_default_parameters check of `dimensions` (its messages), or null when it may be used.
 * @example checkDimensions(64, pooler, "qwen3-embedding") // 'Model "qwen3-embedding" does not support matryoshka ...'
 */
export function checkDimensions(dimensions: number, pooler: Pick<ResolvedPooler, "hiddenSize" | "matryoshka">, modelName: string): string | null {
  if (pooler.matryoshka === null) {
    return `Model "${modelName}" does not support matryoshka representation, changing output dimensions will lead to poor results.`;
  }
  const allowed = pooler.matryoshka.dimensions;
  if (allowed !== null && !allowed.includes(dimensions)) {
    return `Model "${modelName}" only supports ${JSON.stringify(allowed)} matryoshka dimensions, use other output dimensions will lead to poor results.`;
  }
  if (dimensions < 1) return "Dimensions must be greater than 0";
  if (dimensions > pooler.hiddenSize) return `dimensions ${dimensions} is larger than the model's embedding size ${pooler.hiddenSize}`;
  return null;
}
