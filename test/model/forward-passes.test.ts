/**
 * A step longer than the backend's pass (Backend.maxRowsPerPass) runs through the layers in passes of rows
 * (model/forward.ts forwardPasses, llama.cpp's n_ubatch): the logits, the 'all' rows and the hidden states must be the
 * one-pass bits, on the reference backend and on the WASM kernels, with passes that cut sequences (and the WASM
 * attention's 16-row tiles) in the middle, and a sliding-window architecture.
 */
import { describe, expect, test } from "bun:test";
import type { Backend } from "../../src/backend/backend.ts";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { forwardPasses } from "../../src/model/forward.ts";
import { kvCacheGroups, singleKvCacheGroup } from "../../src/model/kv-cache-groups.ts";
import { loadModel } from "../../src/model/load-model.ts";
import type { ModelBatch } from "../../src/model/model-batch.ts";
import { Runner } from "../../src/model/runner.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { makeTinyModel, seededRandom, TINY_SHAPES } from "./tiny-model.ts";

await ensureKernels();

/** The backend with maxRowsPerPass replaced (undefined: one pass), every op still the backend's own. */
function withPassRows(backend: Backend, rows: number | undefined): Backend {
  return new Proxy(backend, {
    get(target, key) {
      if (key === "maxRowsPerPass") return rows;
      const value = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

const tokens = (n: number, vocabSize: number, seed: number) => {
  const random = seededRandom(seed);
  return Int32Array.from({ length: n }, () => Math.floor(random() * vocabSize));
};

describe.each(["reference", "wasm"] as const)("%s backend", (backendName) => {
  test.each(["llama", "gemma3"])("%s: passes of 5 or 16 rows give the one-pass logits, 'all' rows and hidden states, bit for bit", async (arch) => {
    const model = loadModel(makeTinyModel(TINY_SHAPES[arch]!, { seed: 3 }));
    if (!model.ok) throw new Error(model.error);
    const { config, weights } = model.value;
    const V = config.vocabSize;
    const results: { logits: Float32Array; rowStart: Int32Array; hidden: Float32Array }[] = [];
    for (const rows of [undefined, 5, 16]) {
      const inner = backendName === "wasm" ? await createBackend({ kind: "wasm", threads: 2 }) : new ReferenceBackend();
      const runner = new Runner(config, weights, withPassRows(inner, rows));
      // gemma3 with the hybrid manager's groups (its sliding and full layers in blocks of their own), llama with one
      const groups = arch === "gemma3" ? kvCacheGroups(config) : singleKvCacheGroup(config.numLayers);
      runner.allocateKvCache(16 * 3 * groups.groups.length, 4, groups);
      // sequence i's table in group g: 16 scattered blocks of its own
      const tables = (i: number) => groups.groups.map((_, g) => Int32Array.from({ length: 16 }, (_, b) => (i * groups.groups.length + g) * 16 + ((b * 5) % 16)));
      const seq = (i: number, tokenIds: Int32Array, startPos: number, logits: "all" | "last" | "none") =>
        ({ tokenIds, startPos, blockTable: tables(i)[0]!, blockTables: tables(i), logits });
      // B has 9 cached positions, C 4; then a ragged step: A's 23-row prefill ('all'), B's decode, C's 8 rows from 4
      await runner.execute({ sequences: [seq(1, tokens(9, V, 1), 0, "none")] });
      await runner.execute({ sequences: [seq(2, tokens(4, V, 2), 0, "none")] });
      const step: ModelBatch = {
        sequences: [seq(0, tokens(23, V, 3), 0, "all"), seq(1, tokens(1, V, 4), 9, "last"), seq(2, tokens(8, V, 5), 4, "last")],
      };
      const out = await runner.execute(step);
      // the rows as hidden states (a pooling model's step) after the same cached positions: A again from 0
      const hidden = await runner.execute({ hiddenStates: true, sequences: [seq(0, tokens(23, V, 3), 0, "none")] });
      results.push({ logits: out.logits, rowStart: out.rowStart, hidden: hidden.hidden! });
      runner.dispose();
    }
    const [one, ...passes] = results as [typeof results[0], ...typeof results];
    expect(one.logits.length).toBe(25 * V);
    expect(one.rowStart).toEqual(Int32Array.from([0, 23, 24]));
    expect(one.hidden.length).toBe(23 * config.dim);
    for (const p of passes) {
      expect(p.rowStart).toEqual(one.rowStart);
      expect(p.logits).toEqual(one.logits);
      expect(p.hidden).toEqual(one.hidden);
    }
  });
});

test("forwardPasses cuts sequences at pass boundaries and maps every logit row to its output index", () => {
  const n = 12;
  const seqs = (tableBase: number) => [
    { rowStart: 0, numRows: 9, startPos: 0, blockTable: Int32Array.of(tableBase + 1, tableBase + 2, tableBase + 3) },
    { rowStart: 9, numRows: 1, startPos: 20, blockTable: Int32Array.of(tableBase + 4, tableBase + 5, tableBase + 6, tableBase + 7, tableBase + 8, tableBase + 9) },
    { rowStart: 10, numRows: 2, startPos: 0, blockTable: Int32Array.of(tableBase + 10) },
  ];
  // two KV cache groups (a hybrid model's full and sliding layers), each with its own slots and tables
  const inputs = {
    tokenIds: Int32Array.from({ length: n }, (_, i) => i),
    positions: Int32Array.from([0, 1, 2, 3, 4, 5, 6, 7, 8, 20, 0, 1]),
    slots: [Int32Array.from({ length: n }, (_, i) => 100 + i), Int32Array.from({ length: n }, (_, i) => 200 + i)],
    sequences: [seqs(0), seqs(50)],
    kvGroups: singleKvCacheGroup(2),
    logitRows: Int32Array.from([11, 3, 9, 4]),
  };
  const passes = forwardPasses(inputs, 4);
  expect(passes.map((p) => p.firstRow)).toEqual([0, 4, 8]);
  expect(passes.map((p) => Array.from(p.inputs.tokenIds))).toEqual([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]);
  expect(passes.map((p) => p.inputs.slots.map((g) => Array.from(g)))).toEqual([
    [[100, 101, 102, 103], [200, 201, 202, 203]], [[104, 105, 106, 107], [204, 205, 206, 207]], [[108, 109, 110, 111], [208, 209, 210, 211]],
  ]);
  for (const [g, tableBase] of [[0, 0], [1, 50]] as const) {
    expect(passes.map((p) => p.inputs.sequences[g]!.map((s) => [s.rowStart, s.numRows, s.startPos, s.blockTable[0]]))).toEqual([
      [[0, 4, 0, tableBase + 1]], [[0, 4, 4, tableBase + 1]], [[0, 1, 8, tableBase + 1], [1, 1, 20, tableBase + 4], [2, 2, 0, tableBase + 10]],
    ]);
  }
  expect(passes.map((p) => [Array.from(p.inputs.logitRows), Array.from(p.outputIndex)])).toEqual([
    [[3], [1]], [[0], [3]], [[3, 1], [0, 2]],
  ]);
  expect(forwardPasses(inputs, 12)).toHaveLength(1);
  expect(() => forwardPasses(inputs, 0)).toThrow("0 rows per pass");
});
