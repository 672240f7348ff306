/**
 * The real shapes make-model writes random weights in (from each model's config.json), plus a tiny-* variant of each
 * with the same architecture and vocabulary but few layers and small dims, for tests. Dims of the tiny variants are
 * multiples of 256 so every weight type, K-quants included, applies without fallbacks.
 */
import type { Architecture } from "../src/model/model-config.ts";
import { gemma3VocabPath } from "./gemma3-vocab.ts";
import { llamaVocabPath } from "./llama-vocab.ts";
import { gptOssVocabPath } from "./gpt-oss-vocab.ts";
import { phi4MiniVocabPath } from "./phi4-mini-vocab.ts";
import { smolvlmVocabPath } from "./smolvlm-vocab.ts";
import { qwen25vlVocabPath } from "./qwen25vl-vocab.ts";

export interface ModelShape {
  readonly architecture: Architecture;
  /** the llama.cpp vocab GGUF (models/ggml-vocab-<vocab>.gguf) whose tokenizer metadata is copied; gemma3: scripts/gemma3-vocab.ts */
  readonly vocab: "gpt-2" | "qwen2" | "llama-bpe" | "gemma3" | "phi-3" | "phi-4-mini" | "gpt-neox" | "gpt-oss" | "smolvlm" | "qwen2.5-vl";
  readonly dim: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  /** attention head size; dim / numHeads unless the model says otherwise (qwen3) */
  readonly headDim: number;
  /** rope.dimension_count when only part of each head rotates (Phi-4-mini: partial_rotary_factor 0.75); default headDim */
  readonly ropeDim?: number;
  readonly hiddenDim: number;
  readonly ropeFreqBase: number;
  readonly rmsEps: number;
  readonly contextLength: number;
  readonly tiedEmbeddings: boolean;
  /** qwen2: attn_{q,k,v}.bias */
  readonly qkvBias: boolean;
  /** qwen3, gemma3: attn_{q,k}_norm */
  readonly qkNorm: boolean;
  /** rope scaling as the model's config.json has it (written the way llama.cpp's converter writes it) */
  readonly ropeScaling?: ShapeRopeScaling;
  /** embedding models: `<arch>.pooling_type` (llama.cpp's enum: mean 1, cls 2, last 3); absent: a generative model */
  readonly poolingType?: "mean" | "cls" | "last";
  /** gemma3: post_attention_norm and post_ffw_norm */
  readonly postNorms?: boolean;
  /** gemma3: attention.sliding_window (llama.cpp's default pattern: every 6th layer global) */
  readonly slidingWindow?: number;
  /** EmbeddingGemma: the sentence-transformers projections' width (dense_2 dim -> F, dense_3 F -> dim); absent: none */
  readonly denseFeatures?: number;
  /**
   * mixture of experts: expert_count, expert_used_count and each expert's width (config.json num_experts,
   * num_experts_per_tok, moe_intermediate_size; olmoe's experts are intermediate_size wide = hiddenDim)
   */
  readonly moe?: { readonly experts: number; readonly used: number; readonly expertHiddenDim: number };
  /** qwen2vl: M-RoPE's rope.dimension_sections (config.json rope_scaling.mrope_section, padded to 4 by the converter) */
  readonly ropeSections?: readonly [number, number, number, number];
  /** granite: embedding_scale, residual_scale, attention.scale, logit_scale (config.json's *_multiplier, logits_scaling) */
  readonly graniteScales?: { readonly embedding: number; readonly residual: number; readonly attention: number; readonly logit: number };
}

/** The vocab GGUF a shape copies its tokenizer from. */
export function vocabPath(vocab: ModelShape["vocab"]): string {
  if (vocab === "smolvlm") return smolvlmVocabPath();
  if (vocab === "qwen2.5-vl") return qwen25vlVocabPath();
  return vocab === "gemma3" ? gemma3VocabPath() : vocab === "phi-4-mini" ? phi4MiniVocabPath() : vocab === "gpt-oss" ? gptOssVocabPath() : llamaVocabPath(vocab);
}

/**
 * config.json's rope_scaling. llama3: the converter turns it into rope_freqs.weight (conversion/llama.py
 * generate_extra_tensors); longrope: rope_factors_short/long plus rope.scaling.attn_factor (conversion/phi.py);
 * yarn / linear: rope.scaling.type, .factor, .original_context_length.
 */
