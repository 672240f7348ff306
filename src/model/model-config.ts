/**
 * The shape of a model, read from GGUF metadata by `model/read-model-config.ts`.
 * Everything below the engine reads the model only through this.
 */
export type Architecture =
  | "llama" | "qwen2" | "qwen3" | "gemma3" | "gemma-embedding" | "phi3" | "smollm3" | "qwen3moe" | "olmoe" | "granite" | "granitemoe" | "gpt-oss" | "qwen2vl";

/**
 * How a mixture-of-experts layer turns router logits into the k experts and their weights (llama.cpp
 * llama-graph.cpp build_moe_ffn): "softmax": softmax over every expert, take the k largest probabilities, and
 * (normTopK) divide them by their sum (clamped at 6.1e-5); "softmaxWeight" (gpt-oss): the k largest logits, then a
 * softmax over those k.
 */
export type MoeGating = "softmax" | "softmaxWeight";

export interface MoeConfig {
  /** expert_count */
  readonly expertCount: number;
  /** expert_used_count: k */
  readonly expertUsedCount: number;
  /** rows of each expert's gate / up (expert_feed_forward_length; olmoe: feed_forward_length) */
  readonly expertHiddenDim: number;
  readonly gating: MoeGating;
  /** renormalise the k weights to sum 1 (qwen3moe); olmoe keeps the softmax's probabilities */
  readonly normTopK: boolean;
  /** granitemoe (shared): the always-on shared expert's width (expert_shared_feed_forward_length); absent / 0: none */
  readonly sharedHiddenDim?: number;
  /** gpt-oss: the experts' activation is swiglu_oai (clamped at 7, x * sigmoid(1.702 x) * (up + 1)) and they have biases */
  readonly oaiExperts?: boolean;
}

/** silu: SwiGLU, silu(gate) * up; gelu_tanh: GeGLU, gelu(gate) * up with GELU's tanh approximation (gemma3) */
export type FfnActivation = "silu" | "gelu_tanh";

/** `<arch>.pooling_type` as llama.cpp names it (llama.h enum llama_pooling_type) */
export type GgufPoolingType = "none" | "mean" | "cls" | "last" | "rank";

/** llama.cpp's rope scaling types (LLAMA_ROPE_SCALING_TYPES); read by model/rope-scaling.ts */
export type RopeScalingType = "none" | "linear" | "yarn" | "longrope";

export interface RopeScaling {
  readonly type: RopeScalingType;
  /** 1 / rope.scaling.factor (1 when there is no factor or the type is none) */
  readonly freqScale: number;
  /** rope.scaling.attn_factor (1 when absent) */
  readonly attnFactor: number;
  /** rope.scaling.original_context_length (default: the context length) */
  readonly originalContextLength: number;
}

/** Which tensor holds the per-dim rope divisors: rope_freqs (Llama 3.x), rope_factors_long/short (LongRoPE), none. */
export type RopeFactorTensors = "none" | "freqs" | "longShort";

