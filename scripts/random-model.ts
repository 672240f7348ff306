/**
 * A GGUF of seeded random weights in a real model's shape, with the real tokenizer metadata copied (exact types)
 * from a llama.cpp vocab GGUF. Used for tests and benchmarks: it loads in llama.cpp and generates (gibberish).
 *
 * Weights: every matrix and bias ~ N(0, 0.02) (Irwin-Hall approximation), norms = 1. Each tensor has its own generator
 * seeded by (seed, tensor name), so one seed gives the same underlying f32 weights in every type and any layer
 * count: a q4_0 file and an f32 file of the same seed differ only by quantization.
 *
 * Types: a plain type puts every 2-D tensor in that type ("pure"), 1-D tensors (norms, biases) stay f32.
 * `q4_k_m` is llama.cpp's mixed recipe (src/llama-quant.cpp, llama_tensor_get_type_impl): q4_K by default; the output
 * (or tied token_embd) q6_K; attn_v and ffn_down q6_K in the "more bits" layers. Rows whose length is not a multiple of
 * a type's block fall back as llama.cpp's tensor_type_fallback does: q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0 (the
 * tied output straight to q8_0), and anything else that does not fit -> f16.
 */
import { GgufValueType, type GgufFile, type GgufMetadataEntry } from "../src/gguf/gguf-file.ts";
import { mdArray, mdF32, mdString, mdU32 } from "../src/gguf/metadata.ts";
import { archKey, FILE_TYPE, KEY, tensorName, type TensorKey } from "../src/gguf/names.ts";
import type { GgufTensorToWrite, GgufToWrite } from "../src/gguf/writer.ts";
import { byteSize, GgmlType, weightType, weightTypeByName } from "../src/tensor/dtypes.ts";
import type { ModelShape, ShapeRopeScaling } from "./model-shapes.ts";

/** What --type accepts: every row of the weight-type table plus llama.cpp's Q4_K_M and MXFP4_MOE mixes. */
export type ModelType = string;
export const MIXED_TYPES = ["q4_k_m", "mxfp4_moe"] as const;

const WEIGHT_STD = 0.02;

/** Which recipe rule a tensor falls under. */
type Role = "tokenEmbd" | "output" | "attnV" | "attnQkv" | "ffnDown" | "other";

/** llama.cpp's use_more_bits: the first and last eighth of the layers, and every third one between. */
function useMoreBits(layer: number, numLayers: number): boolean {
  return layer < Math.floor(numLayers / 8) || layer >= Math.floor((7 * numLayers) / 8) || (layer - Math.floor(numLayers / 8)) % 3 === 2;
}

/** llama.cpp tensor_type_fallback for a row of `ne0` elements. */
function fallback(target: GgmlType, ne0: number): GgmlType {
  const fits = (t: GgmlType) => ne0 % weightType(t)!.blockSize === 0;
  if (fits(target)) return target;
  const smaller: Partial<Record<GgmlType, GgmlType>> = {
    [GgmlType.Q4_K]: GgmlType.Q5_0, [GgmlType.Q5_K]: GgmlType.Q5_1, [GgmlType.Q6_K]: GgmlType.Q8_0,
  };
  const next = smaller[target];
  return next !== undefined && fits(next) ? next : GgmlType.F16;
}

/** The type of one matrix under `type` (a table name or a mix); `experts`: a 3-D stack of experts' matrices. */
export function tensorTypeFor(type: ModelType, role: Role, layer: number, numLayers: number, ne0: number, tied: boolean, experts = false): GgmlType {
  // llama-quant.cpp LLAMA_FTYPE_MOSTLY_MXFP4_MOE, how gpt-oss GGUFs ship: the experts MXFP4, every other matrix
  // (the output head too) Q8_0
  if (type === "mxfp4_moe") return experts ? GgmlType.MXFP4 : fallback(GgmlType.Q8_0, ne0);
  if (type !== "q4_k_m") return fallback(weightTypeByName(type)!.type, ne0);
  if (role === "output" || (role === "tokenEmbd" && tied)) return ne0 % 256 !== 0 ? GgmlType.Q8_0 : GgmlType.Q6_K;
  if ((role === "attnV" || role === "ffnDown") && useMoreBits(layer, numLayers)) return fallback(GgmlType.Q6_K, ne0);
  // ATTENTION_QKV under Q4_K_M: q5_K
  if (role === "attnQkv") return fallback(GgmlType.Q5_K, ne0);
  return fallback(GgmlType.Q4_K, ne0);
}

