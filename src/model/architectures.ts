/**
 * THE table of supported architectures: what differs between llama, qwen2, qwen3, gemma3 (and EmbeddingGemma's
 * gemma-embedding), phi3 and smollm3 is a
 * handful of flags, so the forward passes branch on these flags and never on the architecture's name.
 * A new llama-like architecture is one row here (plus its tensors in `gguf/names.ts` if it adds any).
 * The gemma3 flags are optional: a row without them is llama-like (SwiGLU, no extra norms, every layer global).
 */
import type { Architecture, FfnActivation, MoeGating, RopeFactorTensors } from "./model-config.ts";

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
  /**
   * gemma-embedding: attention is bidirectional and a sliding window symmetric (llama.cpp causal_attn = false,
   * LLAMA_SWA_TYPE_SYMMETRIC), and the pooled vector may pass through the sentence-transformers projections dense_2
   * and dense_3 (llama.cpp build_dense_out)
   */
  readonly bidirectional?: boolean;
  /**
   * Which per-dim rope divisors the architecture reads (llama.cpp get_rope_factors): "freqs" = rope_freqs.weight
   * (Llama 3.x), or rope_factors_long/short when rope.scaling.type is longrope; "longShort" = always
   * rope_factors_long/short (phi3); "none" = never. Each tensor is optional.
   */
  readonly ropeFactors: RopeFactorTensors;
  /** every n-th layer (1-based) skips rope (smollm3: 4, llama.cpp n_no_rope_layer_step); 0 = every layer ropes */
  readonly noRopeLayerStep: number;
  /** ffn_up holds [gate; up] stacked (2 x feed_forward_length rows) and there is no ffn_gate (phi3) */
  readonly fusedGateUp: boolean;
  /** attn_qkv (q, k, v stacked as rows) may stand for attn_q/k/v (phi3; llama.cpp create_tensor_qkv) */
  readonly fusedQkv: boolean;
  /** olmoe: attn_{q,k}_norm normalise the whole projected q / k (weights [numHeads * headDim]) rather than each head */
  readonly qkNormFullWidth?: boolean;
  /**
   * mixture of experts: the gating llama.cpp's graph hard-codes for the architecture (build_moe_ffn's gating_op and
   * norm_w arguments; the GGUF's expert_gating_func is not read for these), and where the experts' width comes from:
   * expert_feed_forward_length (qwen3moe; else feed_forward_length / k) or feed_forward_length itself (olmoe)
   */
  readonly moe?: { readonly gating: MoeGating; readonly normTopK: boolean; readonly expertWidthKey: "expert" | "ffn" };
  /**
   * granite: logit_scale (required), residual_scale, embedding_scale and attention.scale (optional) are read, and
   * rope.scaling.finetuned = false switches rope off (llama.cpp granite.cpp load_arch_hparams)
   */
  readonly graniteScales?: boolean;
  /** qwen2vl: M-RoPE over rope.dimension_sections (required, model/mrope.ts) */
  readonly mrope?: boolean;
  /** gpt-oss (openai-moe.cpp): attention sinks, attn_output.bias, biased router and experts, swiglu_oai experts */
  readonly gptOss?: boolean;
}

const LLAMA_LIKE = { ropeFactors: "none", noRopeLayerStep: 0, fusedGateUp: false, fusedQkv: false } as const;

