/**
 * ONE conformance suite for every backend: each op of the Backend interface, on random data with odd shapes and row
 * counts that do not divide by the thread count, against the reference backend (the oracle). Walks WEIGHT_TYPES.
 * To add a backend: one row in BACKENDS (`unavailable` returns the skip reason, or null).
 * Tolerances (relative to the rms of the reference output):
 *   matmul, quantized weights: 3e-2 (activations are quantized to int8 per 32, as llama.cpp does)
 *   matmul, float weights: 1e-4 (f32 sums vs the reference's f64 sums)
 *   attention: 4e-3 (K/V stored as f16); over the 8-bit cache 1e-4 (the reference applies the same int8 rounding,
 *   tensor/kv-q8.ts, so only the sums' order differs); everything else: 1e-5.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ropeAngles } from "../../src/model/rope-scaling.ts";
import type { AttentionSequence, Backend, KvCacheDtype, KvCacheShape } from "../../src/backend/backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { GgmlType, WEIGHT_TYPES, weightType, type WeightType } from "../../src/tensor/dtypes.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { randomFloats, randomWeight } from "./random-weights.ts";
import { rng } from "../helpers/prng.ts";

await ensureKernels();
const { createWasmBackend } = await import("../../src/backend/wasm/wasm-backend.ts");
const { supportsLevel } = await import("../../src/backend/wasm/kernel-module.ts");

interface BackendEntry {
  readonly name: string;
  readonly create: () => Promise<Backend>;
  /** why this backend cannot run here, or null */
  readonly unavailable: () => string | null;
}

const wasmReason = (level: "scalar" | "simd" | "relaxed-simd"): string | null =>
  supportsLevel(level) ? null : `this runtime does not validate ${level} wasm`;

// Thread counts 3 and 2 with row counts such as 131: shares never divide evenly.
export const BACKENDS: readonly BackendEntry[] = [
  { name: "reference", create: async () => new ReferenceBackend(), unavailable: () => null },
  { name: "wasm-scalar", create: () => createWasmBackend({ threads: 3, simd: "scalar" }), unavailable: () => wasmReason("scalar") },
  { name: "wasm-simd", create: () => createWasmBackend({ threads: 2, simd: "simd" }), unavailable: () => wasmReason("simd") },
  { name: "wasm-relaxed-simd", create: () => createWasmBackend({ threads: 3, simd: "relaxed-simd" }), unavailable: () => wasmReason("relaxed-simd") },
  (await import("../webgpu/conformance-entry.ts")).WEBGPU_CONFORMANCE_ENTRY,
];

const FLOAT_TYPES = new Set([GgmlType.F32, GgmlType.F16, GgmlType.BF16]);

/** max |a - b| / rms(b), with a readable failure. */
function expectClose(actual: Float32Array, expected: Float32Array, tol: number, label: string): void {
  expect(actual.length).toBe(expected.length);
  let sumSq = 0;
  let maxErr = 0;
  let worst = 0;
  for (let i = 0; i < expected.length; i++) {
    sumSq += expected[i]! * expected[i]!;
    const err = Math.abs(actual[i]! - expected[i]!);
    if (!(err <= maxErr)) {
      maxErr = err;
      worst = i;
    }
  }
  const rms = Math.sqrt(sumSq / Math.max(1, expected.length)) || 1;
  const rel = maxErr / rms;
  if (!(rel <= tol)) {
    throw new Error(`${label}: max error ${maxErr.toExponential(3)} at ${worst} (got ${actual[worst]}, want ${expected[worst]}) = ${rel.toExponential(3)} x rms, tolerance ${tol}`);
  }
}

async function upload(b: Backend, data: Float32Array) {
  const buf = b.alloc(data.length);
  b.write(buf, data);
  return buf;
}

function quantCols(wt: WeightType): readonly number[] {
  if (FLOAT_TYPES.has(wt.type)) return [37, 600];
  return wt.blockSize === 256 ? [512] : [96, 512];
}

