/**
 * THE table of supported architectures: what differs between llama, qwen2, qwen3 and gemma3 is a handful of flags, so
 * the forward passes branch on these flags and never on the architecture's name.
 * A new llama-like architecture is one row here (plus its tensors in `gguf/names.ts` if it adds any).
 * The gemma3 flags are optional: a row without them is llama-like (SwiGLU, no extra norms, every layer global).
 */
import type { Architecture, FfnActivation } from "./model-config.ts";

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
  /** the FFN's gate activation (default silu: SwiGLU); gemma3: GeGLU with tanh-GELU (llama.cpp LLM_FFN_GELU, LLM_FFN_PAR) */
  readonly ffnActivation?: FfnActivation;
  /** gemma3: the token embeddings are multiplied by sqrt(embedding_length) (llama.cpp gemma3.cpp "inp_scaled") */
  readonly scaleEmbeddings?: boolean;
  /** gemma3: post_attention_norm and post_ffw_norm, RMSNorms on each branch's output before its residual add */
  readonly hasPostNorms?: boolean;
  /**
   * gemma3: when `<prefix>.attention.sliding_window` is set, layer l is a sliding-window layer unless
   * l % period == period - 1 (llama.cpp llama_hparams::set_swa_pattern); `attention.sliding_window_pattern` overrides
   * the period. Sliding layers use `rope.freq_base_swa` (default below) and no rope scaling.
   */
  readonly slidingWindowPeriod?: number;
  readonly defaultRopeFreqBaseSwa?: number;
  /**
   * gemma3: a model of this many layers (27B) scales scores by 1 / sqrt(dim / numHeads) instead of 1 / sqrt(headDim)
   * (llama.cpp gemma3.cpp f_attention_scale after gemma_pytorch's query_pre_attn_scalar; the GGUF has no key for it)
   */
  readonly dimPerHeadScaleAtLayers?: number;
}

export const ARCHITECTURES: readonly ArchitectureTraits[] = [
  { architecture: "llama", keyPrefix: "llama", ropeNeox: false, hasQkvBias: false, hasQkNorm: false, defaultRopeFreqBase: 10000 },
  { architecture: "qwen2", keyPrefix: "qwen2", ropeNeox: true, hasQkvBias: true, hasQkNorm: false, defaultRopeFreqBase: 10000 },
  { architecture: "qwen3", keyPrefix: "qwen3", ropeNeox: true, hasQkvBias: false, hasQkNorm: true, defaultRopeFreqBase: 10000 },
  {
    architecture: "gemma3", keyPrefix: "gemma3", ropeNeox: true, hasQkvBias: false, hasQkNorm: true, defaultRopeFreqBase: 10000,
    ffnActivation: "gelu_tanh", scaleEmbeddings: true, hasPostNorms: true, slidingWindowPeriod: 6, defaultRopeFreqBaseSwa: 10000,
    dimPerHeadScaleAtLayers: 62,
  },
];

/**
 * The traits of a `general.architecture` value, or undefined when fennec does not support it.
 * @example architectureTraits("qwen2")?.ropeNeox // true
 */
export function architectureTraits(name: string): ArchitectureTraits | undefined {
  return ARCHITECTURES.find((a) => a.architecture === name);
}
