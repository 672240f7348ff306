/**
 * Tiny random models built in memory as a GgufFile (no writer, no disk), for the model tests: every architecture
 * flag, tied or untied output, GQA, any weight type of the table for the matrices.
 */
import { GgufValueType, type GgufFile, type GgufMetadataEntry, type GgufTensorInfo } from "../../src/gguf/gguf-file.ts";
import { archKey, KEY, tensorName, type TensorKey } from "../../src/gguf/names.ts";
import type { ModelConfig } from "../../src/model/model-config.ts";
import { byteSize, GgmlType, weightType } from "../../src/tensor/dtypes.ts";
import { rng } from "../helpers/prng.ts";

/** The dimensions of a tiny model (fields of ModelConfig) and whether its output matrix is the embedding. */
export interface TinyShape extends Pick<ModelConfig, "architecture" | "vocabSize" | "dim" | "hiddenDim" | "numLayers" | "numHeads" | "numKvHeads" | "headDim" | "contextLength"> {
  readonly tied: boolean;
  /** gemma3: attention.sliding_window and attention.sliding_window_pattern (a period; llama.cpp's default is 6) */
  readonly slidingWindow?: number;
  readonly slidingWindowPattern?: number;
  /**
   * the rope divisor tensors the architecture reads (llama: rope_freqs; phi3: rope_factors_short/long): true for
   * random values in [1, 9), or the tensors' values
   */
  readonly ropeFactors?: boolean | Readonly<Partial<Record<RopeFactorKey, Float32Array>>>;
  /** gemma-embedding: the width of the dense_2 / dense_3 projections (absent: none) */
  readonly denseFeatures?: number;
  /**
   * mixture of experts (qwen3moe, olmoe, granitemoe): expert_count, expert_used_count, each expert's width (written as
   * expert_feed_forward_length for qwen3moe; olmoe and granitemoe read feed_forward_length = hiddenDim) and a shared
   * expert's width (granitemoe)
   */
  readonly experts?: { readonly count: number; readonly used: number; readonly hiddenDim: number; readonly shared?: number };
  /** extra metadata (rope.scaling.*), without the architecture prefix: { "rope.scaling.type": str("yarn") } */
  readonly archMetadata?: Readonly<Record<string, GgufMetadataEntry>>;
}

/** Small seeded generator (mulberry32, shared with the conformance suite): the same seed gives the same model on every machine. */
export const seededRandom = rng;

const u32 = (value: number): GgufMetadataEntry => ({ type: GgufValueType.UINT32, value });
const f32 = (value: number): GgufMetadataEntry => ({ type: GgufValueType.FLOAT32, value });
const str = (value: string): GgufMetadataEntry => ({ type: GgufValueType.STRING, value });

interface PlannedTensor {
  readonly name: string;
  /** ne0 first */
  readonly shape: number[];
  /** a ggml type id (any number, so error tests can use types fennec lacks) */
  readonly type: number;
  /** what the random values look like */
  readonly kind: "matrix" | "norm" | "bias" | "ropeFactor" | "sink";
  /** fixed values instead of random ones */
  readonly values?: Float32Array;
}

type RopeFactorKey = "ropeFreqs" | "ropeFactorsShort" | "ropeFactorsLong";