export type ShapeRopeScaling =
  | { readonly type: "llama3"; readonly factor: number; readonly lowFreqFactor: number; readonly highFreqFactor: number; readonly originalContextLength: number }
  | { readonly type: "longrope"; readonly originalContextLength: number }
  | { readonly type: "yarn" | "linear"; readonly factor: number; readonly originalContextLength: number };

const SMOLLM2_135M: ModelShape = {
  architecture: "llama", vocab: "gpt-2", dim: 576, numLayers: 30, numHeads: 9, numKvHeads: 3, headDim: 64, hiddenDim: 1536,
  ropeFreqBase: 100000, rmsEps: 1e-5, contextLength: 8192, tiedEmbeddings: true, qkvBias: false, qkNorm: false,
};
const QWEN25_05B: ModelShape = {
  architecture: "qwen2", vocab: "qwen2", dim: 896, numLayers: 24, numHeads: 14, numKvHeads: 2, headDim: 64, hiddenDim: 4864,
  ropeFreqBase: 1000000, rmsEps: 1e-6, contextLength: 32768, tiedEmbeddings: true, qkvBias: true, qkNorm: false,
};
const QWEN3_06B: ModelShape = {
  architecture: "qwen3", vocab: "qwen2", dim: 1024, numLayers: 28, numHeads: 16, numKvHeads: 8, headDim: 128, hiddenDim: 3072,
  ropeFreqBase: 1000000, rmsEps: 1e-6, contextLength: 40960, tiedEmbeddings: true, qkvBias: false, qkNorm: true,
};
const LLAMA32_1B: ModelShape = {
  architecture: "llama", vocab: "llama-bpe", dim: 2048, numLayers: 16, numHeads: 32, numKvHeads: 8, headDim: 64, hiddenDim: 8192,
  ropeFreqBase: 500000, rmsEps: 1e-5, contextLength: 131072, tiedEmbeddings: true, qkvBias: false, qkNorm: false,
  ropeScaling: { type: "llama3", factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 8192 },
};
/** microsoft/Phi-3.5-mini-instruct: MHA, untied, LongRoPE over an original 4k context (its 32,064-token SPM vocab) */
const PHI35_MINI: ModelShape = {
  architecture: "phi3", vocab: "phi-3", dim: 3072, numLayers: 32, numHeads: 32, numKvHeads: 32, headDim: 96, hiddenDim: 8192,
  ropeFreqBase: 10000, rmsEps: 1e-5, contextLength: 131072, tiedEmbeddings: false, qkvBias: false, qkNorm: false,
  ropeScaling: { type: "longrope", originalContextLength: 4096 },
};
/**
 * microsoft/Phi-4-mini-instruct: phi3 with GQA 24/8, partial rotary 0.75 (96 of 128 dims; conversion/phi.py writes
 * rope.dimension_count), LongRoPE over an original 4k, tied embeddings, the 200,064-token o200k vocabulary
 * (scripts/phi4-mini-vocab.ts)
 */
const PHI4_MINI: ModelShape = {
  architecture: "phi3", vocab: "phi-4-mini", dim: 3072, numLayers: 32, numHeads: 24, numKvHeads: 8, headDim: 128, ropeDim: 96, hiddenDim: 8192,
  ropeFreqBase: 10000, rmsEps: 1e-5, contextLength: 131072, tiedEmbeddings: true, qkvBias: false, qkNorm: false,
  ropeScaling: { type: "longrope", originalContextLength: 4096 },
};
/** HuggingFaceTB/SmolLM3-3B: Llama 3's tokenizer, GQA 16/4, tied, no rope in every 4th layer */
const SMOLLM3_3B: ModelShape = {
  architecture: "smollm3", vocab: "llama-bpe", dim: 2048, numLayers: 36, numHeads: 16, numKvHeads: 4, headDim: 128, hiddenDim: 11008,
  ropeFreqBase: 5000000, rmsEps: 1e-6, contextLength: 65536, tiedEmbeddings: true, qkvBias: false, qkNorm: false,
};
/** Llama 3.1 8B: 4.9 GB at q4_k_m, 8.5 GB at q8_0, larger than one 4 GiB wasm32 memory (backend/wasm/memory-plan.ts) */
const LLAMA31_8B: ModelShape = {
  architecture: "llama", vocab: "llama-bpe", dim: 4096, numLayers: 32, numHeads: 32, numKvHeads: 8, headDim: 128, hiddenDim: 14336,
  ropeFreqBase: 500000, rmsEps: 1e-5, contextLength: 131072, tiedEmbeddings: false, qkvBias: false, qkNorm: false,
  ropeScaling: { type: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 8192 },
};
/** Qwen2.5 7B: 4.7 GB at q4_k_m */
const QWEN25_7B: ModelShape = {
  architecture: "qwen2", vocab: "qwen2", dim: 3584, numLayers: 28, numHeads: 28, numKvHeads: 4, headDim: 128, hiddenDim: 18944,
  ropeFreqBase: 1000000, rmsEps: 1e-6, contextLength: 32768, tiedEmbeddings: false, qkvBias: true, qkNorm: false,
};