export interface ModelConfig {
  readonly architecture: Architecture;
  /** general.name, or the file name */
  readonly name: string;
  readonly vocabSize: number;
  /** embedding length */
  readonly dim: number;
  /** feed-forward length */
  readonly hiddenDim: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  /** rope.dimension_count (usually = headDim) */
  readonly ropeDim: number;
  readonly ropeFreqBase: number;
  /** NEOX (split-half) rope: qwen2, qwen3, phi3; llama uses adjacent pairs */
  readonly ropeNeox: boolean;
  // rope scaling, phi3, smollm3 (absent: none, llama-like); rope-scaling.ts and llama.cpp src/models/<arch>.cpp
  /** rope.scaling.* (linear, YaRN, LongRoPE); absent: none */
  readonly ropeScaling?: RopeScaling;
  /** where the per-dim rope divisors are read from (each tensor optional); absent: none */
  readonly ropeFactors?: RopeFactorTensors;
  /** every n-th layer (1-based) has no rope (smollm3: 4); absent / 0: all layers rope */
  readonly noRopeLayerStep?: number;
  /** qwen2vl: M-RoPE, rope pairs per position stream [t, y, x, e] (rope.dimension_sections; model/mrope.ts); absent: plain rope */
  readonly ropeSections?: readonly [number, number, number, number];
  /** phi3: ffn_up is [gate; up] (2 x hiddenDim rows), no ffn_gate */
  readonly fusedGateUp?: boolean;
  /** phi3: attn_qkv may replace attn_q/k/v */
  readonly fusedQkv?: boolean;
  readonly rmsEps: number;
  readonly contextLength: number;
  /** no output.weight: the LM head is token_embd */
  readonly tiedEmbeddings: boolean;
  /** qwen2: attn_{q,k,v}.bias */
  readonly hasQkvBias: boolean;
  /** qwen3: attn_{q,k}_norm */
  readonly hasQkNorm: boolean;
  /** olmoe: the QK-norm is one RMSNorm over all of q (k), weights [numHeads * headDim], not one per head */
  readonly qkNormFullWidth?: boolean;
  /** mixture of experts: every layer's FFN is routed experts (absent: a dense FFN) */
  readonly moe?: MoeConfig;
  /** granite: each branch's output (attention, FFN) is multiplied by this before its residual add; absent: 1 */
  readonly residualScale?: number;
  /** granite: the logits are divided by this; absent: 1 */
  readonly logitScale?: number;
  /**
   * gpt-oss: each head's learned sink logit joins its softmax's denominator (attn_sinks), the output projection has a
   * bias, and the FFN's norm is post_attention_norm (a backend needs Backend.attentionSinks to run it)
   */
  readonly attentionSinks?: boolean;
  // gemma3 (absent: llama-like). Fields below follow llama.cpp src/models/gemma3.cpp.
  /** default silu */
  readonly ffnActivation?: FfnActivation;
  /** the token embeddings are multiplied by this (gemma3: sqrt(dim)); default 1 */
  readonly embeddingScale?: number;
  /** post_attention_norm / post_ffw_norm on each branch's output before the residual add */
  readonly hasPostNorms?: boolean;
  /** attention.sliding_window: a sliding layer's query at position p sees keys p - window + 1 .. p; 0 / absent: none */
  readonly slidingWindow?: number;
  /** [numLayers] true for the sliding-window layers (they use ropeFreqBaseSwa) */
  readonly slidingLayers?: readonly boolean[];
  /** rope base of the sliding layers (gemma3: rope.freq_base_swa, default 10000) */
  readonly ropeFreqBaseSwa?: number;
  /** attention score scale; default 1 / sqrt(headDim) (gemma3 27B: 1 / sqrt(dim / numHeads), query_pre_attn_scalar) */
  readonly attentionScale?: number;
  /**
   * gemma-embedding: bidirectional attention (llama.cpp causal_attn = false): every row sees every position of its
   * sequence, and a sliding layer's row at p sees the positions within slidingWindow / 2 of p on either side (llama.cpp
   * LLAMA_SWA_TYPE_SYMMETRIC); such a model only embeds, and a prompt is computed in one step. Absent: causal.
   */
  readonly bidirectional?: boolean;
  /**
   * gemma-embedding converted with --sentence-transformers-dense-modules: dense_2_feat_out, the width between the two
   * projections applied to the pooled vector (llama.cpp build_dense_out); absent: no projections
   */
  readonly denseFeatures?: number;
  /** an embedding model's `<arch>.pooling_type`; absent when the GGUF has none (a generative model) */
  readonly poolingType?: GgufPoolingType;
}

/** The rope base of layer l (sliding-window layers have their own). */
export function layerRopeFreqBase(config: ModelConfig, layer: number): number {
  return config.slidingLayers?.[layer] === true ? (config.ropeFreqBaseSwa ?? config.ropeFreqBase) : config.ropeFreqBase;
}

/** The sliding window of layer l, or 0 for a full-attention layer. */
export function layerSlidingWindow(config: ModelConfig, layer: number): number {
  return config.slidingLayers?.[layer] === true ? (config.slidingWindow ?? 0) : 0;
}
