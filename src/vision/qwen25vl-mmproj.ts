/**
 * A Qwen2.5-VL projector (mmproj) GGUF read as llama.cpp's tools/mtmd/clip.cpp reads PROJECTOR_TYPE_QWEN25VL: the
 * clip.* keys (load_hparams: n_merge 2 unless clip.vision.spatial_merge_size, window attention every layer but each
 * n_wa_pattern-th, windows of clip.vision.window_size px or 112, image tokens 8..4096, bicubic resize) and the tensors
 * (load_tensors: the Conv3D patch kernel as two Conv2D weights, RMSNorms without bias, SwiGLU FFNs with biases, the
 * merger MLP mm.0 / mm.2), dequantised to f32. Keys and names from clip-impl.h and conversion/qwenvl.py.
 */
import type { GgufFile, GgufTensorInfo } from "../gguf/gguf-file.ts";
import { getBool, getF32, getString, getU32, optional } from "../gguf/metadata.ts";
import { err, ok, type Result } from "../util/result.ts";
import { CLIP_KEY, MMPROJ_ARCHITECTURE } from "./clip-names.ts";
import { readTensor, triple } from "./mmproj.ts";

/** clip.projector_type of Qwen2.5-VL (clip-impl.h PROJECTOR_TYPE_NAMES) */
export const QWEN25VL_PROJECTOR = "qwen2.5vl_merger";

/** The Qwen2.5-VL keys beyond conversion/base.py's common ones (clip-impl.h KEY_*). */
export const QWEN25VL_KEY = {
  /** fullatt_block_indexes[0] + 1, required for Qwen2.5-VL */
  windowPattern: "clip.vision.n_wa_pattern",
  /** optional, px; clip.cpp's default 112 */
  windowSize: "clip.vision.window_size",
  /** optional; clip.cpp's default 2 */
  spatialMergeSize: "clip.vision.spatial_merge_size",
} as const;

/** Tensors outside the layers (clip-impl.h TN_PATCH_EMBD, TN_PATCH_EMBD_1, TN_POST_LN, TN_LLAVA_PROJ). */
export const QWEN25VL_TENSOR = {
  patchEmbd0: "v.patch_embd.weight",
  patchEmbd1: "v.patch_embd.weight.1",
  postNorm: "v.post_ln.weight",
  merger0: "mm.0",
  merger2: "mm.2",
} as const;

/** Per-layer tensors `v.blk.N.<name>.weight` (+ `.bias` where `bias`), with their ggml shapes (ne0 first). */
const LAYER_TENSORS = {
  ln1: { name: "ln1", bias: false }, ln2: { name: "ln2", bias: false },
  attnQ: { name: "attn_q", bias: true }, attnK: { name: "attn_k", bias: true }, attnV: { name: "attn_v", bias: true },
  attnOut: { name: "attn_out", bias: true },
  ffnGate: { name: "ffn_gate", bias: true }, ffnUp: { name: "ffn_up", bias: true }, ffnDown: { name: "ffn_down", bias: true },
} as const;
export type Qwen25vlLayerTensor = keyof typeof LAYER_TENSORS;
export const QWEN25VL_LAYER_TENSORS = Object.keys(LAYER_TENSORS) as Qwen25vlLayerTensor[];

/** @example qwen25vlLayerTensorName("ffnGate", 0, "bias") // "v.blk.0.ffn_gate.bias" */
export function qwen25vlLayerTensorName(key: Qwen25vlLayerTensor, layer: number, part: "weight" | "bias"): string {
  return `v.blk.${layer}.${LAYER_TENSORS[key].name}.${part}`;
}

/** Whether layer tensor `key` has a bias. */
export function qwen25vlHasBias(key: Qwen25vlLayerTensor): boolean {
  return LAYER_TENSORS[key].bias;
}

/** The ggml shape (ne0 first) of each layer tensor's weight; a bias is [ne1]. */
export function qwen25vlLayerShape(dim: number, ffnDim: number, key: Qwen25vlLayerTensor): readonly number[] {
  if (key === "ln1" || key === "ln2") return [dim];
  if (key === "ffnGate" || key === "ffnUp") return [dim, ffnDim];
  if (key === "ffnDown") return [ffnDim, dim];
  return [dim, dim];
}

/** clip.cpp set_limit_image_tokens(8, 4096) for Qwen-VL */
const MIN_IMAGE_TOKENS = 8;
const MAX_IMAGE_TOKENS = 4096;
const DEFAULT_WINDOW_PX = 112;

