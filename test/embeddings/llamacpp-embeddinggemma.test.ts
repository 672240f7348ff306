/**
 * EmbeddingGemma (llama.cpp's gemma-embedding) against llama.cpp's embedding context (node-llama-cpp, the numeric
 * oracle): make-model's tiny-embeddinggemma-300m (6 layers: five with a symmetric window of 64, i.e. 32 positions
 * either side, and a global one; bidirectional attention; mean pooling from the GGUF; the sentence-transformers
 * dense_2 / dense_3 projections), f32 weights. fennec serves it without flags, through the engine Worker on the WASM
 * kernels, three inputs in one batch, the longest 3x the window. The 32k llama-spm vocabulary stands in for Gemma's
 * 262k one, as in test/model/llamacpp-gemma3.test.ts (the gemma3 tokenizer is checked in
 * test/tokenizer/gemma3-vocab.test.ts; the 262k-row embedding would make the file 8x larger for no other check).
 * Also checked: the oracle (ReferenceForward.encode, mean, projectPooled) against llama.cpp, and two controls that
 * must miss llama.cpp by far more: causal attention, and bidirectional attention without the window.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Llama } from "node-llama-cpp";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { MODEL_SHAPES } from "../../scripts/model-shapes.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { createEngineFrontend, type EngineFrontend } from "../../src/frontend/engine-frontend.ts";
import type { EngineArgs } from "../../src/engine/protocol.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { loadModel } from "../../src/model/load-model.ts";
import type { ModelConfig } from "../../src/model/model-config.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { nowMs } from "../../src/util/clock.ts";
import { disposeLlamaCpp, llamaCppEmbeddingInput, openLlamaCpp } from "../helpers/llama-cpp.ts";
import { maxAbsDiff, normalized } from "../helpers/vectors.ts";

setDefaultTimeout(120_000);

/** the f32 bound of test/embeddings/llamacpp-embeddings.test.ts (per value of the L2-normalised vectors) */
const TOLERANCE = 5e-4;
const ARGS: EngineArgs = {
  maxNumSeqs: 8, maxNumBatchedTokens: 512, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: 16 * 2 ** 20,
  enablePrefixCaching: true, threads: 2, device: "cpu",
};

const dir = mkdtempSync(join(tmpdir(), "fennec-embeddinggemma-"));
let llama: Llama;
let frontend: EngineFrontend | null = null;

beforeAll(async () => { llama = await openLlamaCpp(); });
afterAll(async () => {
  await frontend?.shutdown();
  await disposeLlamaCpp(llama);
  rmSync(dir, { recursive: true, force: true });
});

test("tiny-embeddinggemma-300m: fennec's vectors (no flags) and the oracle's match llama.cpp's embedding context; causal or windowless attention do not", async () => {
  const vocab = readGguf(llamaVocabPath("llama-spm"));
  if (!vocab.ok) throw new Error(vocab.error);
  const shape = MODEL_SHAPES["tiny-embeddinggemma-300m"]!;
  const path = join(dir, "embeddinggemma-f32.gguf");
  writeGgufFile(path, randomModel({ shapeName: "tiny-embeddinggemma-300m", shape, type: "f32", seed: 13, vocab: vocab.value }));

  frontend = await createEngineFrontend({ modelPath: path, engineArgs: ARGS });
  // no flag: the GGUF's pooling type makes it an embedding model
  expect(frontend.pooler?.poolingType).toBe("MEAN");

  const model = await llama.loadModel({ modelPath: path });
  const context = await model.createEmbeddingContext({ contextSize: 512, batchSize: 512, threads: 2 });
  try {
    const texts = ["The quick brown fox jumps over the lazy dog.", "a",
      // 3x the window: every sliding layer's rows see only part of the sequence
      Array.from({ length: 24 }, (_, i) => `sentence ${i} about foxes and rivers`).join(". ")];
    const inputs = texts.map((t) => llamaCppEmbeddingInput(model, model.tokenize(t).map(Number)));
    expect(inputs[2]!.length).toBeGreaterThan(3 * shape.slidingWindow!);
    const theirs: number[][] = [];
    for (const ids of inputs) theirs.push([...(await context.getEmbeddingFor(ids.map((id) => id as never))).vector]);
    const ours = await Promise.all(inputs.map((ids, i) => frontend!.encode({
      requestId: `gemma-emb-${i}`, promptTokenIds: ids, pooling: { normalize: false, dimensions: null }, priority: 0, cacheSalt: null, arrivalMs: nowMs(),
    })));
    const worst = ours.map((o, i) => maxAbsDiff(normalized(o.embedding), normalized(theirs[i]!)));

    // the oracle, and the same weights with causal attention / no window
    const { config, weights } = loadOrThrow(path);
    const oracleVector = (c: ModelConfig, ids: readonly number[]): number[] => {
      const ref = new ReferenceForward(c, weights, 512);
      const hidden = ref.encode(ids);
      const mean = new Float32Array(c.dim);
      for (let p = 0; p < ids.length; p++) for (let d = 0; d < c.dim; d++) mean[d]! += hidden[p * c.dim + d]! / ids.length;
      return normalized(ref.projectPooled(mean));
    };
    const long = inputs[2]!;
    const oracle = oracleVector(config, long);
    const causal = oracleVector({ ...config, bidirectional: false }, long);
    const windowless = oracleVector({ ...config, slidingLayers: config.slidingLayers!.map(() => false) }, long);
    const against = (v: number[]) => maxAbsDiff(v, normalized(theirs[2]!));
    console.log(`embeddinggemma: max |diff| of normalised vectors per input ${worst.map((w) => w.toExponential(2)).join(", ")} (${inputs.map((i) => i.length).join(", ")} tokens); oracle ${against(oracle).toExponential(2)}; causal ${against(causal).toExponential(2)}, no window ${against(windowless).toExponential(2)}`);
    for (const w of worst) expect(w).toBeLessThan(TOLERANCE);
    expect(against(oracle)).toBeLessThan(TOLERANCE);
    expect(against(causal)).toBeGreaterThan(10 * Math.max(...worst, against(oracle)));
    expect(against(windowless)).toBeGreaterThan(10 * Math.max(...worst, against(oracle)));
    for (const [i, o] of ours.entries()) {
      expect(o.embedding.length).toBe(shape.dim);
      expect(o.numPromptTokens).toBe(inputs[i]!.length);
      expect(Math.abs(Math.hypot(...o.embedding) / Math.hypot(...theirs[i]!) - 1)).toBeLessThan(1e-2);
    }
  } finally {
    await context.dispose();
    await model.dispose();
  }
});

function loadOrThrow(path: string) {
  const file = readGguf(path);
  if (!file.ok) throw new Error(file.error);
  const model = loadModel(file.value);
  if (!model.ok) throw new Error(model.error);
  return model.value;
}
