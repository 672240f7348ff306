/**
 * mmproj GGUF metadata keys and tensor names as llama.cpp spells them (tools/mtmd/clip-impl.h: KEY_*, TN_*; written by
 * conversion/base.py MmprojModel.set_gguf_parameters and gguf-py's tensor_mapping.py). Every other vision file takes
 * its strings from here.
 */

/** general.architecture and general.type of a projector file */
export const MMPROJ_ARCHITECTURE = "clip";
export const MMPROJ_GENERAL_TYPE = "mmproj";

export const CLIP_KEY = {
  generalType: "general.type",
  projectorType: "clip.projector_type",
  hasVisionEncoder: "clip.has_vision_encoder",
  useGelu: "clip.use_gelu",
  useSilu: "clip.use_silu",
  projectionDim: "clip.vision.projection_dim",
  imageSize: "clip.vision.image_size",
  patchSize: "clip.vision.patch_size",
  embeddingLength: "clip.vision.embedding_length",
  feedForwardLength: "clip.vision.feed_forward_length",
  blockCount: "clip.vision.block_count",
  headCount: "clip.vision.attention.head_count",
  /** optional (clip.cpp: default head_count) */
  headCountKv: "clip.vision.attention.head_count_kv",
  /** optional (clip.cpp: default embedding_length / head_count) */
  headDim: "clip.vision.attention.head_dim",
  layerNormEps: "clip.vision.attention.layer_norm_epsilon",
  imageMean: "clip.vision.image_mean",
  imageStd: "clip.vision.image_std",
  /** Gemma 3: written only when not 4 (test models); Idefics3: the pixel-shuffle factor */
  projectorScaleFactor: "clip.vision.projector.scale_factor",
  /** Idefics3: the preprocessor's size.longest_edge (optional: older files lack it) */
  preprocImageSize: "clip.vision.preproc_image_size",
} as const;

/** The vision tensor of one ViT layer: `v.blk.N.<name>.{weight,bias}`. */
const LAYER_TENSOR = {
  attnQ: "attn_q", attnK: "attn_k", attnV: "attn_v", attnOut: "attn_out",
  ln1: "ln1", ln2: "ln2", ffnUp: "ffn_up", ffnDown: "ffn_down",
} as const;
export type ClipLayerTensor = keyof typeof LAYER_TENSOR;
export const CLIP_LAYER_TENSORS = Object.keys(LAYER_TENSOR) as ClipLayerTensor[];

/** Tensors outside the layers. */
export const CLIP_TENSOR = {
  patchEmbd: "v.patch_embd.weight",
  patchBias: "v.patch_embd.bias",
  positionEmbd: "v.position_embd.weight",
  postLnWeight: "v.post_ln.weight",
  postLnBias: "v.post_ln.bias",
  /** Gemma 3 projector: HF mm_input_projection_weight, [vision width rows][text width] (x @ W) */
  mmInputProjection: "mm.input_projection.weight",
  /** Gemma 3 projector RMSNorm weight; the converter stores HF's weight + 1 (conversion/gemma.py) */
  mmSoftEmbNorm: "mm.soft_emb_norm.weight",
  /** Idefics3 projector (clip-impl.h TN_MM_PROJECTOR): HF connector.modality_projection.proj, [text width][vision width x scale^2] */
  mmModelFc: "mm.model.fc.weight",
} as const;

/** @example clipLayerTensorName("attnQ", 3, "bias") // "v.blk.3.attn_q.bias" */
export function clipLayerTensorName(key: ClipLayerTensor, layer: number, part: "weight" | "bias"): string {
  return `v.blk.${layer}.${LAYER_TENSOR[key]}.${part}`;
}

/** clip.projector_type values (clip-impl.h PROJECTOR_TYPE_NAMES) fennec reads; the rest are refused by name. */
export const SUPPORTED_PROJECTORS = ["gemma3", "idefics3"] as const;
export type ProjectorType = (typeof SUPPORTED_PROJECTORS)[number];