const KV: KvCacheShape = { numLayers: 2, numBlocks: 9, blockSize: 4, numKvHeads: 2, headDim: 12 };
const NUM_HEADS = 6;

/**
 * Rows longer than the WASM kernels' key segment (256): sequence A has 600 cached positions and 2 new rows (3 segments
 * each), B a 5-row prefill, C 261 cached positions and 1 new row (2 segments). GQA 8/2, headDim 32. Returns the output
 * of the whole batch and of A alone (batch invariance).
 */
const LONG_KV: KvCacheShape = { numLayers: 1, numBlocks: 64, blockSize: 16, numKvHeads: 2, headDim: 32 };
const LONG_HEADS = 8;
async function longAttention(be: Backend, dtype: KvCacheDtype = "f16", slidingWindow = 0): Promise<{ batch: Float32Array; aloneA: Float32Array; freed: Float32Array | null }> {
  const { blockSize, numKvHeads, headDim } = LONG_KV;
  const kvDim = numKvHeads * headDim;
  const qDim = LONG_HEADS * headDim;
  const table = (first: number, n: number) => Int32Array.from({ length: n }, (_, i) => first + ((i * 7) % n)); // scattered
  const seqs: AttentionSequence[] = [
    { rowStart: 0, numRows: 2, startPos: 600, blockTable: table(0, 38) },
    { rowStart: 2, numRows: 5, startPos: 0, blockTable: table(38, 1) },
    { rowStart: 7, numRows: 1, startPos: 261, blockTable: table(39, 17) },
  ];
  be.allocKvCache({ ...LONG_KV, dtype });
  const r = rng(77);
  for (const s of seqs) {
    const n = s.startPos + s.numRows;
    const slots = Int32Array.from({ length: n }, (_, p) => s.blockTable[Math.floor(p / blockSize)]! * blockSize + (p % blockSize));
    be.kvStore(0, await upload(be, randomFloats(n * kvDim, r, 2)), await upload(be, randomFloats(n * kvDim, r, 2)), slots);
  }
  const q = await upload(be, randomFloats(8 * qDim, rng(78), 2));
  const out = be.alloc(8 * qDim);
  be.attention(out, q, 0, LONG_HEADS, seqs, slidingWindow);
  const batch = await be.read(out, 8 * qDim);
  const alone = be.alloc(8 * qDim);
  be.attention(alone, q, 0, LONG_HEADS, [seqs[0]!], slidingWindow);
  const aloneA = await be.read(alone, 2 * qDim);
  if (slidingWindow === 0) return { batch, aloneA, freed: null };
  // blocks wholly before every row's window of a sequence, as a KV manager that frees them would leave the table:
  // each points at block 63, filled with NaN; the output must not change by a bit (they are never read)
  const nan = new Float32Array(blockSize * kvDim).fill(NaN);
  be.kvStore(0, await upload(be, nan), await upload(be, nan), Int32Array.from({ length: blockSize }, (_, i) => 63 * blockSize + i));
  const freedSeqs = seqs.map((s) => {
    const firstKey = Math.max(0, s.startPos + 1 - slidingWindow);
    return { ...s, blockTable: s.blockTable.map((b, i) => ((i + 1) * blockSize <= firstKey ? 63 : b)) };
  });
  const freedOut = be.alloc(8 * qDim);
  be.attention(freedOut, q, 0, LONG_HEADS, freedSeqs, slidingWindow);
  return { batch, aloneA, freed: await be.read(freedOut, 8 * qDim) };
}

/**
 * Bidirectional attention (gemma-embedding): whole sequences of 400, 5 and 262 rows from position 0, each row over its
 * whole sequence or, with a window, over the keys within window / 2 of it either side (backend.ts attentionKeys).
 * Returns the batch's output and A's alone.
 */
