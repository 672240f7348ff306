/**
 * Embeddings against llama.cpp (node-llama-cpp's embedding context, the numeric oracle): random-weight GGUFs of the
 * Qwen3-Embedding-0.6B shape (make-model's tiny-qwen3-embedding-0.6b: 2 layers, the real qwen2 vocabulary) with the
 * GGUF pooling type last (f32 weights), mean and cls (q8_0). fennec serves each without flags, through the engine Worker on the kernel
 * backend, several inputs in one batch and a long one in prefill chunks. node-llama-cpp returns llama.cpp's pooled
 * vector unnormalised (AddonContext::GetEmbedding copies llama_get_embeddings_seq), so fennec is asked for
 * normalize: false and both are also compared after L2 normalisation.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
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
import { nowMs } from "../../src/util/clock.ts";
import { disposeLlamaCpp, llamaCppEmbeddingInput, openLlamaCpp } from "../helpers/llama-cpp.ts";
import { maxAbsDiff, normalized } from "../helpers/vectors.ts";

setDefaultTimeout(120_000);

/**
 * Largest allowed |ours - llama.cpp| per value of the L2-normalised embeddings (f16 KV cache on both sides). Measured
 * 2026-12-01 on these models: f32 weights 2e-6..9.5e-5 (the f16 KV rounding is the difference); q8_0 weights
 * 3e-4..1.9e-3, because llama.cpp rounds every matmul input to q8_0 (its vec_dot_type) and fennec does not (the
 * same cause test/model/llamacpp-logits.test.ts measures for logits).
 */
const TOLERANCE: Readonly<Record<string, number>> = { f32: 5e-4, q8_0: 5e-3 };

const ARGS: EngineArgs = {
  maxNumSeqs: 8, maxNumBatchedTokens: 48, maxModelLen: 512, blockSize: 16, kvCacheMemoryBytes: 16 * 2 ** 20,
  enablePrefixCaching: true, threads: 2, device: "cpu",
};

const dir = mkdtempSync(join(tmpdir(), "fennec-embeddings-"));
let llama: Llama;
const frontends: EngineFrontend[] = [];

beforeAll(async () => { llama = await openLlamaCpp(); });
afterAll(async () => {
  await Promise.all(frontends.map((f) => f.shutdown()));
  await disposeLlamaCpp(llama);
  rmSync(dir, { recursive: true, force: true });
});

/** Qwen3-Embedding's own pooling on exact weights; MEAN (summed over prefill chunks) and CLS on q8_0 */
const CASES = [["last", "f32"], ["mean", "q8_0"], ["cls", "q8_0"]] as const;

describe.each(CASES)("tiny-qwen3-embedding-0.6b, GGUF pooling type %s, %s weights", (pooling, type) => {
  test("vectors match llama.cpp's embedding context", async () => {
    const vocab = readGguf(llamaVocabPath("qwen2"));
    if (!vocab.ok) throw new Error(vocab.error);
    const shape = { ...MODEL_SHAPES["tiny-qwen3-embedding-0.6b"]!, poolingType: pooling };
    const path = join(dir, `emb-${pooling}-${type}.gguf`);
    writeGgufFile(path, randomModel({ shapeName: "tiny-qwen3-embedding-0.6b", shape, type, seed: 11, vocab: vocab.value }));

    const frontend = await createEngineFrontend({ modelPath: path, engineArgs: ARGS });
    frontends.push(frontend);
    // no flag: the GGUF's pooling type makes it an embedding model
    expect(frontend.pooler?.poolingType).toBe(pooling.toUpperCase() as "LAST" | "MEAN" | "CLS");

    const model = await llama.loadModel({ modelPath: path });
    const context = await model.createEmbeddingContext({ contextSize: 512, batchSize: 512, threads: 2 });
    try {
      const texts = ["The quick brown fox jumps over the lazy dog.", "Embeddings for retrieval", "a",
        // longer than --max-num-batched-tokens (48): pooled over several prefill chunks
        Array.from({ length: 30 }, (_, i) => `word${i} and more`).join(" ")];
      const inputs = texts.map((t) => llamaCppEmbeddingInput(model, model.tokenize(t).map(Number)));
      expect(inputs[3]!.length).toBeGreaterThan(ARGS.maxNumBatchedTokens * 2);
      const theirs: number[][] = [];
      for (const ids of inputs) theirs.push([...(await context.getEmbeddingFor(ids.map((id) => id as never))).vector]);
      // all at once: one batch through the scheduler
      const ours = await Promise.all(inputs.map((ids, i) => frontend.encode({
        requestId: `emb-${pooling}-${i}`, promptTokenIds: ids, pooling: { normalize: false, dimensions: null }, priority: 0, cacheSalt: null, arrivalMs: nowMs(),
      })));
      const worst = ours.map((o, i) => maxAbsDiff(normalized(o.embedding), normalized(theirs[i]!)));
      console.log(`${pooling}: max |diff| of normalised vectors per input: ${worst.map((w) => w.toExponential(2)).join(", ")}; raw norms ours ${ours.map((o) => Math.hypot(...o.embedding).toFixed(3)).join(", ")}, llama.cpp ${theirs.map((t) => Math.hypot(...t).toFixed(3)).join(", ")}`);
      for (const w of worst) expect(w).toBeLessThan(TOLERANCE[type]!);
      for (const [i, o] of ours.entries()) {
        expect(o.embedding.length).toBe(shape.dim);
        expect(o.numPromptTokens).toBe(inputs[i]!.length);
        // unnormalised: the raw pooled state, as llama.cpp returns it
        expect(Math.abs(Math.hypot(...o.embedding) / Math.hypot(...theirs[i]!) - 1)).toBeLessThan(1e-2);
      }
      // the default (normalize true) is the unit vector of the same state
      const unit = await frontend.encode({ requestId: `emb-${pooling}-unit`, promptTokenIds: inputs[0]!, pooling: { normalize: true, dimensions: null }, priority: 0, cacheSalt: null, arrivalMs: nowMs() });
      expect(Math.hypot(...unit.embedding)).toBeCloseTo(1, 5);
      expect(maxAbsDiff(Array.from(unit.embedding), normalized(ours[0]!.embedding))).toBeLessThan(1e-6);
    } finally {
      await context.dispose();
      await model.dispose();
    }
  });
});
