/**
 * Bidirectional attention (gemma-embedding, EmbeddingGemma) in the fast path against the oracle: the runner's hidden
 * states (forward.ts + runner.ts on the reference backend and the WASM kernels) equal ReferenceForward.encode for
 * every position of each sequence of a ragged batch, with the symmetric window llama.cpp uses (window 300: 150
 * positions either side, so a 600-token sequence's rows start their keys in different 256-key segments of the WASM
 * kernels; window 5: 2 either side). A sequence's states do not depend on the batch; the pooled vector's dense
 * projections match; and the same model made causal gives other states (the check can fail).
 */
import { describe, expect, test } from "bun:test";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { loadModel } from "../../src/model/load-model.ts";
import type { SequenceChunk } from "../../src/model/model-batch.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { Runner } from "../../src/model/runner.ts";
import { archKey } from "../../src/gguf/names.ts";
import { GgufValueType } from "../../src/gguf/gguf-file.ts";
import { makeTinyModel, seededRandom, TINY_BIDIRECTIONAL } from "./tiny-model.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { chooseKvCacheGroups } from "../../src/engine/hybrid-kv-cache.ts";
import { hasSlidingLayers } from "../../src/model/kv-cache-groups.ts";
import { maxAbsDiff } from "../helpers/vectors.ts";

await ensureKernels();

const BLOCK_SIZE = 16;
/** max |runner - oracle| per hidden-state value: reference exact math (~1e-6), WASM's f16 KV cache */
const BACKENDS = [{ name: "reference", tolerance: 1e-4 }, { name: "wasm", tolerance: 3e-3 }] as const;
const CASES = [{ window: 300, lengths: [600, 37, 1] }, { window: 5, lengths: [20, 3] }] as const;

function tokens(n: number, seed: number): Int32Array {
  const random = seededRandom(seed);
  return Int32Array.from({ length: n }, () => Math.floor(random() * TINY_BIDIRECTIONAL.vocabSize));
}

describe.each(BACKENDS)("$name backend", (bc) => {
  test.each(CASES)("window $window, sequences of $lengths tokens: runner == oracle, batch invariant, dense head", async ({ window, lengths }) => {
    const model = loadModel(makeTinyModel({ ...TINY_BIDIRECTIONAL, slidingWindow: window }, { seed: 3 }));
    if (!model.ok) throw new Error(model.error);
    const { config, weights } = model.value;
    expect([config.bidirectional, config.slidingLayers, config.denseFeatures]).toEqual([true, [true, false, true], 48]);
    const backend = bc.name === "wasm" ? await createBackend({ kind: "wasm", threads: 2 }) : new ReferenceBackend();
    const runner = new Runner(config, weights, backend);
    const numBlocks = lengths.reduce((s, n) => s + Math.ceil(n / BLOCK_SIZE), 0) + 4;
    runner.allocateKvCache(numBlocks, BLOCK_SIZE);
    // block tables scattered over the pool, in reverse order
    let next = numBlocks;
    const seqs = lengths.map((n, i): SequenceChunk => {
      const blocks = Math.ceil(n / BLOCK_SIZE);
      next -= blocks;
      return { tokenIds: tokens(n, 10 + i), startPos: 0, blockTable: Int32Array.from({ length: blocks }, (_, b) => next + blocks - 1 - b), logits: "none" };
    });
    const batch = await runner.execute({ sequences: seqs, hiddenStates: true });
    const dim = config.dim;
    const oracle = new ReferenceForward(config, weights, 1024);
    let row = 0;
    for (const [i, seq] of seqs.entries()) {
      const want = oracle.encode([...seq.tokenIds]);
      const got = batch.hidden!.subarray(row * dim, (row + seq.tokenIds.length) * dim);
      expect({ i, close: maxAbsDiff(got, want) < bc.tolerance }).toEqual({ i, close: true });
      // alone: the same bits
      const alone = await runner.execute({ sequences: [seq], hiddenStates: true });
      expect(alone.hidden!).toEqual(got);
      row += seq.tokenIds.length;
    }
    // the pooled vector's projections (dense_2 then dense_3) as the oracle computes them
    const pooled = batch.hidden!.slice(0, dim);
    expect(maxAbsDiff(runner.projectPooled(pooled), oracle.projectPooled(pooled))).toBeLessThan(1e-5);
    // the same weights with causal attention: other states (what the bidirectional rule changes is visible)
    const causal = new ReferenceForward({ ...config, bidirectional: false }, weights, 1024);
    const first = seqs[0]!;
    expect(maxAbsDiff(causal.encode([...first.tokenIds]), oracle.encode([...first.tokenIds]))).toBeGreaterThan(100 * bc.tolerance);
    // a bidirectional row needs its whole sequence in the step
    await expect(runner.execute({ sequences: [{ ...first, startPos: 16, tokenIds: first.tokenIds.subarray(0, 4) }], hiddenStates: true })).rejects.toThrow(/bidirectional/);
    runner.dispose();
  }, 120_000);
});

test("the hybrid KV cache manager keeps a bidirectional model in one group (its windows read ahead and free nothing)", () => {
  const model = loadModel(makeTinyModel(TINY_BIDIRECTIONAL, { seed: 3 }));
  if (!model.ok) throw new Error(model.error);
  expect(hasSlidingLayers(model.value.config)).toBe(false);
  expect(chooseKvCacheGroups(model.value.config, {}).groups.groups.length).toBe(1);
});

test("a gemma-embedding GGUF without attention.sliding_window is refused with one line, as llama.cpp refuses it", () => {
  const model = loadModel(makeTinyModel(TINY_BIDIRECTIONAL, { metadata: { [archKey("gemma-embedding", "slidingWindow")]: null } }));
  expect(model.ok).toBe(false);
  if (!model.ok) expect(model.error).toContain("missing metadata gemma-embedding.attention.sliding_window");
  const mismatch = loadModel(makeTinyModel(TINY_BIDIRECTIONAL, { metadata: { [archKey("gemma-embedding", "dense2FeatOut")]: { type: GgufValueType.UINT32, value: 47 } } }));
  expect(mismatch.ok).toBe(false);
  if (!mismatch.ok) expect(mismatch.error).toContain("does not match the dense tensors");
});