export interface Qwen25vlConfig {
  readonly patchSize: number;
  /** ViT width */
  readonly dim: number;
  readonly ffnDim: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly headDim: number;
  readonly eps: number;
  /** the language model's width */
  readonly projectionDim: number;
  readonly imageMean: readonly [number, number, number];
  readonly imageStd: readonly [number, number, number];
  /** patches per merged token side (2) */
  readonly merge: number;
  /** layer l attends fully when (l + 1) % windowPattern == 0, else within its window; 0: every layer fully */
  readonly windowPattern: number;
  /** merged tokens per window side (window px / patch / merge) */
  readonly windowTokens: number;
  /** smart-resize bounds, in pixels (image tokens x (patch x merge)^2) */
  readonly minPixels: number;
  readonly maxPixels: number;
}

/** The clip.* keys of a Qwen2.5-VL projector file; refuses anything else. */
export function readQwen25vlConfig(file: GgufFile): Result<Qwen25vlConfig> {
  const arch = getString(file, "general.architecture");
  if (!arch.ok) return arch;
  if (arch.value !== MMPROJ_ARCHITECTURE) return err(`${file.source}: general.architecture is "${arch.value}", not "${MMPROJ_ARCHITECTURE}": not a projector (mmproj) file`);
  const projector = getString(file, CLIP_KEY.projectorType);
  if (!projector.ok) return projector;
  if (projector.value !== QWEN25VL_PROJECTOR) return err(`${file.source}: projector type "${projector.value}" is not "${QWEN25VL_PROJECTOR}"`);
  const u32 = (key: string) => getU32(file, key);
  const fields = {
    patchSize: u32(CLIP_KEY.patchSize), dim: u32(CLIP_KEY.embeddingLength), ffnDim: u32(CLIP_KEY.feedForwardLength),
    numLayers: u32(CLIP_KEY.blockCount), numHeads: u32(CLIP_KEY.headCount), projectionDim: u32(CLIP_KEY.projectionDim),
    eps: getF32(file, CLIP_KEY.layerNormEps), imageMean: triple(file, CLIP_KEY.imageMean), imageStd: triple(file, CLIP_KEY.imageStd),
    useSilu: optional(file, CLIP_KEY.useSilu, getBool), useGelu: optional(file, CLIP_KEY.useGelu, getBool),
    windowPattern: u32(QWEN25VL_KEY.windowPattern),
    windowSize: optional(file, QWEN25VL_KEY.windowSize, getU32), merge: optional(file, QWEN25VL_KEY.spatialMergeSize, getU32),
  };
  for (const value of Object.values(fields)) if (!value.ok) return value;
  const v = Object.fromEntries(Object.entries(fields).map(([k, r]) => [k, (r as { value: unknown }).value])) as {
    [K in keyof typeof fields]: (typeof fields)[K] extends Result<infer T> ? T : never
  };
  const merge = v.merge ?? 2;
  const windowPx = v.windowSize !== undefined && v.windowSize > 0 ? v.windowSize : DEFAULT_WINDOW_PX;
  const problems: string[] = [];
  // clip.cpp: use_silu picks FFN_SILU (Qwen2.5-VL's SwiGLU); without it the FFN would be GELU-quick, another model
  if (v.useSilu !== true || v.useGelu === true) problems.push(`${CLIP_KEY.useSilu} must be true (Qwen2.5-VL's SwiGLU vision FFN)`);
  if (v.numHeads === 0 || v.dim % v.numHeads !== 0 || (v.dim / v.numHeads) % 4 !== 0) problems.push(`width ${v.dim} does not split into ${v.numHeads} heads of a multiple of 4 (4 rope sections)`);
  // qwen2vl.cpp's merger and window index assume 2 x 2 merging (merge_ratio = 2 is hard-coded there)
  if (merge !== 2) problems.push(`${QWEN25VL_KEY.spatialMergeSize} ${merge} (only 2 is supported, as clip.cpp's Qwen2.5-VL graph)`);
  if (v.patchSize === 0 || windowPx % (v.patchSize * merge) !== 0) problems.push(`window ${windowPx} px is not a multiple of ${v.patchSize * merge} px`);
  if (v.imageStd.some((s) => s === 0)) problems.push(`${CLIP_KEY.imageStd} has a zero`);
  if (problems.length > 0) return err(`${file.source}: inconsistent Qwen2.5-VL vision config: ${problems.join("; ")}`);
  const area = (v.patchSize * merge) ** 2;
  return ok({
    patchSize: v.patchSize, dim: v.dim, ffnDim: v.ffnDim, numLayers: v.numLayers, numHeads: v.numHeads, headDim: v.dim / v.numHeads,
    eps: v.eps, projectionDim: v.projectionDim, imageMean: v.imageMean, imageStd: v.imageStd, merge,
    windowPattern: v.windowPattern, windowTokens: windowPx / v.patchSize / merge,
    minPixels: MIN_IMAGE_TOKENS * area, maxPixels: MAX_IMAGE_TOKENS * area,
  });
}

