/**
 * The batched runner (forward.ts + runner.ts on the reference backend) against the oracle (reference-forward.ts), on
 * tiny random models of each architecture: same logits; a sequence's logits do not depend on the batch around it;
 * chunked prefill gives the same logits as one-shot prefill; non-contiguous block tables work.
 */
import { describe, expect, test } from "bun:test";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { loadModel } from "../../src/model/load-model.ts";
import type { SequenceChunk } from "../../src/model/model-batch.ts";
import type { ModelConfig } from "../../src/model/model-config.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { Runner } from "../../src/model/runner.ts";
import type { ModelWeights } from "../../src/model/weights.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { makeTinyModel, seededRandom, TINY_SHAPES, type TinyShape } from "./tiny-model.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { maxAbsDiff } from "../helpers/vectors.ts";

// generate and the wasm runner need build/kernels-*.wasm; `bun test` does not run the build
await ensureKernels();

const BLOCK_SIZE = 4;
const NUM_BLOCKS = 64;

function loadTiny(shape: TinyShape, matrixType = GgmlType.F32): { config: ModelConfig; weights: ModelWeights } {
  const gguf = makeTinyModel(shape, { seed: 7, matrixType });
  const model = loadModel(gguf);
  if (!model.ok) throw new Error(model.error);
  return model.value;
}

/**
 * Every check runs on the reference backend and on the WASM kernels (2 threads). Max |runner - oracle| logit error
 * allowed per backend and matrix type. Measured: reference ~1e-6; wasm 4e-4..7e-4 (f32) and 0.04 (q8_0: its kernels
 * round activations to q8 as llama.cpp does). Batch invariance and chunking must hold bit for bit on both.
 */
const BACKENDS = [
  { name: "reference", f32: 1e-4, q8_0: 1e-4 },
  { name: "wasm", f32: 3e-3, q8_0: 0.1 },
] as const;
type BackendCase = (typeof BACKENDS)[number];

async function newRunner(config: ModelConfig, weights: ModelWeights, backendName: BackendCase["name"]): Promise<Runner> {
  const backend = backendName === "wasm" ? await createBackend({ kind: "wasm", threads: 2 }) : new ReferenceBackend();
  const runner = new Runner(config, weights, backend);
  runner.allocateKvCache(NUM_BLOCKS, BLOCK_SIZE);
  return runner;
}

function randomTokens(n: number, vocabSize: number, seed: number): Int32Array {
  const random = seededRandom(seed);
  return Int32Array.from({ length: n }, () => Math.floor(random() * vocabSize));
}

/** Reference logits [tokens.length, vocab] for every position of one sequence. */
function referenceLogits(config: ModelConfig, weights: ModelWeights, tokens: Int32Array): Float32Array[] {
  const ref = new ReferenceForward(config, weights, tokens.length);
  return Array.from(tokens, (t, pos) => ref.forward(t, pos).slice());
}

const row = (logits: Float32Array, r: number, vocabSize: number): Float32Array => logits.subarray(r * vocabSize, (r + 1) * vocabSize);

const chunk = (tokenIds: Int32Array, startPos: number, blockTable: Int32Array, logits: SequenceChunk["logits"]): SequenceChunk =>
  ({ tokenIds, startPos, blockTable, logits });

