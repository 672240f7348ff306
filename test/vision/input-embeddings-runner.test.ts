/**
 * The engine seam for images: a chunk's `inputEmbeddings` replace its rows' token embeddings in the batched forward
 * (model-batch.ts ChunkEmbeddings, runner.ts, forward.ts). Feeding the token's own embedding row gives the token's
 * logits bit for bit; a span that attends ahead (Gemma 3's image) changes its own rows and never the rows before it.
 */
import { describe, expect, test } from "bun:test";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { loadModel } from "../../src/model/load-model.ts";
import type { ChunkEmbeddings, SequenceChunk } from "../../src/model/model-batch.ts";
import { Runner } from "../../src/model/runner.ts";
import { dequantizeTensor } from "../../src/tensor/dtypes.ts";
import { makeTinyModel, TINY_SHAPES } from "../model/tiny-model.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";

await ensureKernels();

const { config, weights } = (() => {
  const m = loadModel(makeTinyModel(TINY_SHAPES.llama!, { seed: 3 }));
  if (!m.ok) throw new Error(m.error);
  return m.value;
})();
const table = dequantizeTensor(weights.tokenEmbd); // [vocab][dim]
const tokens = Int32Array.from([5, 17, 3, 42, 8, 8, 29, 11, 2, 60]);
const blockTable = Int32Array.from([3, 0, 7]);

async function logits(backendName: "reference" | "wasm", inputEmbeddings?: ChunkEmbeddings[]): Promise<Float32Array> {
  const backend = backendName === "wasm" ? await createBackend({ kind: "wasm", threads: 2 }) : new ReferenceBackend();
  const runner = new Runner(config, weights, backend);
  runner.allocateKvCache(16, 4);
  const chunk: SequenceChunk = { tokenIds: tokens, startPos: 0, blockTable, logits: "all", ...(inputEmbeddings ? { inputEmbeddings } : {}) };
  const out = (await runner.execute({ sequences: [chunk] })).logits;
  runner.dispose();
  return out;
}

/** rows [row, row + n) of the chunk fed their own tokens' embedding rows */
const ownRows = (row: number, n: number, attendAhead: boolean): ChunkEmbeddings => {
  const data = new Float32Array(n * config.dim);
  for (let r = 0; r < n; r++) data.set(table.subarray(tokens[row + r]! * config.dim, (tokens[row + r]! + 1) * config.dim), r * config.dim);
  return { row, numRows: n, data, attendAhead };
};

describe.each(["reference", "wasm"] as const)("input embeddings on the %s backend", (backend) => {
  const V = config.vocabSize;

  test("a token's own embedding row as input gives the token's logits, bit for bit", async () => {
    expect(await logits(backend, [ownRows(3, 4, false)])).toEqual(await logits(backend));
  });

  test("other embeddings change exactly the rows from the span on", async () => {
    const other = ownRows(3, 4, false);
    const scaled = { ...other, data: other.data.map((x) => x * -2) };
    const base = await logits(backend);
    const changed = await logits(backend, [scaled]);
    expect(changed.subarray(0, 3 * V)).toEqual(base.subarray(0, 3 * V));
    for (let r = 3; r < tokens.length; r++) expect(changed.subarray(r * V, (r + 1) * V)).not.toEqual(base.subarray(r * V, (r + 1) * V));
  });

  test("a span that attends ahead: the rows before it are untouched, its first row sees the rest of the span", async () => {
    const causal = await logits(backend, [ownRows(3, 4, false)]);
    const ahead = await logits(backend, [ownRows(3, 4, true)]);
    expect(ahead.subarray(0, 3 * V)).toEqual(causal.subarray(0, 3 * V));
    expect(ahead.subarray(3 * V, 4 * V)).not.toEqual(causal.subarray(3 * V, 4 * V));
  });
});