/** The tensors a shape implies, with llama.cpp names. Matrices get `matrixType`; norms and biases stay f32. */
function planTensors(s: TinyShape, matrixType: GgmlType): PlannedTensor[] {
  const qDim = s.numHeads * s.headDim;
  const kvDim = s.numKvHeads * s.headDim;
  const m = (name: string, cols: number, rows: number): PlannedTensor => ({ name, shape: [cols, rows], type: matrixType, kind: "matrix" });
  const v = (name: string, n: number, kind: "norm" | "bias"): PlannedTensor => ({ name, shape: [n], type: GgmlType.F32, kind });
  const out: PlannedTensor[] = [m(tensorName("tokenEmbd"), s.dim, s.vocabSize)];
  const factor = (key: RopeFactorKey): PlannedTensor => ({ name: tensorName(key), shape: [s.headDim / 2], type: GgmlType.F32, kind: "ropeFactor" });
  if (s.ropeFactors === true) out.push(...(s.architecture === "phi3" ? [factor("ropeFactorsShort"), factor("ropeFactorsLong")] : [factor("ropeFreqs")]));
  else if (s.ropeFactors) {
    for (const [key, values] of Object.entries(s.ropeFactors)) out.push({ ...factor(key as RopeFactorKey), shape: [values.length], values });
  }
  // phi3 stacks q, k, v into attn_qkv and [gate; up] into ffn_up, as its GGUFs do
  const fused = s.architecture === "phi3";
  for (let l = 0; l < s.numLayers; l++) {
    const n = (key: TensorKey): string => tensorName(key, l);
    out.push(v(n("attnNorm"), s.dim, "norm"));
    if (fused) out.push(m(n("attnQkv"), s.dim, qDim + 2 * kvDim));
    else out.push(m(n("attnQ"), s.dim, qDim), m(n("attnK"), s.dim, kvDim), m(n("attnV"), s.dim, kvDim));
    if (s.architecture === "qwen2" || s.architecture === "qwen2vl") out.push(v(n("attnQBias"), qDim, "bias"), v(n("attnKBias"), kvDim, "bias"), v(n("attnVBias"), kvDim, "bias"));
    const gemma = s.architecture === "gemma3" || s.architecture === "gemma-embedding";
    if (s.architecture === "qwen3" || s.architecture === "qwen3moe" || gemma) out.push(v(n("attnQNorm"), s.headDim, "norm"), v(n("attnKNorm"), s.headDim, "norm"));
    // olmoe: one QK-norm over all heads
    if (s.architecture === "olmoe") out.push(v(n("attnQNorm"), qDim, "norm"), v(n("attnKNorm"), kvDim, "norm"));
    // gpt-oss (openai-moe.cpp): q/k/v/o biases, the heads' sinks, post_attention_norm as the FFN's norm
    const oss = s.architecture === "gpt-oss";
    out.push(m(n("attnOutput"), qDim, s.dim), v(n(oss ? "attnPostNorm" : "ffnNorm"), s.dim, "norm"));
    if (oss) {
      out.push(v(n("attnQBias"), qDim, "bias"), v(n("attnKBias"), kvDim, "bias"), v(n("attnVBias"), kvDim, "bias"), v(n("attnOutputBias"), s.dim, "bias"));
      out.push({ ...v(n("attnSinks"), s.numHeads, "norm"), kind: "sink" });
    }
    const e = s.experts;
    if (e !== undefined) {
      const stacked = (name: string, cols: number, rows: number): PlannedTensor => ({ name, shape: [cols, rows, e.count], type: matrixType, kind: "matrix" });
      out.push({ ...m(n("ffnGateInp"), s.dim, e.count), type: GgmlType.F32 });
      if (oss) {
        const perExpert = (name: string, width: number): PlannedTensor => ({ name, shape: [width, e.count], type: GgmlType.F32, kind: "bias" });
        out.push(v(n("ffnGateInpBias"), e.count, "bias"), perExpert(n("ffnGateExpsBias"), e.hiddenDim), perExpert(n("ffnUpExpsBias"), e.hiddenDim), perExpert(n("ffnDownExpsBias"), s.dim));
      }
      out.push(stacked(n("ffnGateExps"), s.dim, e.hiddenDim), stacked(n("ffnUpExps"), s.dim, e.hiddenDim), stacked(n("ffnDownExps"), e.hiddenDim, s.dim));
      if (e.shared !== undefined) out.push(m(n("ffnGateShexp"), s.dim, e.shared), m(n("ffnUpShexp"), s.dim, e.shared), m(n("ffnDownShexp"), e.shared, s.dim));
    } else if (fused) out.push(m(n("ffnUp"), s.dim, 2 * s.hiddenDim));
    else out.push(m(n("ffnGate"), s.dim, s.hiddenDim), m(n("ffnUp"), s.dim, s.hiddenDim));
    if (e === undefined) out.push(m(n("ffnDown"), s.hiddenDim, s.dim));
    if (gemma) out.push(v(n("attnPostNorm"), s.dim, "norm"), v(n("ffnPostNorm"), s.dim, "norm"));
  }
  out.push(v(tensorName("outputNorm"), s.dim, "norm"));
  if (!s.tied) out.push(m(tensorName("output"), s.dim, s.vocabSize));
  if (s.denseFeatures !== undefined) out.push(m(tensorName("dense2"), s.dim, s.denseFeatures), m(tensorName("dense3"), s.denseFeatures, s.dim));
  return out;
}

export type { PlannedTensor };

export interface TinyModelOptions {
  readonly seed?: number;
  /** type of the 2-D weights; default f32 */
  readonly matrixType?: GgmlType;
  /** extra or replaced metadata entries (for error tests) */
  readonly metadata?: Readonly<Record<string, GgufMetadataEntry | null>>;
  /** per-tensor type override (mixed recipes such as q4_k_m); gets the name, the default type and the ggml shape */
  readonly tensorType?: (name: string, defaultType: number, shape: readonly number[]) => number;
  /** edit the tensor list before layout (for error tests) */
  readonly editTensors?: (tensors: PlannedTensor[]) => PlannedTensor[];
}

const ALIGNMENT = 32;

/**
 * A GgufFile held in memory with seeded random weights of the given shape.
 * @example const gguf = makeTinyModel(TINY_SHAPES.qwen2, { seed: 1 });
 */