// gemma-3-270m / gemma-3-1b config.json: head_dim 256, one KV head, sliding_window 512, rope_theta 1e6 (local 1e4)
const GEMMA3_270M: ModelShape = {
  architecture: "gemma3", vocab: "gemma3", dim: 640, numLayers: 18, numHeads: 4, numKvHeads: 1, headDim: 256, hiddenDim: 2048,
  ropeFreqBase: 1000000, rmsEps: 1e-6, contextLength: 32768, tiedEmbeddings: true, qkvBias: false, qkNorm: true, postNorms: true, slidingWindow: 512,
};
const GEMMA3_1B: ModelShape = {
  ...GEMMA3_270M, dim: 1152, numLayers: 26, hiddenDim: 6912,
};

/**
 * google/embeddinggemma-300m (config.json, modules.json): gemma3's layers with bidirectional attention, 3 heads of 256,
 * one KV head, sliding_window 512 (llama.cpp's converter keeps the config's 512), context 2048, mean pooling, and the
 * sentence-transformers 2_Dense / 3_Dense projections 768 -> 3072 -> 768 (written as with --sentence-transformers-dense-modules)
 */
const EMBEDDINGGEMMA_300M: ModelShape = {
  architecture: "gemma-embedding", vocab: "gemma3", dim: 768, numLayers: 24, numHeads: 3, numKvHeads: 1, headDim: 256, hiddenDim: 1152,
  ropeFreqBase: 1000000, rmsEps: 1e-6, contextLength: 2048, tiedEmbeddings: true, qkvBias: false, qkNorm: true, postNorms: true, slidingWindow: 512,
  poolingType: "mean", denseFeatures: 3072,
};

/**
 * Qwen/Qwen3-30B-A3B config.json: 48 layers of 32 query heads (128 wide) over 4 KV heads, 128 experts of 768, 8 per
 * token, renormalised (norm_topk_prob), untied, rope theta 1e6
 */
const QWEN3_30B_A3B: ModelShape = {
  architecture: "qwen3moe", vocab: "qwen2", dim: 2048, numLayers: 48, numHeads: 32, numKvHeads: 4, headDim: 128, hiddenDim: 6144,
  ropeFreqBase: 1000000, rmsEps: 1e-6, contextLength: 40960, tiedEmbeddings: false, qkvBias: false, qkNorm: true,
  moe: { experts: 128, used: 8, expertHiddenDim: 768 },
};
/**
 * allenai/OLMoE-1B-7B-0924 config.json: 16 layers of 16 heads (128 wide, MHA), 64 experts of 1024, 8 per token, not
 * renormalised, QK-norm over the whole q / k, untied, the GPT-NeoX-20B tokenizer (50,304 rows: vocab_size)
 */
const OLMOE_1B_7B: ModelShape = {
  architecture: "olmoe", vocab: "gpt-neox", dim: 2048, numLayers: 16, numHeads: 16, numKvHeads: 16, headDim: 128, hiddenDim: 1024,
  ropeFreqBase: 10000, rmsEps: 1e-5, contextLength: 4096, tiedEmbeddings: false, qkvBias: false, qkNorm: true,
  moe: { experts: 64, used: 8, expertHiddenDim: 1024 },
};

/**
 * openai/gpt-oss-20b config.json: 24 layers of 64 query heads (64 wide) over 8 KV heads, dim 2880, 32 experts of 2880,
 * 4 per token, sliding window 128 on the even layers, attention sinks, q/k/v/o and expert biases, untied; its
 * o200k_harmony vocabulary and Harmony chat template (gpt-oss-vocab.ts)
 */