export interface Qwen25vlLayerWeights {
  /** [out][in] row-major (ne0 innermost) */
  readonly weights: Readonly<Record<Qwen25vlLayerTensor, Float32Array>>;
  readonly biases: Readonly<Partial<Record<Qwen25vlLayerTensor, Float32Array>>>;
}

/** Every weight in f32, row-major with ne0 innermost. */
export interface Qwen25vlWeights {
  /** the temporal kernel's two halves, each [dim][3][patch][patch] (a still image is both frames) */
  readonly patchEmbd0: Float32Array;
  readonly patchEmbd1: Float32Array;
  readonly layers: readonly Qwen25vlLayerWeights[];
  /** [dim] the merger's RMSNorm (HF merger.ln_q) */
  readonly postNorm: Float32Array;
  /** [4 dim][4 dim] and [4 dim] */
  readonly merger0: Float32Array;
  readonly merger0Bias: Float32Array;
  /** [projectionDim][4 dim] and [projectionDim] */
  readonly merger2: Float32Array;
  readonly merger2Bias: Float32Array;
}

/** All weights of a Qwen2.5-VL projector file, checked against its config. */
export function readQwen25vlWeights(file: GgufFile, c: Qwen25vlConfig): Result<Qwen25vlWeights> {
  const byName = new Map<string, GgufTensorInfo>(file.tensors.map((t) => [t.name, t]));
  const merged = 4 * c.dim;
  const wanted: [string, string, readonly number[]][] = [
    ["patchEmbd0", QWEN25VL_TENSOR.patchEmbd0, [c.patchSize, c.patchSize, 3, c.dim]],
    ["patchEmbd1", QWEN25VL_TENSOR.patchEmbd1, [c.patchSize, c.patchSize, 3, c.dim]],
    ["postNorm", QWEN25VL_TENSOR.postNorm, [c.dim]],
    ["merger0", `${QWEN25VL_TENSOR.merger0}.weight`, [merged, merged]],
    ["merger0Bias", `${QWEN25VL_TENSOR.merger0}.bias`, [merged]],
    ["merger2", `${QWEN25VL_TENSOR.merger2}.weight`, [merged, c.projectionDim]],
    ["merger2Bias", `${QWEN25VL_TENSOR.merger2}.bias`, [c.projectionDim]],
  ];
  const out: Record<string, unknown> = {};
  for (const [field, name, shape] of wanted) {
    const t = readTensor(file, byName, name, shape);
    if (!t.ok) return t;
    out[field] = t.value;
  }
  // clip.cpp's graph asserts there is no patch bias; a file with one is another model
  if (byName.has("v.patch_embd.bias")) return err(`${file.source}: v.patch_embd.bias is not part of a Qwen2.5-VL projector`);
  const layers: Qwen25vlLayerWeights[] = [];
  for (let l = 0; l < c.numLayers; l++) {
    const weights: Partial<Record<Qwen25vlLayerTensor, Float32Array>> = {};
    const biases: Partial<Record<Qwen25vlLayerTensor, Float32Array>> = {};
    for (const key of QWEN25VL_LAYER_TENSORS) {
      const shape = qwen25vlLayerShape(c.dim, c.ffnDim, key);
      const w = readTensor(file, byName, qwen25vlLayerTensorName(key, l, "weight"), shape);
      if (!w.ok) return w;
      weights[key] = w.value;
      if (!qwen25vlHasBias(key)) continue;
      const b = readTensor(file, byName, qwen25vlLayerTensorName(key, l, "bias"), [shape[shape.length - 1]!]);
      if (!b.ok) return b;
      biases[key] = b.value;
    }
    layers.push({ weights: weights as Qwen25vlLayerWeights["weights"], biases });
  }
  return ok({ ...(out as Omit<Qwen25vlWeights, "layers">), layers });
}
