/**
 * THE table of supported architectures: what differs between llama, qwen2 and qwen3 is a handful of flags, so the
 * forward passes branch on these flags and never on the architecture's name.
 * A new llama-like architecture is one row here (plus its tensors in `gguf/names.ts` if it adds any).
 */
import type { Architecture } from "./model-config.ts";

export interface ArchitectureTraits {
  readonly architecture: Architecture;
  /** GGUF metadata keys are `<keyPrefix>.embedding_length` ... (llama.cpp LLM_KV_*) */
  readonly keyPrefix: string;
  /** NEOX (split-half) rope pairs (i, i + ropeDim / 2); normal rope pairs (2i, 2i + 1) */
  readonly ropeNeox: boolean;
  /** attn_{q,k,v}.bias are required */
  readonly hasQkvBias: boolean;
  /** attn_{q,k}_norm (an RMSNorm over each head, before rope) are required */
  readonly hasQkNorm: boolean;
  /** used when `<prefix>.rope.freq_base` is absent (llama.cpp's default) */
  readonly defaultRopeFreqBase: number;
}

export const ARCHITECTURES: readonly ArchitectureTraits[] = [
  { architecture: "llama", keyPrefix: "llama", ropeNeox: false, hasQkvBias: false, hasQkNorm: false, defaultRopeFreqBase: 10000 },
  { architecture: "qwen2", keyPrefix: "qwen2", ropeNeox: true, hasQkvBias: true, hasQkNorm: false, defaultRopeFreqBase: 10000 },
  { architecture: "qwen3", keyPrefix: "qwen3", ropeNeox: true, hasQkvBias: false, hasQkNorm: true, defaultRopeFreqBase: 10000 },
];

/**
 * The traits of a `general.architecture` value, or undefined when fennec does not support it.
 * @example architectureTraits("qwen2")?.ropeNeox // true
 */
export function architectureTraits(name: string): ArchitectureTraits | undefined {
  return ARCHITECTURES.find((a) => a.architecture === name);
}
