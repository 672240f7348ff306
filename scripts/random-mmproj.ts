/**
 * A projector (mmproj) GGUF of seeded random weights in a vision shape (scripts/model-shapes.ts VISION_SHAPES), with
 * the keys, tensor names and tensor types llama.cpp's converter writes (`convert_hf_to_gguf.py --mmproj`, default
 * outtype f16): conversion/base.py MmprojModel.set_gguf_parameters, conversion/gemma.py Gemma3VisionModel (layer
 * norm eps, use_gelu, scale_factor only when not 4; the embeddings forced to f32, input_projection to f16; 1-D
 * tensors f32). Weights as scripts/random-model.ts: N(0, 0.02) per tensor stream, norms 1 (soft_emb_norm is stored
 * as 1 + HF's zero-initialised weight, so 1 too).
 */
import { GgufValueType, type GgufMetadataEntry } from "../src/gguf/gguf-file.ts";
import { mdArray, mdBool, mdF32, mdString, mdU32 } from "../src/gguf/metadata.ts";
import { FILE_TYPE, KEY } from "../src/gguf/names.ts";
import type { GgufTensorToWrite, GgufToWrite } from "../src/gguf/writer.ts";
import { byteSize, GgmlType, weightType } from "../src/tensor/dtypes.ts";
import { CLIP_KEY, CLIP_LAYER_TENSORS, CLIP_TENSOR, clipLayerTensorName, MMPROJ_ARCHITECTURE, MMPROJ_GENERAL_TYPE } from "../src/vision/clip-names.ts";
import {
  QWEN25VL_KEY, QWEN25VL_LAYER_TENSORS, QWEN25VL_TENSOR, qwen25vlHasBias, qwen25vlLayerShape, qwen25vlLayerTensorName,
} from "../src/vision/qwen25vl-mmproj.ts";
import type { VisionShape } from "./model-shapes.ts";
import { fillNormal, tensorRng } from "./random-model.ts";

const WEIGHT_STD = 0.02;

interface MmprojTensor {
  readonly name: string;
  readonly shape: readonly number[];
  readonly type: GgmlType;
  readonly init: "ones" | "normal";
}

/** The converter's tensor list for a SigLIP projector (Gemma 3, Idefics3), ggml shapes (ne0 first). */
function siglipTensors(v: VisionShape, textDim: number): MmprojTensor[] {
  const side = v.imageSize / v.patchSize;
  const t = (name: string, shape: number[], init: "ones" | "normal" = "normal", type?: GgmlType): MmprojTensor =>
    ({ name, shape, init, type: type ?? (shape.length === 1 ? GgmlType.F32 : GgmlType.F16) });
  const layers = Array.from({ length: v.numLayers }, (_, l) => CLIP_LAYER_TENSORS.flatMap((key) => {
    const isNorm = key === "ln1" || key === "ln2";
    const shape = isNorm ? [v.dim] : key === "ffnUp" ? [v.dim, v.ffnDim] : key === "ffnDown" ? [v.ffnDim, v.dim] : [v.dim, v.dim];
    return [t(clipLayerTensorName(key, l, "weight"), shape, isNorm ? "ones" : "normal"), t(clipLayerTensorName(key, l, "bias"), [shape[shape.length - 1]!])];
  })).flat();
  return [
    t(CLIP_TENSOR.patchEmbd, [v.patchSize, v.patchSize, 3, v.dim], "normal", GgmlType.F32),
    t(CLIP_TENSOR.patchBias, [v.dim]),
    t(CLIP_TENSOR.positionEmbd, [v.dim, side * side], "normal", GgmlType.F32),
    ...layers,
    t(CLIP_TENSOR.postLnWeight, [v.dim], "ones"),
    t(CLIP_TENSOR.postLnBias, [v.dim]),
    ...(v.projector === "idefics3"
      // conversion/smolvlm.py: model.connector.modality_projection.proj, a Linear without bias (f16 as every 2-D tensor)
      ? [t(CLIP_TENSOR.mmModelFc, [v.dim * idefics3Scale(v) ** 2, textDim])]
      : [t(CLIP_TENSOR.mmInputProjection, [textDim, v.dim], "normal", GgmlType.F16), t(CLIP_TENSOR.mmSoftEmbNorm, [v.dim], "ones")]),
  ];
}

/** SmolVLM's config.json scale_factor (conversion/smolvlm.py writes it always, default 2). */
function idefics3Scale(v: VisionShape): number {
  return v.scaleFactor ?? 2;
}

/** conversion/smolvlm.py SmolVLMModel.set_gguf_parameters after MmprojModel's keys (and its defaults). */
function idefics3Metadata(v: VisionShape): [string, GgufMetadataEntry][] {
  return [
    [CLIP_KEY.layerNormEps, mdF32(v.eps)],
    [CLIP_KEY.projectorScaleFactor, mdU32(idefics3Scale(v))],
    [CLIP_KEY.useGelu, mdBool(true)],
    [CLIP_KEY.preprocImageSize, mdU32(v.longestEdge ?? v.imageSize)],
  ];
}

/**
 * The converter's tensor list for a Qwen2.5-VL projector (conversion/qwenvl.py Qwen2VLVisionModel: qkv split into
 * q / k / v, the Conv3D patch kernel split into v.patch_embd.weight and .weight.1, both f16 as MmprojModel forces
 * patch_embd; RMSNorms without bias; merger.ln_q as v.post_ln; merger.mlp.0 / .2 as mm.0 / mm.2).
 */
