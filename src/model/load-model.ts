/**
 * A parsed GGUF file -> the checked config and weights, in one call with one error string (config first, then every
 * tensor), so every entry point (generate, the engine worker, the tests) loads a model the same way.
 */
import type { GgufFile } from "../gguf/gguf-file.ts";
import { ok, type Result } from "../util/result.ts";
import { readModelConfig } from "./read-model-config.ts";
import type { ModelConfig } from "./model-config.ts";
import { loadModelWeights, type LoadWeightsOptions, type ModelWeights } from "./weights.ts";

export interface LoadedModel {
  readonly gguf: GgufFile;
  readonly config: ModelConfig;
  readonly weights: ModelWeights;
}

/**
 * @example const model = loadModel(gguf); if (!model.ok) throw new CliError(model.error);
 */
export function loadModel(gguf: GgufFile, options: LoadWeightsOptions = {}): Result<LoadedModel> {
  const config = readModelConfig(gguf);
  if (!config.ok) return config;
  const weights = loadModelWeights(gguf, config.value, options);
  if (!weights.ok) return weights;
  return ok({ gguf, config: config.value, weights: weights.value });
}