/** sfc32: a fast generator of uint32 values with a 128-bit state; seeded per tensor. */
function sfc32(a: number, b: number, c: number, d: number): () => number {
  return () => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    const t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    const r = (t + d) | 0;
    c = (c + r) | 0;
    return r >>> 0;
  };
}

/** FNV-1a of the tensor name mixed with the seed: each tensor's own stream. */
export function tensorRng(seed: number, name: string): () => number {
  let h = 0x811c9dc5 ^ seed;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  const rng = sfc32(0x9e3779b9, 0x243f6a88, seed >>> 0, h >>> 0);
  for (let i = 0; i < 12; i++) rng(); // mix the state
  return rng;
}

/**
 * Fills `out` with N(0, std) approximated by the sum of four 16-bit uniforms (two uint32 draws; the sum has mean 2
 * and variance 1/3, rescaled), bounded at +-3.46 std.
 */
export function fillNormal(out: Float32Array, rng: () => number, std: number): void {
  const k = std * Math.sqrt(3);
  for (let i = 0; i < out.length; i++) {
    const a = rng(), b = rng();
    out[i] = (((a & 0xffff) + (a >>> 16) + (b & 0xffff) + (b >>> 16)) / 65536 - 2) * k;
  }
}

interface TensorSpec {
  readonly key: TensorKey;
  readonly layer?: number;
  readonly shape: number[];
  readonly role: Role;
  /** norms are ones; rope factors computed (ropeFactors); everything else random */
  readonly init: "ones" | "normal" | "values";
  readonly values?: Float32Array;
}

/**
 * Llama 3's rope_freqs as llama.cpp's converter computes them from config.json (conversion/llama.py,
 * generate_extra_tensors): 1 for short wavelengths, `factor` for long ones, a smooth ramp between.
 */
export function llama3RopeFreqs(headDim: number, base: number, r: Extract<ShapeRopeScaling, { type: "llama3" }>): Float32Array {
  const lowWavelen = r.originalContextLength / r.lowFreqFactor;
  const highWavelen = r.originalContextLength / r.highFreqFactor;
  return Float32Array.from({ length: headDim / 2 }, (_, i) => {
    const wavelen = 2 * Math.PI * Math.pow(base, (2 * i) / headDim); // 2 pi / freq
    if (wavelen < highWavelen) return 1;
    if (wavelen > lowWavelen) return r.factor;
    const smooth = (r.originalContextLength / wavelen - r.lowFreqFactor) / (r.highFreqFactor - r.lowFreqFactor);
    return 1 / ((1 - smooth) / r.factor + smooth);
  });
}

/**
 * LongRoPE divisors in the range of Phi-3.5-mini's config.json (short 1..~3, long 1..~60, rising with the dim); the
 * exact lists are data of that model, not reachable here, so these are smooth stand-ins of the same length.
 */
export function longRopeFactors(half: number, which: "short" | "long"): Float32Array {
  const top = which === "short" ? 3 : 60;
  return Float32Array.from({ length: half }, (_, i) => Math.pow(top, Math.pow(i / Math.max(1, half - 1), 2)));
}

/** rope.scaling.* metadata as the converter writes it for the shape's rope scaling */
export function ropeScalingMetadata(s: ModelShape): [string, GgufMetadataEntry][] {
  const r = s.ropeScaling;
  const arch = s.architecture;
  if (r === undefined || r.type === "llama3") return [];
  const orig: [string, GgufMetadataEntry] = [archKey(arch, "ropeScalingOriginalContextLength"), mdU32(r.originalContextLength)];
  if (r.type === "longrope") {
    // conversion/phi.py: attn_factor = sqrt(1 + ln(scale) / ln(original)), scale = context / original
    const scale = s.contextLength / r.originalContextLength;
    const attnFactor = scale > 1 ? Math.sqrt(1 + Math.log(scale) / Math.log(r.originalContextLength)) : 1;
    return [orig, [archKey(arch, "ropeScalingAttnFactor"), mdF32(attnFactor)]];
  }
  return [[archKey(arch, "ropeScalingType"), mdString(r.type)], [archKey(arch, "ropeScalingFactor"), mdF32(r.factor)], orig];
}