async function bidirectionalAttention(be: Backend, slidingWindow: number, bidirectional = true, dtype: KvCacheDtype = "f16"): Promise<{ batch: Float32Array; aloneA: Float32Array }> {
  const { blockSize, numKvHeads, headDim } = LONG_KV;
  const kvDim = numKvHeads * headDim;
  const qDim = LONG_HEADS * headDim;
  const table = (first: number, n: number) => Int32Array.from({ length: n }, (_, i) => first + ((i * 7) % n)); // scattered
  const seqs: AttentionSequence[] = [
    { rowStart: 0, numRows: 400, startPos: 0, blockTable: table(0, 25) },
    { rowStart: 400, numRows: 5, startPos: 0, blockTable: table(25, 1) },
    { rowStart: 405, numRows: 262, startPos: 0, blockTable: table(26, 17) },
  ];
  const numRows = 667;
  be.allocKvCache({ ...LONG_KV, dtype });
  const r = rng(79);
  for (const s of seqs) {
    const slots = Int32Array.from({ length: s.numRows }, (_, p) => s.blockTable[Math.floor(p / blockSize)]! * blockSize + (p % blockSize));
    be.kvStore(0, await upload(be, randomFloats(s.numRows * kvDim, r, 2)), await upload(be, randomFloats(s.numRows * kvDim, r, 2)), slots);
  }
  const q = await upload(be, randomFloats(numRows * qDim, rng(80), 2));
  const out = be.alloc(numRows * qDim);
  be.attention(out, q, 0, LONG_HEADS, seqs, slidingWindow, bidirectional);
  const batch = await be.read(out, numRows * qDim);
  const alone = be.alloc(numRows * qDim);
  be.attention(alone, q, 0, LONG_HEADS, [seqs[0]!], slidingWindow, bidirectional);
  return { batch, aloneA: await be.read(alone, 400 * qDim) };
}

describe.each(BACKENDS.map((e) => [e.name, e] as const))("backend %s, bidirectional attention", (name, entry) => {
  const reason = entry.unavailable();
  // 0: every row sees its whole sequence (2 segments for A); 200: 100 either side, so A's rows start their keys in
  // either segment; 3: one either side
  (reason === null ? test : test.skip).each([0, 200, 3])("window %d (gemma-embedding, llama.cpp LLAMA_SWA_TYPE_SYMMETRIC): matches the oracle, batch invariant, differs from causal", async (window) => {
    const be = await entry.create();
    try {
      const got = await bidirectionalAttention(be, window);
      const want = await bidirectionalAttention(new ReferenceBackend(), window);
      // every row averages up to 400 f16-rounded V rows, so the output's rms (the yardstick) is smaller than in the
      // causal cases while the f16 error is not: measured 4.0e-3..4.7e-3 x rms on WASM (f16 cache); WebGPU's is f32
      expectClose(got.batch, want.batch, 6e-3, `${name} bidirectional attention`);
      // over the 8-bit cache the reference rounds K and V alike, so a key too many or too few would show (1e-4)
      if (name.startsWith("wasm")) {
        expectClose((await bidirectionalAttention(be, window, true, "q8")).batch, (await bidirectionalAttention(new ReferenceBackend(), window, true, "q8")).batch, 1e-4, `${name} bidirectional attention, q8 cache`);
      }
      expect(got.aloneA).toEqual(got.batch.subarray(0, got.aloneA.length));
      const causal = await bidirectionalAttention(new ReferenceBackend(), window, false);
      let moved = 0;
      for (let i = 0; i < causal.batch.length; i++) moved = Math.max(moved, Math.abs(causal.batch[i]! - want.batch[i]!));
      expect(moved).toBeGreaterThan(1e-2);
    } finally {
      be.dispose();
    }
  });
});

