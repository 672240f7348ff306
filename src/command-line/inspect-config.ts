/**
 * `inspect`'s flags as one typed config.
 */
import type { Options } from "./flags.ts";
import { stringOrNull } from "./flag-values.ts";

export interface InspectConfig {
  /** the GGUF file; null: the embedded default model */
  readonly model: string | null;
  /** --json: one JSON object instead of text */
  readonly json: boolean;
}

export function inspectConfig(options: Options): InspectConfig {
  return { model: stringOrNull(options.model), json: options.json === true };
}