/** The rope divisor tensors the converter writes for the shape's rope scaling (Llama 3: rope_freqs; LongRoPE: long and short). */
export function ropeFactorTensors(s: ModelShape): ["ropeFreqs" | "ropeFactorsLong" | "ropeFactorsShort", Float32Array][] {
  const r = s.ropeScaling;
  const ropeDim = s.ropeDim ?? s.headDim;
  if (r?.type === "llama3") return [["ropeFreqs", llama3RopeFreqs(ropeDim, s.ropeFreqBase, r)]];
  if (r?.type === "longrope") return [["ropeFactorsLong", longRopeFactors(ropeDim / 2, "long")], ["ropeFactorsShort", longRopeFactors(ropeDim / 2, "short")]];
  return [];
}

function tensorSpecs(s: ModelShape, vocabSize: number): TensorSpec[] {
  const qDim = s.numHeads * s.headDim;
  const kvDim = s.numKvHeads * s.headDim;
  const specs: TensorSpec[] = [{ key: "tokenEmbd", shape: [s.dim, vocabSize], role: "tokenEmbd", init: "normal" }];
  for (const [key, values] of ropeFactorTensors(s)) specs.push({ key, shape: [values.length], role: "other", init: "values", values });
  // phi3's GGUFs stack q, k, v into attn_qkv and [gate; up] into ffn_up (conversion/phi.py keeps HF's fused qkv_proj, gate_up_proj)
  const fused = s.architecture === "phi3";
  for (let layer = 0; layer < s.numLayers; layer++) {
    const l = (key: TensorKey, shape: number[], role: Role = "other", init: "ones" | "normal" = "normal"): TensorSpec => ({ key, layer, shape, role, init });
    specs.push(l("attnNorm", [s.dim], "other", "ones"));
    if (fused) specs.push(l("attnQkv", [s.dim, qDim + 2 * kvDim], "attnQkv"));
    else specs.push(l("attnQ", [s.dim, qDim]), l("attnK", [s.dim, kvDim]), l("attnV", [s.dim, kvDim], "attnV"));
    if (s.qkvBias) specs.push(l("attnQBias", [qDim]), l("attnKBias", [kvDim]), l("attnVBias", [kvDim]));
    // olmoe normalises the whole q / k (weights as wide as all heads), the others each head
    const qkWidth = (heads: number): number => (s.architecture === "olmoe" ? heads * s.headDim : s.headDim);
    if (s.qkNorm) specs.push(l("attnQNorm", [qkWidth(s.numHeads)], "other", "ones"), l("attnKNorm", [qkWidth(s.numKvHeads)], "other", "ones"));
    // gpt-oss (openai-moe.cpp): attn_output.bias, attn_sinks, and post_attention_norm stands where ffn_norm would
    const oss = s.architecture === "gpt-oss";
    specs.push(l("attnOutput", [qDim, s.dim]), l(oss ? "attnPostNorm" : "ffnNorm", [s.dim], "other", "ones"));
    if (oss) specs.push(l("attnOutputBias", [s.dim]), l("attnSinks", [s.numHeads]));
    if (s.moe !== undefined) {
      // the router and the experts as 3-D tensors [cols, rows, experts] (llama.cpp qwen3moe.cpp / olmoe.cpp)
      const { experts, expertHiddenDim: eh } = s.moe;
      specs.push(l("ffnGateInp", [s.dim, experts]), l("ffnGateExps", [s.dim, eh, experts]), l("ffnUpExps", [s.dim, eh, experts]), l("ffnDownExps", [eh, s.dim, experts], "ffnDown"));
      if (oss) specs.push(l("ffnGateInpBias", [experts]), l("ffnGateExpsBias", [eh, experts]), l("ffnUpExpsBias", [eh, experts]), l("ffnDownExpsBias", [s.dim, experts]));
    } else if (fused) specs.push(l("ffnUp", [s.dim, 2 * s.hiddenDim]));
    else specs.push(l("ffnGate", [s.dim, s.hiddenDim]), l("ffnUp", [s.dim, s.hiddenDim]));
    if (s.moe === undefined) specs.push(l("ffnDown", [s.hiddenDim, s.dim], "ffnDown"));
    // gemma3's norms are stored as 1 + w (llama.cpp's converter adds the 1 of Gemma3RMSNorm), so ones here too
    if (s.postNorms === true) specs.push(l("attnPostNorm", [s.dim], "other", "ones"), l("ffnPostNorm", [s.dim], "other", "ones"));
  }
  specs.push({ key: "outputNorm", shape: [s.dim], role: "other", init: "ones" });
  if (!s.tiedEmbeddings) specs.push({ key: "output", shape: [s.dim, vocabSize], role: "output", init: "normal" });
  // EmbeddingGemma's 2_Dense / 3_Dense (conversion/gemma.py EmbeddingGemma.generate_extra_tensors)
  if (s.denseFeatures !== undefined) {
    specs.push({ key: "dense2", shape: [s.dim, s.denseFeatures], role: "other", init: "normal" }, { key: "dense3", shape: [s.denseFeatures, s.dim], role: "other", init: "normal" });
  }
  return specs;
}