describe.each(BACKENDS.map((e) => [e.name, e] as const))("backend %s", (name, entry) => {
  const reason = entry.unavailable();
  let backend: Backend;
  const oracle = new ReferenceBackend();
  beforeAll(async () => {
    if (reason === null) backend = await entry.create();
  });
  afterAll(() => {
    if (reason === null) backend.dispose();
  });
  const it = reason === null ? test : test.skip;
  if (reason !== null) test.skip(`skipped: ${reason}`, () => {});

  describe.each(WEIGHT_TYPES.map((w) => [w.name, w] as const))("weight type %s", (_typeName, wt) => {
    for (const cols of quantCols(wt)) {
      // 131 rows: pairs of 4-row groups and a partial last group; 13 tokens: three 4-token tiles and a single token
      it(`matmul [131 x ${cols}] for 1 and 13 tokens, batch invariant`, async () => {
        const random = rng(cols * 31 + wt.type);
        const rows = 131;
        const src = randomWeight(wt, rows, cols, random);
        const w = backend.loadWeight(src);
        const wRef = oracle.loadWeight(src);
        const numTokens = 13;
        const x = randomFloats(numTokens * cols, random);
        const xb = await upload(backend, x);
        const out = backend.alloc(numTokens * rows);
        backend.matmul(out, w, xb, numTokens);
        const got = await backend.read(out, numTokens * rows);
        const xr = await upload(oracle, x);
        const outRef = oracle.alloc(numTokens * rows);
        oracle.matmul(outRef, wRef, xr, numTokens);
        const want = await oracle.read(outRef, numTokens * rows);
        expectClose(got, want, FLOAT_TYPES.has(wt.type) ? 1e-4 : 3e-2, `${name} ${wt.name} matmul`);
        // batch invariance: each token alone gives the same bits as inside the batch
        for (const t of [0, 3, 6, 9, 12]) {
          const x1 = await upload(backend, x.subarray(t * cols, (t + 1) * cols));
          const o1 = backend.alloc(rows);
          backend.matmul(o1, w, x1, 1);
          expect(await backend.read(o1, rows)).toEqual(got.subarray(t * rows, (t + 1) * rows));
          backend.free(x1);
          backend.free(o1);
        }
        backend.free(xb);
        backend.free(out);
      });
    }

    it("embed of odd token ids", async () => {
      const random = rng(7 + wt.type);
      const cols = wt.blockSize === 256 ? 256 : wt.blockSize === 32 ? 64 : 41;
      const src = randomWeight(wt, 23, cols, random);
      const ids = new Int32Array([0, 22, 5, 5, 13]);
      const out = backend.alloc(ids.length * cols);
      backend.embed(out, backend.loadWeight(src), ids);
      const outRef = oracle.alloc(ids.length * cols);
      oracle.embed(outRef, oracle.loadWeight(src), ids);
      expectClose(await backend.read(out, ids.length * cols), await oracle.read(outRef, ids.length * cols), 1e-5, `${name} ${wt.name} embed`);
    });
  });

  it("embed rejects an out-of-range token id with one line", () => {
    const w = backend.loadWeight(randomWeight(weightType(GgmlType.F32)!, 4, 8, rng(17)));
    const out = backend.alloc(8);
    for (const id of [4, -1]) {
      expect(() => backend.embed(out, w, Int32Array.from([id]))).toThrow(`embed: token id ${id} out of range [0, 4)`);
    }
  });

  it("rmsNorm, also per head (QK-norm shape) and in place", async () => {
    const random = rng(11);
    const f32 = weightType(GgmlType.F32)!;
    // dim 96: more values per row than a 64-thread workgroup; the in-place call is how the model runs QK-norm
    // [70, 300]: enough rows that the wasm backend spreads them over its threads (a prefill chunk)
    for (const [numRows, dim] of [[5, 37], [15, 8], [3, 96], [70, 300]] as const) {
      const x = randomFloats(numRows * dim, random, 3);
      const w = randomWeight(f32, 1, dim, random, "norm");
      const out = backend.alloc(numRows * dim);
      const wb = backend.loadWeight(w);
      const xb = await upload(backend, x);
      backend.rmsNorm(out, xb, wb, numRows, dim, 1e-5);
      const outRef = oracle.alloc(numRows * dim);
      oracle.rmsNorm(outRef, await upload(oracle, x), oracle.loadWeight(w), numRows, dim, 1e-5);
      const want = await oracle.read(outRef, numRows * dim);
      expectClose(await backend.read(out, numRows * dim), want, 1e-5, `${name} rmsNorm`);
      backend.rmsNorm(xb, xb, wb, numRows, dim, 1e-5);
      expectClose(await backend.read(xb, numRows * dim), want, 1e-5, `${name} rmsNorm in place`);
    }
  });

  it("geluMul (tanh-GELU, also in place into the gate, past +-10, and long enough to spread over threads), scale in place", async () => {
    const random = rng(19);
    for (const n of [3 * 29, 20001]) {
      const gate = randomFloats(n, random, 4);
      gate[0] = 12;
      gate[1] = -12;
      gate[2] = 0;
      const up = randomFloats(n, random, 2);
      const results: Float32Array[][] = [];
      for (const be of [backend, oracle]) {
        const g = await upload(be, gate);
        const u = await upload(be, up);
        const out = be.alloc(n);
        be.geluMul(out, g, u, n);
        const fresh = await be.read(out, n);
        be.geluMul(g, g, u, n);
        const inPlace = await be.read(g, n);
        be.scale(u, 25.3, n);
        results.push([fresh, inPlace, await be.read(u, n)]);
      }
      ["geluMul", "geluMul in place", "scale"].forEach((op, i) => expectClose(results[0]![i]!, results[1]![i]!, 1e-5, `${name} ${op} n=${n}`));
    }
  });

  it("addBias, siluMul, add (aliased), gatherRows (exact, also in place)", async () => {
    const random = rng(12);
    const f32 = weightType(GgmlType.F32)!;
    const n = 3 * 29;
    const a = randomFloats(n, random, 4);
    const b = randomFloats(n, random, 4);
    const bias = randomWeight(f32, 1, 29, random, "bias");
    const results: Float32Array[][] = [];
    for (const be of [backend, oracle]) {
      const ab = await upload(be, a);
      const bb = await upload(be, b);
      const out = be.alloc(n);
      be.siluMul(out, ab, bb, n);
      const silu = await be.read(out, n);
      be.add(ab, ab, bb, n);
      const sum = await be.read(ab, n);
      be.addBias(bb, be.loadWeight(bias), 3);
      const biased = await be.read(bb, n);
      be.siluMul(ab, ab, bb, n); // out aliasing the gate, as the MLP calls it
      const siluInPlace = await be.read(ab, n);
      const g = be.alloc(4 * 29);
      be.gatherRows(g, bb, new Int32Array([2, 0, 2, 1]), 29);
      const gathered = await be.read(g, 4 * 29);
      be.gatherRows(bb, bb, new Int32Array([2, 1]), 29); // in place: rows 2 and 1 to rows 0 and 1
      results.push([silu, sum, biased, siluInPlace, gathered, await be.read(bb, n)]);
    }
    ["siluMul", "add", "addBias", "siluMul in place"].forEach((op, i) => expectClose(results[0]![i]!, results[1]![i]!, 1e-5, `${name} ${op}`));
    // gatherRows copies: the same bits as the oracle
    expect(results[0]![4]!).toEqual(results[1]![4]!);
    expect(results[0]![5]!).toEqual(results[1]![5]!);
  });

  for (const neox of [false, true]) {
    it(`rope (${neox ? "NEOX" : "normal"}, full and partial rotary dims, positions up to 4999; unscaled, Llama 3 factors, YaRN, LongRoPE)`, async () => {
      const random = rng(neox ? 13 : 14);
      const numRows = 6;
      const numHeads = 3;
      const headDim = 16;
      const positions = new Int32Array([0, 1, 7, 300, 4095, 4999]);
      const none = { type: "linear", freqScale: 1, attnFactor: 1, originalContextLength: 4096 } as const;
      const scalings = [
        { scaling: none, factors: false },
        { scaling: none, factors: true }, // rope_freqs (Llama 3.x): per-dim divisors
        { scaling: { type: "yarn", freqScale: 1 / 4, attnFactor: 1, originalContextLength: 512 }, factors: false }, // mscale 1.139
        { scaling: { type: "longrope", freqScale: 1, attnFactor: 1.19, originalContextLength: 4096 }, factors: true },
      ] as const;
      for (const ropeDim of [16, 12, 8]) {
        for (const { scaling, factors } of scalings) {
          const divisors = factors ? Float32Array.from({ length: ropeDim / 2 }, () => 1 + 31 * random()) : null;
          const angles = ropeAngles({ ropeDim, ropeFreqBase: 10000, ropeScaling: scaling }, divisors);
          const x = randomFloats(numRows * numHeads * headDim, random);
          const got = await upload(backend, x);
          backend.rope(got, positions, numHeads, headDim, angles, neox);
          const want = await upload(oracle, x);
          oracle.rope(want, positions, numHeads, headDim, angles, neox);
          expectClose(await backend.read(got, x.length), await oracle.read(want, x.length), 1e-5, `${name} rope dim ${ropeDim} ${scaling.type}${factors ? " with factors" : ""}`);
        }
      }
    });
  }

  it("kvStore + attention (GQA 6/2 heads, two sequences, scattered blocks), KV export/import", async () => {
    const random = rng(15);
    const kvDim = KV.numKvHeads * KV.headDim;
    const qDim = NUM_HEADS * KV.headDim;
    // sequence A: 9 cached + 3 new rows; sequence B: 0 cached + 5 new rows (a prefill)
    const seqs: AttentionSequence[] = [
      { rowStart: 0, numRows: 3, startPos: 9, blockTable: new Int32Array([7, 2, 5]) },
      { rowStart: 3, numRows: 5, startPos: 0, blockTable: new Int32Array([0, 8]) },
    ];
    const numRows = 8;
    const outs: Float32Array[] = [];
    for (const be of [backend, oracle]) {
      be.allocKvCache(KV);
      for (let layer = 0; layer < KV.numLayers; layer++) {
        const r = rng(100 + layer);
        // positions 0..11 of A and 0..4 of B
        const slotsA = Int32Array.from({ length: 12 }, (_, p) => seqs[0]!.blockTable[Math.floor(p / 4)]! * 4 + (p % 4));
        const slotsB = Int32Array.from({ length: 5 }, (_, p) => seqs[1]!.blockTable[Math.floor(p / 4)]! * 4 + (p % 4));
        for (const slots of [slotsA, slotsB]) {
          const k = await upload(be, randomFloats(slots.length * kvDim, r, 2));
          const v = await upload(be, randomFloats(slots.length * kvDim, r, 2));
          be.kvStore(layer, k, v, slots);
        }
      }
      const q = await upload(be, randomFloats(numRows * qDim, rng(16), 2));
      const out = be.alloc(numRows * qDim);
      be.attention(out, q, 1, NUM_HEADS, seqs);
      outs.push(await be.read(out, numRows * qDim));
    }
    expectClose(outs[0]!, outs[1]!, 4e-3, `${name} attention`);
    // export blocks 7 and 0, import them as blocks 3 and 4, export again: same bytes
    const exported = backend.exportKvBlocks(new Int32Array([7, 0]));
    backend.importKvBlocks(new Int32Array([3, 4]), exported);
    expect(backend.exportKvBlocks(new Int32Array([3, 4]))).toEqual(exported);
  });
});

