/**
 * `pull`'s flags as one typed config: the model to fetch and the Hub flags.
 */
import type { Options } from "./flags.ts";
import { modelArgumentFlags, type ModelArgumentFlags } from "./model-argument-flags.ts";

export type PullConfig = ModelArgumentFlags;

export function pullConfig(options: Options): PullConfig {
  return modelArgumentFlags(options);
}