/** The bytes of one tensor, generated and quantized a few rows at a time (never the whole f32 tensor at once). */
function generate(spec: TensorSpec, name: string, type: GgmlType, seed: number): Uint8Array {
  const w = weightType(type)!;
  const rowLength = spec.shape[0]!;
  const numRows = spec.shape.slice(1).reduce((a, b) => a * b, 1);
  const out = new Uint8Array(byteSize(w, rowLength * numRows)); // [numRows][row bytes]
  const rowBytes = byteSize(w, rowLength);
  const rowsPerChunk = Math.max(1, Math.floor((1 << 20) / rowLength));
  const chunk = new Float32Array(rowsPerChunk * rowLength); // [rowsPerChunk][rowLength]
  const rng = tensorRng(seed, name);
  for (let row = 0; row < numRows; row += rowsPerChunk) {
    const rows = Math.min(rowsPerChunk, numRows - row);
    const values = chunk.subarray(0, rows * rowLength);
    if (spec.init === "ones") values.fill(1);
    else if (spec.init === "values") values.set(spec.values!.subarray(row * rowLength, (row + rows) * rowLength));
    else fillNormal(values, rng, WEIGHT_STD);
    w.quantize(values, out.subarray(row * rowBytes, (row + rows) * rowBytes), values.length);
  }
  return out;
}

/** llama.h enum llama_pooling_type */
const POOLING_TYPE_IDS = { mean: 1, cls: 2, last: 3 } as const;

export interface RandomModelOptions {
  readonly shapeName: string;
  readonly shape: ModelShape;
  /** a weight-type table name ("q8_0") or a mix of MIXED_TYPES */
  readonly type: ModelType;
  readonly seed: number;
  /** the llama.cpp vocab GGUF whose tokenizer.* metadata is copied */
  readonly vocab: GgufFile;
}

/** Tokenizer metadata of the vocab file, with exact value types, in file order. */
function tokenizerMetadata(vocab: GgufFile): [string, GgufMetadataEntry][] {
  return [...vocab.metadata].filter(([key]) => key.startsWith("tokenizer."));
}

/**
 * The model to write (tensor data produced lazily, one tensor at a time).
 * @example writeGgufFile(out, randomModel({ shapeName, shape, type: "q8_0", seed: 1, vocab }))
 */