/** llama.cpp: src/models/<arch>.cpp (load_arch_hparams, load_arch_tensors, the graph) */
export const ARCHITECTURES: readonly ArchitectureTraits[] = [
  { architecture: "llama", keyPrefix: "llama", ropeNeox: false, hasQkvBias: false, hasQkNorm: false, defaultRopeFreqBase: 10000, ...LLAMA_LIKE, ropeFactors: "freqs" },
  { architecture: "qwen2", keyPrefix: "qwen2", ropeNeox: true, hasQkvBias: true, hasQkNorm: false, defaultRopeFreqBase: 10000, ...LLAMA_LIKE },
  { architecture: "qwen3", keyPrefix: "qwen3", ropeNeox: true, hasQkvBias: false, hasQkNorm: true, defaultRopeFreqBase: 10000, ...LLAMA_LIKE },
  {
    architecture: "gemma3", keyPrefix: "gemma3", ropeNeox: true, hasQkvBias: false, hasQkNorm: true, defaultRopeFreqBase: 10000, ...LLAMA_LIKE,
    ffnActivation: "gelu_tanh", scaleEmbeddings: true, hasPostNorms: true, slidingWindowPeriod: 6, defaultRopeFreqBaseSwa: 10000,
    dimPerHeadScaleAtLayers: 62,
  },
  // gemma-embedding.cpp: gemma3's layers with bidirectional attention, a symmetric window on every sliding layer
  // (attention.sliding_window is required), 1 / sqrt(headDim) at every size, mean pooling from the GGUF
  {
    architecture: "gemma-embedding", keyPrefix: "gemma-embedding", ropeNeox: true, hasQkvBias: false, hasQkNorm: true, defaultRopeFreqBase: 10000, ...LLAMA_LIKE,
    ffnActivation: "gelu_tanh", scaleEmbeddings: true, hasPostNorms: true, slidingWindowPeriod: 6, defaultRopeFreqBaseSwa: 10000,
    bidirectional: true,
  },
  // phi3.cpp: NEOX rope (llama_model_rope_type), LongRoPE factors, fused qkv and gate-up; its sliding window is read
  // and then switched off by llama.cpp ("Phi SWA is currently disabled"), so fennec does not apply it either
  { architecture: "phi3", keyPrefix: "phi3", ropeNeox: true, hasQkvBias: false, hasQkNorm: false, defaultRopeFreqBase: 10000, ...LLAMA_LIKE, ropeFactors: "longShort", fusedGateUp: true, fusedQkv: true },
  // smollm3.cpp: llama's graph with no rope in layers 4, 8, 12, ... (hard-coded step 4, no metadata key)
  { architecture: "smollm3", keyPrefix: "smollm3", ropeNeox: false, hasQkvBias: false, hasQkNorm: false, defaultRopeFreqBase: 10000, ...LLAMA_LIKE, noRopeLayerStep: 4 },
  // qwen3moe.cpp: qwen3's attention (per-head QK-norm, NEOX rope), every FFN routed: softmax, top-k, renormalised
  {
    architecture: "qwen3moe", keyPrefix: "qwen3moe", ropeNeox: true, hasQkvBias: false, hasQkNorm: true, defaultRopeFreqBase: 10000, ...LLAMA_LIKE,
    moe: { gating: "softmax", normTopK: true, expertWidthKey: "expert" },
  },
  // olmoe.cpp: QK-norm over the whole q / k before the heads are split, NEOX rope, softmax top-k without renormalising
  {
    architecture: "olmoe", keyPrefix: "olmoe", ropeNeox: true, hasQkvBias: false, hasQkNorm: true, defaultRopeFreqBase: 10000, ...LLAMA_LIKE,
    qkNormFullWidth: true, moe: { gating: "softmax", normTopK: false, expertWidthKey: "ffn" },
  },
  // granite.cpp: llama's layers with Granite's multipliers (embedding, residual, attention, 1 / logit scale)
  { architecture: "granite", keyPrefix: "granite", ropeNeox: false, hasQkvBias: false, hasQkNorm: false, defaultRopeFreqBase: 10000, ...LLAMA_LIKE, ropeFactors: "freqs", graniteScales: true },
  // granite-moe.cpp: granite with routed experts of feed_forward_length (softmax, top-k, renormalised) and an optional shared expert
  {
    architecture: "granitemoe", keyPrefix: "granitemoe", ropeNeox: false, hasQkvBias: false, hasQkNorm: false, defaultRopeFreqBase: 10000, ...LLAMA_LIKE, ropeFactors: "freqs",
    graniteScales: true, moe: { gating: "softmax", normTopK: true, expertWidthKey: "ffn" },
  },
  // openai-moe.cpp: q/k/v/o biases, attention sinks, even layers sliding-window (period 2, rope base of the sliding
  // layers = rope.freq_base unless rope.freq_base_swa), top-k logits then softmax, swiglu_oai experts with biases
  {
    architecture: "gpt-oss", keyPrefix: "gpt-oss", ropeNeox: true, hasQkvBias: true, hasQkNorm: false, defaultRopeFreqBase: 10000, ...LLAMA_LIKE,
    slidingWindowPeriod: 2, gptOss: true, moe: { gating: "softmaxWeight", normTopK: false, expertWidthKey: "expert" },
  },
  // qwen2vl.cpp: qwen2's layers (q/k/v biases, NEOX pairing) with M-RoPE: each rope pair turns by one of 4 position streams
  { architecture: "qwen2vl", keyPrefix: "qwen2vl", ropeNeox: true, hasQkvBias: true, hasQkNorm: false, defaultRopeFreqBase: 10000, ...LLAMA_LIKE, mrope: true },
];

/**
 * The traits of a `general.architecture` value, or undefined when fennec does not support it.
 * @example architectureTraits("qwen2")?.ropeNeox // true
 */
export function architectureTraits(name: string): ArchitectureTraits | undefined {
  return ARCHITECTURES.find((a) => a.architecture === name);
}