const GPT_OSS_20B: ModelShape = {
  architecture: "gpt-oss", vocab: "gpt-oss", dim: 2880, numLayers: 24, numHeads: 64, numKvHeads: 8, headDim: 64, hiddenDim: 2880,
  ropeFreqBase: 150000, rmsEps: 1e-5, contextLength: 131072, tiedEmbeddings: false, qkvBias: true, qkNorm: false, slidingWindow: 128,
  moe: { experts: 32, used: 4, expertHiddenDim: 2880 },
};
/**
 * ibm-granite/granite-3.1-3b-a800m config.json: 32 layers of 24 heads (64 wide) over 8 KV heads, 40 experts of 512,
 * 8 per token, tied, Granite's multipliers; its 49k vocabulary is not among the vocab files here: gpt-2's stands in
 */
const GRANITE_31_3B_A800M: ModelShape = {
  architecture: "granitemoe", vocab: "gpt-2", dim: 1536, numLayers: 32, numHeads: 24, numKvHeads: 8, headDim: 64, hiddenDim: 512,
  ropeFreqBase: 10000, rmsEps: 1e-6, contextLength: 131072, tiedEmbeddings: true, qkvBias: false, qkNorm: false,
  moe: { experts: 40, used: 8, expertHiddenDim: 512 }, graniteScales: { embedding: 12, residual: 0.22, attention: 0.015625, logit: 6 },
};

/**
 * Few layers, 256-wide: 4 heads of 64 (qwen3 keeps its head size of 128, wider than dim / heads), GQA kept, rope
 * scaling kept (LongRoPE's long factors need a context past the original 4k: 8192).
 */
const tiny = (s: ModelShape, numKvHeads: number, numLayers = 2): ModelShape => ({
  ...s, dim: 256, numLayers, numHeads: 4, numKvHeads, headDim: s.headDim === 128 && s.qkNorm ? 128 : 64, hiddenDim: 512,
  contextLength: s.ropeScaling?.type === "longrope" ? 8192 : 2048,
});

/** Qwen3-Embedding-0.6B: the qwen3-0.6b decoder, last-token pooling (its sentence-transformers config), context 32k. */
const QWEN3_EMBEDDING_06B: ModelShape = { ...QWEN3_06B, contextLength: 32768, poolingType: "last" };

// ---- vision-language models: the language model above plus a projector (mmproj) GGUF ----

/** google/gemma-3-4b-it text_config: head_dim 256, GQA 8/4, sliding_window 1024, linear rope scaling 8 on global layers */
const GEMMA3_4B: ModelShape = {
  ...GEMMA3_270M, dim: 2560, numLayers: 34, numHeads: 8, numKvHeads: 4, headDim: 256, hiddenDim: 10240, contextLength: 131072,
  slidingWindow: 1024, ropeScaling: { type: "linear", factor: 8, originalContextLength: 16384 },
};

/** Qwen/Qwen2.5-VL-3B-Instruct text_config: GQA 16/2, tied, M-RoPE sections [16, 24, 24] over 64 rope pairs; its vocabulary: scripts/qwen25vl-vocab.ts */
const QWEN25_VL_3B: ModelShape = {
  architecture: "qwen2vl", vocab: "qwen2.5-vl", dim: 2048, numLayers: 36, numHeads: 16, numKvHeads: 2, headDim: 128, hiddenDim: 11008,
  ropeFreqBase: 1000000, rmsEps: 1e-6, contextLength: 128000, tiedEmbeddings: true, qkvBias: true, qkNorm: false, ropeSections: [16, 24, 24, 0],
};

/**
 * The vision encoder and projector of a vision-language shape, as the HF vision_config and preprocessor_config.json
 * give them; scripts/random-mmproj.ts writes the mmproj GGUF as conversion/base.py MmprojModel and conversion/gemma.py
 * Gemma3VisionModel do.
 */
export interface VisionShape {
  /** clip.projector_type */
  readonly projector: "gemma3" | "idefics3" | "qwen2.5vl_merger";
  readonly imageSize: number;
  readonly patchSize: number;
  readonly dim: number;
  readonly ffnDim: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly eps: number;
  readonly imageMean: readonly [number, number, number];
  readonly imageStd: readonly [number, number, number];
  /** preprocessor_config image_seq_length: the converter derives clip.vision.projector.scale_factor from it */
  readonly imageSeqLength: number;
  /** Idefics3: config.json scale_factor (the pixel shuffle; clip.vision.projector.scale_factor) */
  readonly scaleFactor?: number;
  /** Idefics3: preprocessor_config size.longest_edge (clip.vision.preproc_image_size) */
  readonly longestEdge?: number;
  /** Qwen2.5-VL: fullatt_block_indexes[0] + 1 (clip.vision.n_wa_pattern: every n-th layer attends fully, the rest in windows) */
  readonly windowPattern?: number;
}