describe.each(BACKENDS)("$name backend", (bc) => {
  describe.each(Object.keys(TINY_SHAPES))("%s", (arch) => {
    const shape = TINY_SHAPES[arch]!;
    const { config, weights } = loadTiny(shape);
    const V = config.vocabSize;

    test("runner logits == reference-forward logits at every position (prefill 'all', then decode)", async () => {
      const tokens = randomTokens(14, V, 11);
      const expected = referenceLogits(config, weights, tokens);
      const runner = await newRunner(config, weights, bc.name);
      // blocks deliberately out of order: paging must follow the table, not assume contiguity
      const table = Int32Array.from([9, 2, 30, 5]);
      const prefill = await runner.execute({ sequences: [chunk(tokens.subarray(0, 10), 0, table, "all")] });
      expect(prefill.rowStart).toEqual(Int32Array.from([0]));
      expect(prefill.logits.length).toBe(10 * V);
      for (let p = 0; p < 10; p++) expect(maxAbsDiff(row(prefill.logits, p, V), expected[p]!)).toBeLessThan(bc.f32);
      for (let p = 10; p < 14; p++) {
        const step = await runner.execute({ sequences: [chunk(tokens.subarray(p, p + 1), p, table, "last")] });
        expect(maxAbsDiff(step.logits, expected[p]!)).toBeLessThan(bc.f32);
      }
      runner.dispose();
    });

    test("batched == alone: a ragged batch of prefills and decodes gives each sequence its lone logits, bit for bit", async () => {
      const seqs = [randomTokens(9, V, 21), randomTokens(5, V, 22), randomTokens(12, V, 23)];
      const tables = [Int32Array.from([0, 1, 2]), Int32Array.from([3, 4]), Int32Array.from([5, 6, 7])];

      // alone: each sequence by itself, prompt[0..n-1) prefill then the last token as a decode step
      const alone: Float32Array[] = [];
      for (let i = 0; i < seqs.length; i++) {
        const runner = await newRunner(config, weights, bc.name);
        const s = seqs[i]!;
        await runner.execute({ sequences: [chunk(s.subarray(0, s.length - 1), 0, tables[i]!, "none")] });
        alone.push((await runner.execute({ sequences: [chunk(s.subarray(s.length - 1), s.length - 1, tables[i]!, "last")] })).logits);
        runner.dispose();
      }

      // together: seq 0 and 2 prefill together, then one batch with seq 0 decoding, seq 1 prefilling, seq 2 decoding
      const runner = await newRunner(config, weights, bc.name);
      const [s0, s1, s2] = seqs as [Int32Array, Int32Array, Int32Array];
      const first = await runner.execute({
        sequences: [chunk(s0.subarray(0, 8), 0, tables[0]!, "none"), chunk(s2.subarray(0, 11), 0, tables[2]!, "none")],
      });
      expect(first.rowStart).toEqual(Int32Array.from([-1, -1]));
      const mixed = await runner.execute({
        sequences: [
          chunk(s0.subarray(8), 8, tables[0]!, "last"),
          chunk(s1, 0, tables[1]!, "last"),
          chunk(s2.subarray(11), 11, tables[2]!, "last"),
        ],
      });
      expect(mixed.rowStart).toEqual(Int32Array.from([0, 1, 2]));
      for (let i = 0; i < 3; i++) expect(row(mixed.logits, i, V)).toEqual(alone[i]!);
      runner.dispose();
    });

    test("chunked prefill == one-shot prefill, bit for bit, and 'all' rows line up with rowStart", async () => {
      const tokens = randomTokens(13, V, 31);
      const table = Int32Array.from([12, 13, 14, 15]);
      const oneShot = await newRunner(config, weights, bc.name);
      const whole = await oneShot.execute({ sequences: [chunk(tokens, 0, table, "all")] });
      oneShot.dispose();

      const chunked = await newRunner(config, weights, bc.name);
      const got: Float32Array[] = [];
      for (const [start, end] of [[0, 5], [5, 6], [6, 13]] as const) {
        const r = await chunked.execute({ sequences: [chunk(tokens.subarray(start, end), start, table, "all")] });
        for (let i = 0; i < end - start; i++) got.push(row(r.logits, r.rowStart[0]! + i, V).slice());
      }
      chunked.dispose();
      got.forEach((logits, p) => expect(logits).toEqual(row(whole.logits, p, V)));
    });

    test("KV blocks exported and imported into another runner continue the sequence identically", async () => {
      const tokens = randomTokens(10, V, 41);
      const table = Int32Array.from([3, 1, 7]);
      const a = await newRunner(config, weights, bc.name);
      await a.execute({ sequences: [chunk(tokens.subarray(0, 9), 0, table, "none")] });
      const expected = await a.execute({ sequences: [chunk(tokens.subarray(9), 9, table, "last")] });
      const b = await newRunner(config, weights, bc.name);
      b.importKvBlocks(table, a.exportKvBlocks(table));
      const got = await b.execute({ sequences: [chunk(tokens.subarray(9), 9, table, "last")] });
      expect(got.logits).toEqual(expected.logits);
      // the runner's block size is what export really produces per block
      expect(a.exportKvBlocks(table).length).toBe(table.length * a.kvBytesPerBlock(BLOCK_SIZE));
      a.dispose();
      b.dispose();
    });
  });

  test("a quantized model (q8_0 matrices) matches the reference forward too", async () => {
    const { config, weights } = loadTiny(TINY_SHAPES.qwen2!, GgmlType.Q8_0);
    const tokens = randomTokens(6, config.vocabSize, 51);
    const expected = referenceLogits(config, weights, tokens);
    const runner = await newRunner(config, weights, bc.name);
    const r = await runner.execute({ sequences: [chunk(tokens, 0, Int32Array.from([0, 1]), "all")] });
    for (let p = 0; p < 6; p++) expect(maxAbsDiff(row(r.logits, p, config.vocabSize), expected[p]!)).toBeLessThan(bc.q8_0);
    runner.dispose();
  });

  test("malformed batches are engine bugs and throw with a reason", async () => {
    const { config, weights } = loadTiny(TINY_SHAPES.llama!);
    const runner = await newRunner(config, weights, bc.name);
    const tokens = Int32Array.from([1, 2, 3, 4, 5]);
    await expect(runner.execute({ sequences: [chunk(tokens, 0, Int32Array.from([0]), "last")] })).rejects.toThrow(/needs 2 KV blocks/);
    await expect(runner.execute({ sequences: [chunk(tokens, 0, Int32Array.from([0, 99]), "last")] })).rejects.toThrow(/block id 99 out of range/);
    await expect(runner.execute({ sequences: [chunk(Int32Array.from([999]), 0, Int32Array.from([0]), "last")] })).rejects.toThrow(/token id 999 out of range/);
    runner.dispose();
  });
});
