/**
 * tiny-qwen2.5-vl-3b for the Qwen2.5-VL oracle tests: make-model's random language model and projector, with the
 * language model's weights scaled up (peakedModel), written to a folder and the projector read back.
 */
import { join } from "node:path";
import { readGguf } from "../../src/gguf/reader.ts";
import { tensorName } from "../../src/gguf/names.ts";
import { writeGgufFile, type GgufToWrite } from "../../src/gguf/writer.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { readQwen25vlConfig, readQwen25vlWeights, type Qwen25vlConfig, type Qwen25vlWeights } from "../../src/vision/qwen25vl-mmproj.ts";
import { MODEL_SHAPES, VISION_SHAPES, vocabPath } from "../../scripts/model-shapes.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";
import { randomModel } from "../../scripts/random-model.ts";

export const SHAPE = "tiny-qwen2.5-vl-3b";

/**
 * The random model in f32 with its token embedding (the tied LM head too) at std 0.5 and its layers' matrices at
 * 0.1 (make-model's 0.02 times 25 and 5): peaked logits, and a residual stream the layers (so the context) dominate
 * rather than the token's own embedding (which the tied head would just echo back).
 */
export function peakedModel(seed: number): GgufToWrite {
  const vocab = readGguf(vocabPath(MODEL_SHAPES[SHAPE]!.vocab));
  if (!vocab.ok) throw new Error(vocab.error);
  const model = randomModel({ shapeName: SHAPE, shape: MODEL_SHAPES[SHAPE]!, type: "f32", seed, vocab: vocab.value });
  const embd = tensorName("tokenEmbd");
  return {
    metadata: model.metadata,
    tensors: model.tensors.map((t) => t.shape.length !== 2 ? t : {
      ...t,
      data: () => {
        if (t.type !== GgmlType.F32) throw new Error(`${t.name} is not f32`);
        const scale = t.name === embd ? 25 : 5;
        const bytes = typeof t.data === "function" ? t.data() : t.data;
        const values = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
        for (let i = 0; i < values.length; i++) values[i] = values[i]! * scale;
        return new Uint8Array(values.buffer);
      },
    }),
  };
}

/** The written model and projector, read back. */
export function writeQwen25vlModels(dir: string, seed: number): { lmPath: string; mmPath: string; c: Qwen25vlConfig; w: Qwen25vlWeights } {
  const lmPath = join(dir, `lm-${seed}.gguf`), mmPath = join(dir, `mmproj-${seed}.gguf`);
  writeGgufFile(lmPath, peakedModel(seed));
  writeGgufFile(mmPath, randomMmproj({ shapeName: SHAPE, vision: VISION_SHAPES[SHAPE]!, textDim: MODEL_SHAPES[SHAPE]!.dim, seed }));
  const mm = readGguf(mmPath);
  if (!mm.ok) throw new Error(mm.error);
  const c = readQwen25vlConfig(mm.value);
  if (!c.ok) throw new Error(c.error);
  const w = readQwen25vlWeights(mm.value, c.value);
  if (!w.ok) throw new Error(w.error);
  return { lmPath, mmPath, c: c.value, w: w.value };
}