describe.each(BACKENDS.map((e) => [e.name, e] as const))("backend %s, attention over rows longer than a key segment", (name, entry) => {
  const reason = entry.unavailable();
  (reason === null ? test : test.skip)("600, 261 and 5 keys in one batch match the oracle; a row's result does not depend on the batch", async () => {
    const be = await entry.create();
    try {
      const got = await longAttention(be);
      const want = await longAttention(new ReferenceBackend());
      expectClose(got.batch, want.batch, 4e-3, `${name} long attention`);
      expect(got.aloneA).toEqual(got.batch.subarray(0, got.aloneA.length));
    } finally {
      be.dispose();
    }
  });
  // window 300: A's rows read keys 301.. and 302.. (two segments), C's all 262; window 3 cuts every row, B's prefill too
  (reason === null ? test : test.skip).each([300, 3])("sliding window %d (gemma3): matches the oracle, batch invariant, differs from full attention, never reads blocks before the window", async (window) => {
    const be = await entry.create();
    try {
      const got = await longAttention(be, "f16", window);
      const want = await longAttention(new ReferenceBackend(), "f16", window);
      expectClose(got.batch, want.batch, 4e-3, `${name} sliding-window attention`);
      expect(got.aloneA).toEqual(got.batch.subarray(0, got.aloneA.length));
      const full = await longAttention(new ReferenceBackend(), "f16");
      let moved = 0;
      for (let i = 0; i < full.batch.length; i++) moved = Math.max(moved, Math.abs(full.batch[i]! - want.batch[i]!));
      expect(moved).toBeGreaterThan(1e-2);
      // what lets a KV manager free the blocks outside the window: their contents never reach the output
      expect(got.freed).toEqual(got.batch);
    } finally {
      be.dispose();
    }
  });
});