function qwen25vlTensors(v: VisionShape, textDim: number): MmprojTensor[] {
  const t = (name: string, shape: number[], init: "ones" | "normal" = "normal"): MmprojTensor =>
    ({ name, shape, init, type: shape.length === 1 ? GgmlType.F32 : GgmlType.F16 });
  const layers = Array.from({ length: v.numLayers }, (_, l) => QWEN25VL_LAYER_TENSORS.flatMap((key) => {
    const shape = [...qwen25vlLayerShape(v.dim, v.ffnDim, key)];
    const weight = t(qwen25vlLayerTensorName(key, l, "weight"), shape, shape.length === 1 ? "ones" : "normal");
    return qwen25vlHasBias(key) ? [weight, t(qwen25vlLayerTensorName(key, l, "bias"), [shape[shape.length - 1]!])] : [weight];
  })).flat();
  const merged = 4 * v.dim;
  return [
    t(QWEN25VL_TENSOR.patchEmbd0, [v.patchSize, v.patchSize, 3, v.dim]),
    t(QWEN25VL_TENSOR.patchEmbd1, [v.patchSize, v.patchSize, 3, v.dim]),
    ...layers,
    t(QWEN25VL_TENSOR.postNorm, [v.dim], "ones"),
    t(`${QWEN25VL_TENSOR.merger0}.weight`, [merged, merged]),
    t(`${QWEN25VL_TENSOR.merger0}.bias`, [merged]),
    t(`${QWEN25VL_TENSOR.merger2}.weight`, [merged, textDim]),
    t(`${QWEN25VL_TENSOR.merger2}.bias`, [textDim]),
  ];
}

/** The keys conversion/qwenvl.py adds for Qwen2.5-VL: use_silu, n_wa_pattern, the text model's rms_norm_eps. */
function qwen25vlMetadata(v: VisionShape): [string, GgufMetadataEntry][] {
  if (v.windowPattern === undefined) throw new Error("a Qwen2.5-VL vision shape needs windowPattern (fullatt_block_indexes[0] + 1)");
  return [[CLIP_KEY.useSilu, mdBool(true)], [QWEN25VL_KEY.windowPattern, mdU32(v.windowPattern)], [CLIP_KEY.layerNormEps, mdF32(v.eps)]];
}

/** conversion/gemma.py: eps, use_gelu, and the pool factor only when it is not the default 4 */
function gemma3Metadata(v: VisionShape): [string, GgufMetadataEntry][] {
  const perSide = Math.floor(Math.sqrt(v.imageSeqLength));
  const scaleFactor = Math.floor(v.imageSize / v.patchSize / perSide);
  return [
    [CLIP_KEY.layerNormEps, mdF32(v.eps)],
    [CLIP_KEY.useGelu, mdBool(true)],
    ...(scaleFactor > 0 && scaleFactor !== 4 ? [[CLIP_KEY.projectorScaleFactor, mdU32(scaleFactor)] as [string, GgufMetadataEntry]] : []),
  ];
}

function generate(spec: MmprojTensor, seed: number): Uint8Array {
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const values = new Float32Array(n);
  if (spec.init === "ones") values.fill(1);
  else fillNormal(values, tensorRng(seed, spec.name), WEIGHT_STD);
  const w = weightType(spec.type)!;
  const out = new Uint8Array(byteSize(w, n));
  w.quantize(values, out, n);
  return out;
}

export interface RandomMmprojOptions {
  readonly shapeName: string;
  readonly vision: VisionShape;
  /** the language model's width (clip.vision.projection_dim) */
  readonly textDim: number;
  readonly seed: number;
}

/** The projector file to write (tensor data produced lazily). */
export function randomMmproj(o: RandomMmprojOptions): GgufToWrite {
  const v = o.vision;
  if (v.imageSize % v.patchSize !== 0) throw new Error(`image size ${v.imageSize} is not a multiple of patch ${v.patchSize}`);
  const qwen = v.projector === "qwen2.5vl_merger";
  const floats = (xs: readonly number[]) => mdArray(GgufValueType.FLOAT32, [...xs]);
  const metadata = new Map<string, GgufMetadataEntry>([
    [KEY.architecture, mdString(MMPROJ_ARCHITECTURE)],
    [CLIP_KEY.generalType, mdString(MMPROJ_GENERAL_TYPE)],
    [KEY.name, mdString(`${o.shapeName} mmproj random weights (seed ${o.seed}, f16)`)],
    [KEY.fileType, mdU32(FILE_TYPE.f16!)],
    [CLIP_KEY.hasVisionEncoder, mdBool(true)],
    [CLIP_KEY.projectionDim, mdU32(o.textDim)],
    [CLIP_KEY.imageSize, mdU32(v.imageSize)],
    [CLIP_KEY.patchSize, mdU32(v.patchSize)],
    [CLIP_KEY.embeddingLength, mdU32(v.dim)],
    [CLIP_KEY.feedForwardLength, mdU32(v.ffnDim)],
    [CLIP_KEY.blockCount, mdU32(v.numLayers)],
    [CLIP_KEY.headCount, mdU32(v.numHeads)],
    [CLIP_KEY.imageMean, floats(v.imageMean)],
    [CLIP_KEY.imageStd, floats(v.imageStd)],
    [CLIP_KEY.projectorType, mdString(v.projector)],
    ...(qwen ? qwen25vlMetadata(v) : v.projector === "idefics3" ? idefics3Metadata(v) : gemma3Metadata(v)),
    [KEY.quantizationVersion, mdU32(2)],
  ]);
  const tensors: GgufTensorToWrite[] = (qwen ? qwen25vlTensors(v, o.textDim) : siglipTensors(v, o.textDim))
    .map((spec) => ({ name: spec.name, shape: spec.shape, type: spec.type, data: () => generate(spec, o.seed) }));
  return { metadata, tensors };
}
