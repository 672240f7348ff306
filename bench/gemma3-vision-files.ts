/**
 * The vision benchmarks' model: Gemma 3's SigLIP projector at 896 px (4096 patches, 1152 wide, 16 heads) with `layers`
 * of its 27 layers (random f16 weights) under the tiny Gemma 3 language model, so llama.cpp's tools load it too.
 */
import { join } from "node:path";
import { readGguf } from "../src/gguf/reader.ts";
import { writeGgufFile } from "../src/gguf/writer.ts";
import { MODEL_SHAPES, VISION_SHAPES, vocabPath } from "../scripts/model-shapes.ts";
import { randomMmproj } from "../scripts/random-mmproj.ts";
import { randomModel } from "../scripts/random-model.ts";

export function writeGemma3VisionFiles(dir: string, layers: number): { lmPath: string; mmPath: string } {
  const vocab = readGguf(vocabPath("gemma3"));
  if (!vocab.ok) throw new Error(vocab.error);
  const lm = MODEL_SHAPES["tiny-gemma3-4b"]!;
  const vision = { ...VISION_SHAPES["gemma3-4b"]!, numLayers: layers };
  const lmPath = join(dir, "lm.gguf"), mmPath = join(dir, "mmproj.gguf");
  writeGgufFile(lmPath, randomModel({ shapeName: "tiny-gemma3-4b", shape: lm, type: "f16", seed: 1, vocab: vocab.value }));
  writeGgufFile(mmPath, randomMmproj({ shapeName: "gemma3-4b", vision, textDim: lm.dim, seed: 1 }));
  return { lmPath, mmPath };
}
