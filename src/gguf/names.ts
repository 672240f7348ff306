/**
 * GGUF metadata keys and tensor names as llama.cpp spells them (src/llama-arch.cpp: LLM_KV_NAMES, LLM_TENSOR_NAMES).
 * Every other file takes its key and tensor strings from here instead of writing literals.
 */

/** Keys without an architecture prefix. */
export const KEY = {
  architecture: "general.architecture",
  name: "general.name",
  alignment: "general.alignment",
  fileType: "general.file_type",
  quantizationVersion: "general.quantization_version",
  tokenizerModel: "tokenizer.ggml.model",
  tokenizerPre: "tokenizer.ggml.pre",
  tokens: "tokenizer.ggml.tokens",
  tokenType: "tokenizer.ggml.token_type",
  scores: "tokenizer.ggml.scores",
  merges: "tokenizer.ggml.merges",
  bosId: "tokenizer.ggml.bos_token_id",
  eosId: "tokenizer.ggml.eos_token_id",
  eotId: "tokenizer.ggml.eot_token_id",
  unkId: "tokenizer.ggml.unknown_token_id",
  padId: "tokenizer.ggml.padding_token_id",
  addBos: "tokenizer.ggml.add_bos_token",
  addEos: "tokenizer.ggml.add_eos_token",
  addSpacePrefix: "tokenizer.ggml.add_space_prefix",
  chatTemplate: "tokenizer.chat_template",
  /** "model" or "adapter" (llama.cpp LLM_KV_GENERAL_TYPE); a LoRA adapter also has adapter.type "lora" and its alpha */
  generalType: "general.type",
  adapterType: "adapter.type",
  adapterLoraAlpha: "adapter.lora.alpha",
} as const;

/** Keys under the architecture's prefix: `${arch}.${ARCH_KEY.x}`; use archKey(). */
const ARCH_KEY = {
  contextLength: "context_length",
  embeddingLength: "embedding_length",
  blockCount: "block_count",
  feedForwardLength: "feed_forward_length",
  headCount: "attention.head_count",
  headCountKv: "attention.head_count_kv",
  keyLength: "attention.key_length",
  valueLength: "attention.value_length",
  rmsEps: "attention.layer_norm_rms_epsilon",
  ropeFreqBase: "rope.freq_base",
  ropeDimensionCount: "rope.dimension_count",
  /** qwen2vl M-RoPE: rope pairs per position stream (t, y, x, e), 4 ints */
  ropeDimensionSections: "rope.dimension_sections",
  ropeScalingType: "rope.scaling.type",
  ropeScalingFactor: "rope.scaling.factor",
  /** the old name of rope.scaling.factor, read when it is absent */
  ropeScaleLinear: "rope.scale_linear",
  ropeScalingAttnFactor: "rope.scaling.attn_factor",
  ropeScalingOriginalContextLength: "rope.scaling.original_context_length",
  vocabSize: "vocab_size",
  slidingWindow: "attention.sliding_window",
  slidingWindowPattern: "attention.sliding_window_pattern",
  ropeFreqBaseSwa: "rope.freq_base_swa",
  finalLogitSoftcapping: "final_logit_softcapping",
  /** embedding models: llama.cpp's llama_pooling_type as a number (0 none, 1 mean, 2 cls, 3 last, 4 rank) */
  poolingType: "pooling_type",
  /** EmbeddingGemma's sentence-transformers projections: in / out widths of 2_Dense and 3_Dense */
  dense2FeatIn: "dense_2_feat_in",
  dense2FeatOut: "dense_2_feat_out",
  dense3FeatIn: "dense_3_feat_in",
  dense3FeatOut: "dense_3_feat_out",
  /** false: bidirectional attention (BERT-like embedding models) */
  attentionCausal: "attention.causal",
  /** mixture of experts (llama.cpp LLM_KV_EXPERT_*): experts per layer, experts each token is routed to, their FFN width */
  expertCount: "expert_count",
  expertUsedCount: "expert_used_count",
  expertFeedForwardLength: "expert_feed_forward_length",
  expertSharedFeedForwardLength: "expert_shared_feed_forward_length",
  expertGroupCount: "expert_group_count",
  /** granite: logits are divided by logit_scale; each branch's output times residual_scale; embeddings times embedding_scale */
  logitScale: "logit_scale",
  residualScale: "residual_scale",
  embeddingScale: "embedding_scale",
  attentionScale: "attention.scale",
  /** granite: false switches rope off in every layer (llama.cpp granite.cpp rope_finetuned) */
  ropeScalingFinetuned: "rope.scaling.finetuned",
} as const;