export function randomModel(o: RandomModelOptions): GgufToWrite {
  const { shape: s } = o;
  if (!(MIXED_TYPES as readonly string[]).includes(o.type) && weightTypeByName(o.type) === undefined) throw new Error(`unknown type ${o.type}`);
  const tokens = o.vocab.metadata.get(KEY.tokens);
  if (tokens?.type !== GgufValueType.ARRAY) throw new Error(`${o.vocab.source}: no ${KEY.tokens}`);
  const vocabSize = (tokens.value as { values: unknown[] }).values.length;
  const arch = s.architecture;
  const metadata = new Map<string, GgufMetadataEntry>([
    [KEY.architecture, mdString(arch)],
    [KEY.name, mdString(`${o.shapeName} random weights (seed ${o.seed}, ${o.type})`)],
    [archKey(arch, "contextLength"), mdU32(s.contextLength)],
    [archKey(arch, "embeddingLength"), mdU32(s.dim)],
    [archKey(arch, "blockCount"), mdU32(s.numLayers)],
    [archKey(arch, "feedForwardLength"), mdU32(s.hiddenDim)],
    [archKey(arch, "headCount"), mdU32(s.numHeads)],
    [archKey(arch, "headCountKv"), mdU32(s.numKvHeads)],
    [archKey(arch, "keyLength"), mdU32(s.headDim)],
    [archKey(arch, "valueLength"), mdU32(s.headDim)],
    [archKey(arch, "rmsEps"), mdF32(s.rmsEps)],
    [archKey(arch, "ropeFreqBase"), mdF32(s.ropeFreqBase)],
    [archKey(arch, "ropeDimensionCount"), mdU32(s.ropeDim ?? s.headDim)],
    ...(s.poolingType ? [[archKey(arch, "poolingType"), mdU32(POOLING_TYPE_IDS[s.poolingType])] as [string, GgufMetadataEntry]] : []),
    ...(s.slidingWindow !== undefined ? [[archKey(arch, "slidingWindow"), mdU32(s.slidingWindow)] as [string, GgufMetadataEntry]] : []),
    ...ropeScalingMetadata(s),
    // qwen2vl: gguf-py add_rope_dimension_sections writes an int32 array
    ...(s.ropeSections !== undefined ? [[archKey(arch, "ropeDimensionSections"), mdArray(GgufValueType.INT32, [...s.ropeSections])] as [string, GgufMetadataEntry]] : []),
    ...(s.graniteScales !== undefined
      ? ([["embeddingScale", s.graniteScales.embedding], ["residualScale", s.graniteScales.residual], ["attentionScale", s.graniteScales.attention], ["logitScale", s.graniteScales.logit]] as const)
        .map(([key, value]) => [archKey(arch, key), mdF32(value)] as [string, GgufMetadataEntry])
      : []),
    ...(s.moe !== undefined
      ? [
        [archKey(arch, "expertCount"), mdU32(s.moe.experts)],
        [archKey(arch, "expertUsedCount"), mdU32(s.moe.used)],
        ...(arch === "olmoe" || arch === "granitemoe" ? [] : [[archKey(arch, "expertFeedForwardLength"), mdU32(s.moe.expertHiddenDim)]]),
      ] as [string, GgufMetadataEntry][]
      : []),
    ...(s.denseFeatures !== undefined
      ? ([["dense2FeatIn", s.dim], ["dense2FeatOut", s.denseFeatures], ["dense3FeatIn", s.denseFeatures], ["dense3FeatOut", s.dim]] as const)
        .map(([key, value]) => [archKey(arch, key), mdU32(value)] as [string, GgufMetadataEntry])
      : []),
    [KEY.fileType, mdU32(FILE_TYPE[o.type]!)],
    [KEY.quantizationVersion, mdU32(2)],
    ...tokenizerMetadata(o.vocab),
  ]);
  const tensors: GgufTensorToWrite[] = tensorSpecs(s, vocabSize).map((spec) => {
    const name = tensorName(spec.key, spec.layer);
    // llama.cpp's quantizer never quantizes the router (llama-quant.cpp: ffn_gate_inp.weight stays as converted)
    const type = spec.shape.length === 1 || spec.key === "ffnGateInp" || spec.key.endsWith("Bias")
      ? GgmlType.F32
      : tensorTypeFor(o.type, spec.role, spec.layer ?? 0, s.numLayers, spec.shape[0]!, s.tiedEmbeddings, spec.shape.length === 3);
    return { name, shape: spec.shape, type, data: () => generate(spec, name, type, o.seed) };
  });
  return { metadata, tensors };
}
