/**
 * A projector (mmproj) GGUF read as llama.cpp's tools/mtmd/clip.cpp clip_model_loader reads it: the clip.* keys into
 * one validated VisionConfig (with the per-projector defaults of load_hparams), and the v.* / mm.* tensors
 * dequantised to f32 for the reference encoder. Errors name the file and the key or tensor.
 */
import { GgufValueType, type GgufFile, type GgufTensorInfo } from "../gguf/gguf-file.ts";
import { getArray, getBool, getF32, getString, getU32, optional } from "../gguf/metadata.ts";
import { tensorData } from "../gguf/reader.ts";
import { dequantizeTensor } from "../tensor/dtypes.ts";
import { err, ok, type Result } from "../util/result.ts";
import {
  CLIP_KEY, CLIP_LAYER_TENSORS, CLIP_TENSOR, clipLayerTensorName, MMPROJ_ARCHITECTURE, SUPPORTED_PROJECTORS,
  type ClipLayerTensor, type ProjectorType,
} from "./clip-names.ts";

/** How an image is resized (clip-model.h resize_algo) and padded (pad_style) before normalisation. */
export type ResizeAlgo = "bilinear" | "bicubic" | "lanczos";

export interface VisionConfig {
  readonly projector: ProjectorType;
  readonly imageSize: number;
  readonly patchSize: number;
  /** ViT width */
  readonly dim: number;
  readonly ffnDim: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly headDim: number;
  readonly eps: number;
  /** the text model's width the projector writes */
  readonly projectionDim: number;
  readonly imageMean: readonly [number, number, number];
  readonly imageStd: readonly [number, number, number];
  /** Gemma 3: the avg-pool kernel and stride over the patch grid (clip.cpp hparams.n_merge) */
  readonly nMerge: number;
  readonly resizeAlgo: ResizeAlgo;
  /** patches per side of the encoder's square grid */
  readonly patchesPerSide: number;
  /** embeddings one image (Idefics3: one tile) gives the language model (clip_n_output_tokens) */
  readonly tokensPerImage: number;
  /** Idefics3: clip.vision.preproc_image_size, the longest edge images are resized to before tiling (absent: not in the file) */
  readonly longestEdge?: number;
}

/** Per-projector defaults of clip.cpp load_hparams, one row per supported projector. */
const PROJECTOR_DEFAULTS: Readonly<Record<ProjectorType, { readonly nMerge: number; readonly resizeAlgo: ResizeAlgo }>> = {
  // the default for every Gemma 3 size; tinygemma3 test models write clip.vision.projector.scale_factor
  gemma3: { nMerge: 4, resizeAlgo: "bilinear" },
  // HF Idefics3Config scale_factor 2; the loader sets RESIZE_ALGO_LANCZOS (Pillow's LANCZOS, the HF processor's resample)
  idefics3: { nMerge: 2, resizeAlgo: "lanczos" },
};

export function triple(file: GgufFile, key: string): Result<[number, number, number]> {
  const array = getArray(file, key, GgufValueType.FLOAT32);
  if (!array.ok) return array;
  if (array.value.values.length !== 3) return err(`${file.source}: metadata key "${key}" should hold 3 floats, not ${array.value.values.length}`);
  return ok(array.value.values as [number, number, number]);
}