describe.each(BACKENDS.filter((e) => e.name.startsWith("wasm")).map((e) => [e.name, e] as const))("backend %s, 8-bit KV cache", (name, entry) => {
  const reason = entry.unavailable();
  (reason === null ? test : test.skip)("attention over the q8 cache matches the reference's q8 cache; export/import round-trips; half the bytes", async () => {
    const be = await entry.create();
    try {
      const got = await longAttention(be, "q8");
      const want = await longAttention(new ReferenceBackend(), "q8");
      expectClose(got.batch, want.batch, 1e-4, `${name} q8 attention`);
      expect(got.aloneA).toEqual(got.batch.subarray(0, got.aloneA.length));
      // the 8-bit cache is within 2e-2 x rms of the f16 cache on these random rows (the documented tolerance)
      expectClose(got.batch, (await longAttention(new ReferenceBackend(), "f16")).batch, 2e-2, `${name} q8 vs f16`);
      const q8Bytes = be.exportKvBlocks(new Int32Array([3, 5]));
      be.importKvBlocks(new Int32Array([60, 61]), q8Bytes);
      expect(be.exportKvBlocks(new Int32Array([60, 61]))).toEqual(q8Bytes);
      be.allocKvCache({ ...LONG_KV, dtype: "f16" });
      const f16Bytes = be.exportKvBlocks(new Int32Array([3, 5]));
      // per block and part: 16 x 64 int8 + 16 f32 scales against 16 x 64 f16
      expect(q8Bytes.length / f16Bytes.length).toBe((16 * 64 + 16 * 4) / (16 * 64 * 2));
    } finally {
      be.dispose();
    }
  });
  (reason === null ? test : test.skip)("headDim 12 (the 4-wide and scalar tails), GQA 6/2, scattered blocks", async () => {
    const be = await entry.create();
    const shape: KvCacheShape = { ...KV, dtype: "q8" };
    const seqs: AttentionSequence[] = [{ rowStart: 0, numRows: 3, startPos: 9, blockTable: new Int32Array([7, 2, 5]) }];
    const qDim = NUM_HEADS * KV.headDim;
    const outs: Float32Array[] = [];
    try {
      for (const b of [be, new ReferenceBackend()]) {
        b.allocKvCache(shape);
        const slots = Int32Array.from({ length: 12 }, (_, p) => seqs[0]!.blockTable[Math.floor(p / 4)]! * 4 + (p % 4));
        const r = rng(21);
        b.kvStore(0, await upload(b, randomFloats(12 * 24, r, 3)), await upload(b, randomFloats(12 * 24, r, 3)), slots);
        const out = b.alloc(3 * qDim);
        b.attention(out, await upload(b, randomFloats(3 * qDim, rng(22), 2)), 0, NUM_HEADS, seqs);
        outs.push(await b.read(out, 3 * qDim));
      }
      expectClose(outs[0]!, outs[1]!, 1e-4, `${name} q8 attention, headDim 12`);
    } finally {
      be.dispose();
    }
  });
});