/** @example archKey("qwen2", "headCountKv") // "qwen2.attention.head_count_kv" */
export function archKey(arch: string, key: keyof typeof ARCH_KEY): string {
  return `${arch}.${ARCH_KEY[key]}`;
}

/** Tensor names; `{n}` is the layer index. Use tensorName(). */
const TENSOR = {
  tokenEmbd: "token_embd.weight",
  /** Llama 3.x: rope frequency divisors [ropeDim / 2], one tensor for every layer */
  ropeFreqs: "rope_freqs.weight",
  /** LongRoPE (phi3): divisors for contexts up to / past rope.scaling.original_context_length */
  ropeFactorsShort: "rope_factors_short.weight",
  ropeFactorsLong: "rope_factors_long.weight",
  outputNorm: "output_norm.weight",
  output: "output.weight",
  attnNorm: "blk.{n}.attn_norm.weight",
  attnQ: "blk.{n}.attn_q.weight",
  attnK: "blk.{n}.attn_k.weight",
  attnV: "blk.{n}.attn_v.weight",
  /** phi3: q, k, v stacked as the rows of one matrix */
  attnQkv: "blk.{n}.attn_qkv.weight",
  attnQBias: "blk.{n}.attn_q.bias",
  attnKBias: "blk.{n}.attn_k.bias",
  attnVBias: "blk.{n}.attn_v.bias",
  attnQNorm: "blk.{n}.attn_q_norm.weight",
  attnKNorm: "blk.{n}.attn_k_norm.weight",
  attnOutput: "blk.{n}.attn_output.weight",
  ffnNorm: "blk.{n}.ffn_norm.weight",
  ffnGate: "blk.{n}.ffn_gate.weight",
  ffnUp: "blk.{n}.ffn_up.weight",
  ffnDown: "blk.{n}.ffn_down.weight",
  attnPostNorm: "blk.{n}.post_attention_norm.weight",
  ffnPostNorm: "blk.{n}.post_ffw_norm.weight",
  /** mixture of experts: the router [dim -> experts] and the experts as 3-D tensors [cols, rows, experts] */
  ffnGateInp: "blk.{n}.ffn_gate_inp.weight",
  ffnGateExps: "blk.{n}.ffn_gate_exps.weight",
  ffnUpExps: "blk.{n}.ffn_up_exps.weight",
  ffnDownExps: "blk.{n}.ffn_down_exps.weight",
  /** gpt-oss: per-head attention sink logits [numHeads], the output projection's bias, the router's and experts' biases */
  attnSinks: "blk.{n}.attn_sinks.weight",
  attnOutputBias: "blk.{n}.attn_output.bias",
  ffnGateInpBias: "blk.{n}.ffn_gate_inp.bias",
  ffnGateExpsBias: "blk.{n}.ffn_gate_exps.bias",
  ffnUpExpsBias: "blk.{n}.ffn_up_exps.bias",
  ffnDownExpsBias: "blk.{n}.ffn_down_exps.bias",
  /** granitemoe (shared): one always-on SwiGLU expert beside the routed ones */
  ffnGateShexp: "blk.{n}.ffn_gate_shexp.weight",
  ffnUpShexp: "blk.{n}.ffn_up_shexp.weight",
  ffnDownShexp: "blk.{n}.ffn_down_shexp.weight",
  /** EmbeddingGemma (--sentence-transformers-dense-modules): 2_Dense [dim -> features] and 3_Dense [features -> dim] */
  dense2: "dense_2.weight",
  dense3: "dense_3.weight",
} as const;

export type TensorKey = keyof typeof TENSOR;

/** @example tensorName("attnQ", 3) // "blk.3.attn_q.weight" */
export function tensorName(key: TensorKey, layer?: number): string {
  const template: string = TENSOR[key];
  if (!template.includes("{n}")) return template;
  if (layer === undefined) throw new Error(`tensorName: ${key} needs a layer index`);
  return template.replace("{n}", String(layer));
}

/** llama.cpp token types (tokenizer.ggml.token_type values, llama_token_type). */
export enum TokenType {
  UNDEFINED = 0, NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6,
}

/** general.file_type values (llama_ftype) for the types make-model writes. */
export const FILE_TYPE: Readonly<Record<string, number>> = {
  f32: 0, f16: 1, q4_0: 2, q4_1: 3, q8_0: 7, q5_0: 8, q5_1: 9, q4_k_m: 15, q5_k_m: 17, q6_k: 18, bf16: 32,
  q4_k: 14 /* Q4_K_S */, q5_k: 16 /* Q5_K_S */, mxfp4: 38 /* MOSTLY_MXFP4_MOE */, mxfp4_moe: 38,
};