/** The clip.* keys of an mmproj file as one config; refuses files that are not vision projectors fennec runs. */
export function readVisionConfig(file: GgufFile): Result<VisionConfig> {
  const arch = getString(file, "general.architecture");
  if (!arch.ok) return arch;
  if (arch.value !== MMPROJ_ARCHITECTURE) return err(`${file.source}: general.architecture is "${arch.value}", not "${MMPROJ_ARCHITECTURE}": not a projector (mmproj) file`);
  const hasVision = optional(file, CLIP_KEY.hasVisionEncoder, getBool);
  if (!hasVision.ok) return hasVision;
  if (hasVision.value !== true) return err(`${file.source}: ${CLIP_KEY.hasVisionEncoder} is not true: no vision encoder in this projector file`);
  const projector = getString(file, CLIP_KEY.projectorType);
  if (!projector.ok) return projector;
  if (!(SUPPORTED_PROJECTORS as readonly string[]).includes(projector.value)) {
    return err(`${file.source}: projector type "${projector.value}" is not supported (supported: ${SUPPORTED_PROJECTORS.join(", ")})`);
  }
  const type = projector.value as ProjectorType;
  const u32 = (key: string) => getU32(file, key);
  const fields = {
    imageSize: u32(CLIP_KEY.imageSize), patchSize: u32(CLIP_KEY.patchSize), dim: u32(CLIP_KEY.embeddingLength),
    ffnDim: u32(CLIP_KEY.feedForwardLength), numLayers: u32(CLIP_KEY.blockCount), numHeads: u32(CLIP_KEY.headCount),
    projectionDim: u32(CLIP_KEY.projectionDim), eps: getF32(file, CLIP_KEY.layerNormEps),
    imageMean: triple(file, CLIP_KEY.imageMean), imageStd: triple(file, CLIP_KEY.imageStd),
    scaleFactor: optional(file, CLIP_KEY.projectorScaleFactor, getU32),
    useGelu: optional(file, CLIP_KEY.useGelu, getBool),
    numKvHeads: optional(file, CLIP_KEY.headCountKv, getU32),
    headDim: optional(file, CLIP_KEY.headDim, getU32),
    longestEdge: optional(file, CLIP_KEY.preprocImageSize, getU32),
  };
  for (const value of Object.values(fields)) if (!value.ok) return value;
  const v = Object.fromEntries(Object.entries(fields).map(([k, r]) => [k, (r as { value: unknown }).value])) as {
    [K in keyof typeof fields]: (typeof fields)[K] extends Result<infer T> ? T : never
  };
  // clip.cpp: no use_gelu and no use_silu means gelu_quick; Gemma 3's SigLIP is tanh GELU (the converter writes it)
  if (v.useGelu !== true) return err(`${file.source}: ${CLIP_KEY.useGelu} is not true: only GELU vision encoders are supported for "${type}"`);
  const nMerge = v.scaleFactor ?? PROJECTOR_DEFAULTS[type].nMerge;
  const problems: string[] = [];
  if (v.patchSize === 0 || v.imageSize % v.patchSize !== 0) problems.push(`image size ${v.imageSize} is not a multiple of patch size ${v.patchSize}`);
  const patchesPerSide = v.patchSize === 0 ? 0 : v.imageSize / v.patchSize;
  if (nMerge === 0 || patchesPerSide % nMerge !== 0) problems.push(`${patchesPerSide} patches per side do not pool by ${nMerge}`);
  if (v.numHeads === 0 || v.dim % v.numHeads !== 0) problems.push(`width ${v.dim} does not split into ${v.numHeads} heads`);
  if (v.imageStd.some((s) => s === 0)) problems.push(`${CLIP_KEY.imageStd} has a zero`);
  // SigLIP is plain multi-head attention; grouped or resized heads belong to other encoders
  if (v.numKvHeads !== undefined && v.numKvHeads !== v.numHeads) problems.push(`${v.numKvHeads} KV heads for ${v.numHeads} heads (grouped-query vision attention is not supported)`);
  if (v.headDim !== undefined && v.headDim * v.numHeads !== v.dim) problems.push(`head size ${v.headDim} x ${v.numHeads} heads is not the width ${v.dim}`);
  if (type === "idefics3" && v.longestEdge === undefined) problems.push(`no ${CLIP_KEY.preprocImageSize} (files converted before llama.cpp wrote it are not supported)`);
  if (problems.length > 0) return err(`${file.source}: inconsistent vision config: ${problems.join("; ")}`);
  const pooledSide = patchesPerSide / nMerge;
  return ok({
    projector: type, imageSize: v.imageSize, patchSize: v.patchSize, dim: v.dim, ffnDim: v.ffnDim, numLayers: v.numLayers,
    numHeads: v.numHeads, headDim: v.dim / v.numHeads, eps: v.eps, projectionDim: v.projectionDim,
    imageMean: v.imageMean, imageStd: v.imageStd, nMerge, resizeAlgo: PROJECTOR_DEFAULTS[type].resizeAlgo,
    patchesPerSide, tokensPerImage: pooledSide * pooledSide,
    ...(type === "idefics3" ? { longestEdge: v.longestEdge } : {}),
  });
}

export interface VisionLayerWeights {
  readonly weights: Readonly<Record<ClipLayerTensor, Float32Array>>;
  readonly biases: Readonly<Record<ClipLayerTensor, Float32Array>>;
}

/** Every weight of a Gemma 3 projector file in f32, row-major with ne0 innermost (shape comments: [ne1][ne0]). */
export interface VisionWeights {
  /** [dim][3][patch][patch] */
  readonly patchEmbd: Float32Array;
  /** [dim] */
  readonly patchBias: Float32Array;
  /** [numPatches][dim] */
  readonly positionEmbd: Float32Array;
  readonly layers: readonly VisionLayerWeights[];
  readonly postLnWeight: Float32Array;
  readonly postLnBias: Float32Array;
  /** Gemma 3: [dim] (already 1 + HF's weight); empty for other projectors */
  readonly softEmbNorm: Float32Array;
  /** Gemma 3: [dim][projectionDim]; empty for other projectors */
  readonly inputProjection: Float32Array;
  /** Idefics3: mm.model.fc, [projectionDim][dim * nMerge^2] (a Linear without bias after the pixel shuffle) */
  readonly fc?: Float32Array;
}

