/** Small projector files for the vision tests, written by make-model's own mmproj writer and parsed in memory. */
import { parseGguf } from "../../src/gguf/reader.ts";
import { serializeGguf, type GgufToWrite } from "../../src/gguf/writer.ts";
import type { GgufFile } from "../../src/gguf/gguf-file.ts";
import { VISION_SHAPES, type VisionShape } from "../../scripts/model-shapes.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";

/** A SigLIP of width 64 (4 heads), FFN 96, at 56 px: 4 x 4 patches pooled 2 x 2 to 4 tokens of width 32. */
export const SMALL_VISION: VisionShape = {
  ...VISION_SHAPES["gemma3-4b"]!, imageSize: 56, dim: 64, ffnDim: 96, numLayers: 2, numHeads: 4, imageSeqLength: 4,
  imageMean: [0.5, 0.4, 0.3], imageStd: [0.25, 0.5, 0.75],
};
export const SMALL_TEXT_DIM = 32;

export function parsed(gguf: GgufToWrite, source = "small-mmproj.gguf"): GgufFile {
  const file = parseGguf(serializeGguf(gguf), source);
  if (!file.ok) throw new Error(file.error);
  return file.value;
}

export function smallMmproj(vision: VisionShape = SMALL_VISION, seed = 1): GgufFile {
  return parsed(randomMmproj({ shapeName: "small", vision, textDim: SMALL_TEXT_DIM, seed }));
}