export function makeTinyModel(s: TinyShape, options: TinyModelOptions = {}): GgufFile {
  const random = seededRandom(options.seed ?? 1);
  const matrixType = options.matrixType ?? GgmlType.F32;
  let planned = planTensors(s, matrixType);
  const typeOf = options.tensorType;
  if (typeOf) planned = planned.map((t) => ({ ...t, type: typeOf(t.name, t.type, t.shape) }));
  if (options.editTensors) planned = options.editTensors(planned);

  const p = s.architecture;
  const metadata = new Map<string, GgufMetadataEntry>([
    [KEY.architecture, str(p)],
    [KEY.name, str(`tiny-${p}`)],
    [archKey(p, "contextLength"), u32(s.contextLength)],
    [archKey(p, "embeddingLength"), u32(s.dim)],
    [archKey(p, "feedForwardLength"), u32(s.hiddenDim)],
    [archKey(p, "blockCount"), u32(s.numLayers)],
    [archKey(p, "headCount"), u32(s.numHeads)],
    [archKey(p, "headCountKv"), u32(s.numKvHeads)],
    [archKey(p, "keyLength"), u32(s.headDim)],
    [archKey(p, "valueLength"), u32(s.headDim)],
    [archKey(p, "rmsEps"), f32(1e-5)],
    [archKey(p, "ropeFreqBase"), f32(p === "llama" ? 10000 : 1000000)],
    ...Object.entries(s.archMetadata ?? {}).map(([key, value]): [string, GgufMetadataEntry] => [`${p}.${key}`, value]),
  ]);
  if (s.experts !== undefined) {
    metadata.set(archKey(p, "expertCount"), u32(s.experts.count));
    metadata.set(archKey(p, "expertUsedCount"), u32(s.experts.used));
    if (p === "qwen3moe" || p === "gpt-oss") metadata.set(archKey(p, "expertFeedForwardLength"), u32(s.experts.hiddenDim));
    if (s.experts.shared !== undefined) metadata.set(archKey(p, "expertSharedFeedForwardLength"), u32(s.experts.shared));
  }
  if (s.slidingWindow !== undefined) metadata.set(archKey(p, "slidingWindow"), u32(s.slidingWindow));
  if (s.slidingWindowPattern !== undefined) metadata.set(archKey(p, "slidingWindowPattern"), u32(s.slidingWindowPattern));
  for (const [key, value] of Object.entries(options.metadata ?? {})) {
    if (value === null) metadata.delete(key);
    else metadata.set(key, value);
  }

  const chunks: Uint8Array[] = [];
  const tensors: GgufTensorInfo[] = [];
  let offset = 0;
  for (const t of planned) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    const values = new Float32Array(n); // [rows, cols]
    const cols = t.shape[0]!;
    for (let i = 0; i < n && t.values; i++) values[i] = t.values[i]!;
    for (let i = 0; i < n && !t.values; i++) {
      const r = random() * 2 - 1;
      // matrices ~ U(-1, 1) * 1.5 / sqrt(cols): activations stay O(1) through the layers
      // sinks ~ U(-1, 3): some heads' sinks above their scores, some below
      values[i] = t.kind === "matrix" ? (r * 1.5) / Math.sqrt(cols) : t.kind === "norm" ? 1 + 0.2 * r : t.kind === "ropeFactor" ? 5 + 4 * r : t.kind === "sink" ? 1 + 2 * r : 0.3 * r;
    }
    const wt = weightType(t.type);
    const sizeBytes = wt === undefined ? n * 4 : byteSize(wt, n);
    const data = new Uint8Array(sizeBytes);
    if (wt !== undefined) wt.quantize(values, data, n);
    chunks.push(data);
    tensors.push({ name: t.name, shape: t.shape, type: t.type, offset, sizeBytes });
    offset += Math.ceil(sizeBytes / ALIGNMENT) * ALIGNMENT;
  }
  const bytes = new Uint8Array(offset);
  tensors.forEach((t, i) => bytes.set(chunks[i]!, t.offset));
  return { source: `<tiny ${p}>`, version: 3, alignment: ALIGNMENT, metadata, tensors, bytes };
}