/** SigLIP so400m-patch14 at 896 px (gemma-3-4b-it vision_config), 256 image tokens */
const SIGLIP_GEMMA3: VisionShape = {
  projector: "gemma3", imageSize: 896, patchSize: 14, dim: 1152, ffnDim: 4304, numLayers: 27, numHeads: 16, eps: 1e-6,
  imageMean: [0.5, 0.5, 0.5], imageStd: [0.5, 0.5, 0.5], imageSeqLength: 256,
};

// ---- SmolVLM (Idefics3): HuggingFaceTB/SmolVLM-256M-Instruct and -500M-Instruct config.json text_config ----
// (SmolLM2-style llama: rope_theta 100000, rms_norm_eps 1e-5, 8192 positions, tied embeddings). The real SmolVLM
// tokenizer (SmolLM2's 49,152 pieces plus its image tokens, 49,280 ids) is in no package here: smolvlm-vocab.ts writes
// a stand-in with gpt-2's pieces (as smollm2-135m above) plus SmolVLM's added tokens and its chat template.
const SMOLVLM_256M: ModelShape = {
  architecture: "llama", vocab: "smolvlm", dim: 576, numLayers: 30, numHeads: 9, numKvHeads: 3, headDim: 64, hiddenDim: 1536,
  ropeFreqBase: 100000, rmsEps: 1e-5, contextLength: 8192, tiedEmbeddings: true, qkvBias: false, qkNorm: false,
};
const SMOLVLM_500M: ModelShape = { ...SMOLVLM_256M, dim: 960, numLayers: 32, numHeads: 15, numKvHeads: 5, hiddenDim: 2560 };
/**
 * SmolVLM's vision_config (SigLIP-B/16: 768 wide, 12 layers of 12 heads, FFN 3072, 512 px; no layer_norm_eps in it,
 * so conversion/smolvlm.py writes its default 1e-5), scale_factor 4 (32 x 32 patches to 8 x 8 = 64 tokens per
 * tile), preprocessor_config size.longest_edge 2048 (up to 4 x 4 tiles of 512 plus the overview), mean and std 0.5.
 */
const SIGLIP_SMOLVLM: VisionShape = {
  projector: "idefics3", imageSize: 512, patchSize: 16, dim: 768, ffnDim: 3072, numLayers: 12, numHeads: 12, eps: 1e-5,
  imageMean: [0.5, 0.5, 0.5], imageStd: [0.5, 0.5, 0.5], imageSeqLength: 64, scaleFactor: 4, longestEdge: 2048,
};

/**
 * Qwen2.5-VL-3B-Instruct vision_config: depth 32, hidden 1280, intermediate 3420, 16 heads, patch 14, merge 2, window
 * 112 px, fullatt_block_indexes [7, 15, 23, 31]; the converter writes image_size 560 (its default) and CLIP's mean / std.
 * imageSeqLength is not written for this projector (its image token count follows each image's size).
 */
const QWEN25_VL_VISION: VisionShape = {
  projector: "qwen2.5vl_merger", imageSize: 560, patchSize: 14, dim: 1280, ffnDim: 3420, numLayers: 32, numHeads: 16, eps: 1e-6,
  imageMean: [0.48145466, 0.4578275, 0.40821073], imageStd: [0.26862954, 0.26130258, 0.27577711], imageSeqLength: 0, windowPattern: 8,
};

/** Language-model halves of the vision shapes (spread into MODEL_SHAPES). */
const VISION_LANGUAGE_SHAPES: Readonly<Record<string, ModelShape>> = {
  "smolvlm-256m": SMOLVLM_256M,
  "smolvlm-500m": SMOLVLM_500M,
  // the tiny SmolLM2 language model (2 layers, 256 wide) under a real-width SigLIP
  "tiny-smolvlm-256m": { ...tiny(SMOLVLM_256M, 1) },
  "gemma3-4b": GEMMA3_4B,
  // the tiny gemma3 language model (6 layers, 256 wide) under a real-width SigLIP
  "tiny-gemma3-4b": { ...tiny(GEMMA3_270M, 1), numLayers: 6, slidingWindow: 64 },
  "qwen2.5-vl-3b": QWEN25_VL_3B,
  // 256 wide in 2 heads of 128 (qwen2vl's attn_q / attn_output are n_embd x n_embd), so the real sections [16, 24, 24] fit
  "tiny-qwen2.5-vl-3b": { ...tiny(QWEN25_VL_3B, 1), numHeads: 2, headDim: 128 },
};