describe("wasm builds agree bit for bit (scalar vs SIMD vs relaxed SIMD)", () => {
  const levels = (["scalar", "simd", "relaxed-simd"] as const).filter((l) => supportsLevel(l));
  const it = levels.length >= 2 ? test : test.skip;
  /** One random matmul on every build at 1 and 2 threads: every result the same bits. */
  async function expectMatmulBuildsAgree(wt: (typeof WEIGHT_TYPES)[number], rows: number, cols: number, numTokens: number, random: () => number): Promise<void> {
    const src = randomWeight(wt, rows, cols, random);
    const x = randomFloats(numTokens * cols, random);
    const results: Float32Array[] = [];
    for (const level of levels) {
      for (const threads of [1, 2]) {
        const be = await createWasmBackend({ threads, simd: level });
        const xb = await upload(be, x);
        const out = be.alloc(numTokens * rows);
        be.matmul(out, be.loadWeight(src), xb, numTokens);
        results.push(await be.read(out, numTokens * rows));
        be.dispose();
      }
    }
    for (const r of results.slice(1)) expect(r).toEqual(results[0]!);
  }
  // 37 tokens x 512: the activations are quantized on the threads too (units of 4 tokens, a partial last quad)
  it.each(WEIGHT_TYPES.flatMap((w) => [[w.name, 5, w], [w.name, 37, w]] as const))("matmul %s, %d tokens, 1 vs 2 threads", async (_n, numTokens, wt) => {
    const random = rng(40 + wt.type);
    const cols = wt.blockSize === 256 || numTokens > 5 ? 512 : 160;
    const rows = 45;
    await expectMatmulBuildsAgree(wt, rows, cols, numTokens, random);
  });
  // 37 tokens x 2048: Q8_0's and Q4_0's 8-row tiles run over blocks of 32 tokens (matmul-quant.ts L2_BLOCK_BYTES) in two
  // segments of 1,024 columns (SEGMENT_GROUPS); the rows' 11 whole row groups pair up differently on 1 and 2 threads,
  // and the scalar build has no tiles
  it.each(WEIGHT_TYPES.filter((w) => w.name === "q8_0" || w.name === "q4_0").map((w) => [w.name, w] as const))("matmul %s in token blocks, 37 tokens x 2048, 1 vs 2 threads", async (_n, wt) => {
    const random = rng(60 + wt.type);
    const rows = 45;
    const cols = 2048;
    const numTokens = 37;
    await expectMatmulBuildsAgree(wt, rows, cols, numTokens, random);
  });
  it.each([["f16", 0], ["q8", 0], ["f16", 300]] as const)("attention with segmented rows over the %s cache (sliding window %d), 1, 2 and 3 threads", async (dtype, window) => {
    const results: Float32Array[] = [];
    for (const level of levels) {
      for (const threads of [1, 2, 3]) {
        const be = await createWasmBackend({ threads, simd: level });
        results.push((await longAttention(be, dtype, window)).batch);
        be.dispose();
      }
    }
    for (const r of results.slice(1)) expect(r).toEqual(results[0]!);
  });
});