/** The projector's own tensors per projector type: the VisionWeights field, the tensor, its ggml shape (ne0 first). */
const PROJECTOR_TENSORS: Readonly<Record<ProjectorType, (c: VisionConfig) => [string, string, readonly number[]][]>> = {
  gemma3: (c) => [
    ["softEmbNorm", CLIP_TENSOR.mmSoftEmbNorm, [c.dim]],
    ["inputProjection", CLIP_TENSOR.mmInputProjection, [c.projectionDim, c.dim]],
  ],
  idefics3: (c) => [["fc", CLIP_TENSOR.mmModelFc, [c.dim * c.nMerge * c.nMerge, c.projectionDim]]],
};

/** One tensor in f32 after checking its ggml shape (ne0 first). */
export function readTensor(file: GgufFile, byName: ReadonlyMap<string, GgufTensorInfo>, name: string, shape: readonly number[]): Result<Float32Array> {
  const info = byName.get(name);
  if (info === undefined) return err(`${file.source}: missing tensor ${name}`);
  if (info.shape.length !== shape.length || info.shape.some((n, i) => n !== shape[i])) {
    return err(`${file.source}: tensor ${name} has shape [${info.shape.join(", ")}], expected [${shape.join(", ")}]`);
  }
  const cols = shape[0]!;
  const rows = shape.slice(1).reduce((a, b) => a * b, 1);
  try {
    return ok(dequantizeTensor({ name, type: info.type, rows, cols, data: tensorData(file, info) }));
  } catch (e) {
    return err(`${file.source}: ${(e as Error).message}`);
  }
}

/** The ggml shape (ne0 first) of each layer tensor's weight; biases are [ne1]. */
function layerShape(c: VisionConfig, key: ClipLayerTensor): readonly number[] {
  if (key === "ln1" || key === "ln2") return [c.dim];
  if (key === "ffnUp") return [c.dim, c.ffnDim];
  if (key === "ffnDown") return [c.ffnDim, c.dim];
  return [c.dim, c.dim];
}

/** All weights of a projector file, checked against its config. */
export function readVisionWeights(file: GgufFile, c: VisionConfig): Result<VisionWeights> {
  const byName = new Map(file.tensors.map((t) => [t.name, t]));
  // clip.cpp load_tensors: files from older converters have ffn_up and ffn_down swapped (ffn_down's ne0 is the width)
  const down0 = byName.get(clipLayerTensorName("ffnDown", 0, "weight"));
  const swapped = down0 !== undefined && down0.shape[0] === c.dim && c.dim !== c.ffnDim;
  const fileKey = (key: ClipLayerTensor): ClipLayerTensor => !swapped ? key : key === "ffnUp" ? "ffnDown" : key === "ffnDown" ? "ffnUp" : key;
  const numPatches = c.patchesPerSide * c.patchesPerSide;
  const wanted: [string, string, readonly number[]][] = [
    ["patchEmbd", CLIP_TENSOR.patchEmbd, [c.patchSize, c.patchSize, 3, c.dim]],
    ["patchBias", CLIP_TENSOR.patchBias, [c.dim]],
    ["positionEmbd", CLIP_TENSOR.positionEmbd, [c.dim, numPatches]],
    ["postLnWeight", CLIP_TENSOR.postLnWeight, [c.dim]],
    ["postLnBias", CLIP_TENSOR.postLnBias, [c.dim]],
    ...PROJECTOR_TENSORS[c.projector](c),
  ];
  const out: Record<string, unknown> = { softEmbNorm: new Float32Array(0), inputProjection: new Float32Array(0) };
  for (const [field, name, shape] of wanted) {
    const t = readTensor(file, byName, name, shape);
    if (!t.ok) return t;
    out[field] = t.value;
  }
  const layers: VisionLayerWeights[] = [];
  for (let l = 0; l < c.numLayers; l++) {
    const weights: Partial<Record<ClipLayerTensor, Float32Array>> = {};
    const biases: Partial<Record<ClipLayerTensor, Float32Array>> = {};
    for (const key of CLIP_LAYER_TENSORS) {
      const shape = layerShape(c, key);
      const w = readTensor(file, byName, clipLayerTensorName(fileKey(key), l, "weight"), shape);
      if (!w.ok) return w;
      const b = readTensor(file, byName, clipLayerTensorName(fileKey(key), l, "bias"), [shape[shape.length - 1]!]);
      if (!b.ok) return b;
      weights[key] = w.value;
      biases[key] = b.value;
    }
    layers.push({ weights: weights as VisionLayerWeights["weights"], biases: biases as VisionLayerWeights["biases"] });
  }
  return ok({ ...(out as Omit<VisionWeights, "layers">), layers });
}