/**
 * The vision half of each vision-language shape. The tiny variant keeps SigLIP's real widths (1152, 4304, 16 heads)
 * with 2 layers at 112 px (8 x 8 patches, pooled 2 x 2: 16 image tokens, so the converter writes scale_factor 2).
 */
export const VISION_SHAPES: Readonly<Record<string, VisionShape>> = {
  "smolvlm-256m": SIGLIP_SMOLVLM,
  "smolvlm-500m": SIGLIP_SMOLVLM,
  // real widths (768, 3072, 12 heads, patch 16, scale 4) with 2 layers at 128 px: 8 x 8 patches shuffled to 2 x 2 =
  // 4 tokens per tile; longest edge 256 (up to 2 x 2 tiles plus the overview)
  "tiny-smolvlm-256m": { ...SIGLIP_SMOLVLM, imageSize: 128, numLayers: 2, imageSeqLength: 4, longestEdge: 256 },
  "gemma3-4b": SIGLIP_GEMMA3,
  "tiny-gemma3-4b": { ...SIGLIP_GEMMA3, imageSize: 112, numLayers: 2, imageSeqLength: 16 },
  "qwen2.5-vl-3b": QWEN25_VL_VISION,
  // the real widths in 2 layers: layer 0 in windows, layer 1 full (fullatt_block_indexes [1])
  "tiny-qwen2.5-vl-3b": { ...QWEN25_VL_VISION, numLayers: 2, windowPattern: 2 },
};

export const MODEL_SHAPES: Readonly<Record<string, ModelShape>> = {
  "smollm2-135m": SMOLLM2_135M,
  "qwen2.5-0.5b": QWEN25_05B,
  "qwen3-0.6b": QWEN3_06B,
  "llama-3.2-1b": LLAMA32_1B,
  "llama-3.1-8b": LLAMA31_8B,
  "qwen2.5-7b": QWEN25_7B,
  "phi-3.5-mini": PHI35_MINI,
  "phi-4-mini": PHI4_MINI,
  "smollm3-3b": SMOLLM3_3B,
  "tiny-smollm2-135m": tiny(SMOLLM2_135M, 2),
  "tiny-qwen2.5-0.5b": tiny(QWEN25_05B, 1),
  "tiny-qwen3-0.6b": tiny(QWEN3_06B, 2),
  "tiny-llama-3.2-1b": tiny(LLAMA32_1B, 1),
  "qwen3-embedding-0.6b": QWEN3_EMBEDDING_06B,
  "tiny-qwen3-embedding-0.6b": tiny(QWEN3_EMBEDDING_06B, 2),
  "gemma3-270m": GEMMA3_270M,
  "gemma3-1b": GEMMA3_1B,
  // 6 layers: five sliding-window layers (window 64) and a global one
  "tiny-gemma3-270m": { ...tiny(GEMMA3_270M, 1), numLayers: 6, slidingWindow: 64 },
  "embeddinggemma-300m": EMBEDDINGGEMMA_300M,
  // 6 layers: five symmetric-window layers (window 64: 32 positions either side) and a bidirectional global one
  "tiny-embeddinggemma-300m": { ...tiny(EMBEDDINGGEMMA_300M, 1), numLayers: 6, slidingWindow: 64, denseFeatures: 1024 },
  "tiny-phi-3.5-mini": tiny(PHI35_MINI, 4),
  // 4 heads of 64 over 2 KV heads, 48 of each head's dims rotating
  "tiny-phi-4-mini": { ...tiny(PHI4_MINI, 2), ropeDim: 48 },
  // 4 layers so that one (the 4th) has no rope
  "tiny-smollm3-3b": tiny(SMOLLM3_3B, 1, 4),
  // mixture of experts at real width; --layers 1..2 keeps them small (qwen3-30b-a3b: 0.6 GB a layer at q8_0)
  "qwen3-30b-a3b": QWEN3_30B_A3B,
  "olmoe-1b-7b": OLMOE_1B_7B,
  "gpt-oss-20b": GPT_OSS_20B,
  "granite-3.1-3b-a800m": GRANITE_31_3B_A800M,
  ...VISION_LANGUAGE_SHAPES,
};