/** One tiny shape per architecture: GQA everywhere, qwen3 with heads wider than dim / numHeads (key_length). */
export const TINY_SHAPES: Readonly<Record<string, TinyShape>> = {
  llama: { architecture: "llama", vocabSize: 61, dim: 32, hiddenDim: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8, tied: true, contextLength: 64 },
  qwen2: { architecture: "qwen2", vocabSize: 61, dim: 32, hiddenDim: 64, numLayers: 2, numHeads: 4, numKvHeads: 1, headDim: 8, tied: false, contextLength: 64 },
  // M-RoPE sections over the 4 rope pairs: t, y, x
  qwen2vl: {
    architecture: "qwen2vl", vocabSize: 61, dim: 32, hiddenDim: 64, numLayers: 2, numHeads: 4, numKvHeads: 1, headDim: 8, tied: false, contextLength: 64,
    archMetadata: { "rope.dimension_sections": { type: GgufValueType.ARRAY, value: { elementType: GgufValueType.INT32, values: [2, 1, 1, 0] } } },
  },
  qwen3: { architecture: "qwen3", vocabSize: 61, dim: 32, hiddenDim: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, tied: true, contextLength: 64 },
  // sliding layers 0 and 2 (window 5), global layer 1; heads wider than dim / numHeads, one KV head as in gemma3-270m
  gemma3: {
    architecture: "gemma3", vocabSize: 61, dim: 32, hiddenDim: 64, numLayers: 3, numHeads: 4, numKvHeads: 1, headDim: 16, tied: true, contextLength: 64,
    slidingWindow: 5, slidingWindowPattern: 2,
  },
  // LongRoPE: a context of 64 over an original 16 picks rope_factors_long; attn_factor scales the rotated dims
  phi3: {
    architecture: "phi3", vocabSize: 61, dim: 32, hiddenDim: 48, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8, tied: false, contextLength: 64,
    ropeFactors: true, archMetadata: { "rope.scaling.original_context_length": u32(16), "rope.scaling.attn_factor": f32(1.19) },
  },
  // 4 layers: the 4th has no rope
  smollm3: { architecture: "smollm3", vocabSize: 61, dim: 32, hiddenDim: 64, numLayers: 4, numHeads: 4, numKvHeads: 2, headDim: 8, tied: true, contextLength: 64 },
  // Llama 3.x: rope_freqs divides the frequencies
  "llama rope_freqs": { architecture: "llama", vocabSize: 61, dim: 32, hiddenDim: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8, tied: true, contextLength: 64, ropeFactors: true },
  // YaRN (as Qwen2.5's long-context configs): factor 4 over an original 16
  "qwen2 yarn": {
    architecture: "qwen2", vocabSize: 61, dim: 32, hiddenDim: 64, numLayers: 2, numHeads: 4, numKvHeads: 1, headDim: 8, tied: false, contextLength: 64,
    archMetadata: { "rope.scaling.type": str("yarn"), "rope.scaling.factor": f32(4), "rope.scaling.original_context_length": u32(16) },
  },
};

/**
 * gpt-oss: sliding window 4 on the even layers, sinks, q/k/v/o, router and expert biases, post_attention_norm, 8
 * experts of 64 with 2 routed (top-k logits then softmax), swiglu_oai experts
 */
export const TINY_GPT_OSS: TinyShape = {
  ...TINY_SHAPES.llama!, architecture: "gpt-oss", tied: false, slidingWindow: 4, experts: { count: 8, used: 2, hiddenDim: 64 },
};

/**
 * Mixture of experts and Granite (test/model/moe-llamacpp.test.ts checks them against llama.cpp): 8 experts of 64, 2
 * routed; granite's logit_scale is required.
 */
export const TINY_MOE_SHAPES: Readonly<Record<string, TinyShape>> = {
  qwen3moe: { ...TINY_SHAPES.qwen3!, architecture: "qwen3moe", hiddenDim: 96, tied: false, experts: { count: 8, used: 2, hiddenDim: 64 } },
  olmoe: { ...TINY_SHAPES.llama!, architecture: "olmoe", hiddenDim: 64, tied: false, experts: { count: 8, used: 2, hiddenDim: 64 } },
  granite: { ...TINY_SHAPES.llama!, architecture: "granite", archMetadata: { logit_scale: f32(6), residual_scale: f32(0.22), embedding_scale: f32(12) } },
  granitemoe: {
    ...TINY_SHAPES.llama!, architecture: "granitemoe", hiddenDim: 64, experts: { count: 8, used: 2, hiddenDim: 64, shared: 32 },
    archMetadata: { logit_scale: f32(6), "attention.scale": f32(0.1) },
  },
  "gpt-oss": TINY_GPT_OSS,
};

/**
 * gemma-embedding (EmbeddingGemma): bidirectional attention, layers 0 and 2 with a symmetric window (window / 2
 * positions either side), layer 1 global, the dense_2 / dense_3 projections of the pooled vector. Not in TINY_SHAPES:
 * it only embeds (test/model/bidirectional-runner.test.ts).
 */
export const TINY_BIDIRECTIONAL: TinyShape = {
  architecture: "gemma-embedding", vocabSize: 61, dim: 32, hiddenDim: 64, numLayers: 3, numHeads: 4, numKvHeads: 1, headDim: 16, tied: true, contextLength: 1024,
  slidingWindow: 300, slidingWindowPattern: 2, denseFeatures: 48,
};
