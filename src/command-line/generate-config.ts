/**
 * `generate`'s flags as one typed config: the prompt, sampling, the kernels, speculative decoding.
 */
import type { SpeculativeConfig } from "../config/speculative-config.ts";
import { ok, type Result } from "../util/result.ts";
import type { Options } from "./flags.ts";
import { deviceOf, intOrNull, stringOrNull } from "./flag-values.ts";
import { speculativeConfigFromFlags } from "./speculative-flags.ts";

export interface GenerateConfig {
  readonly model: string | null;
  readonly prompt: string;
  readonly maxTokens: number;
  readonly temperature: number;
  /** null: a new seed each run */
  readonly seed: number | null;
  readonly json: boolean;
  /** null: the number of cores */
  readonly threads: number | null;
  readonly device: "cpu" | "webgpu";
  /** --speculative-config (and the --spec-* shortcuts); null: off */
  readonly speculative: SpeculativeConfig | null;
}

/** `generate`'s flags as one typed config. */
export function generateConfig(options: Options): Result<GenerateConfig> {
  const speculative = speculativeConfigFromFlags(options);
  if (!speculative.ok) return speculative;
  return ok({
    model: stringOrNull(options.model), prompt: String(options.prompt ?? ""), maxTokens: Number(options["max-tokens"]),
    temperature: Number(options.temperature), seed: intOrNull(options.seed), json: options.json === true,
    threads: intOrNull(options.threads), device: deviceOf(options.device), speculative: speculative.value,
  });
}
