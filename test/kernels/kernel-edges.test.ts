/**
 * Kernel edge cases the conformance suite's random data rarely hits: the f32 -> f16 rounding of the KV cache
 * (ties, subnormals, overflow) against DataView.setFloat16, and thread counts above the core count and above the
 * number of work units (matmul, the spread siluMul), which must give the same bits as one thread; and the tiles of
 * prefill attention (kernels/attention.ts), whose rows must give what each row gives alone, and the oracle's result.
 */
import { describe, expect, test } from "bun:test";
import type { AttentionSequence, Backend, KvCacheDtype } from "../../src/backend/backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { GgmlType, WEIGHT_TYPES, weightType } from "../../src/tensor/dtypes.ts";
import { randomFloats, randomWeight } from "../conformance/random-weights.ts";
import { rng } from "../helpers/prng.ts";
import { ensureKernels } from "./ensure-kernels.ts";

await ensureKernels();
const { createWasmBackend } = await import("../../src/backend/wasm/wasm-backend.ts");

describe("f16 KV cache store", () => {
  test.each(["scalar", "simd", "relaxed-simd"] as const)("%s: kvStore rounds like setFloat16 (ties, subnormals, overflow)", async (simd) => {
    const be = await createWasmBackend({ threads: 1, simd });
    const kvDim = 256;
    be.allocKvCache({ numLayers: 1, numBlocks: 1, blockSize: 1, numKvHeads: 1, headDim: kvDim });
    const special = [0, -0, 1, -1, 65504, 65520, 65519.996, 1e6, -1e6, 5.96e-8, 2.98e-8, 1e-9, 6.1e-5, 6.09e-5, 1 + 2 ** -11,
      1 + 3 * 2 ** -11, 2049, 2051, 0.1, -0.3333, Infinity, -Infinity, NaN, 2 ** -25, -(2 ** -25) * 1.001, 3 * 2 ** -25,
      5 * 2 ** -25, 2 ** -14, 2 ** -14 * (1 - 2 ** -12), 2 ** -14 * (1 - 2 ** -11), 1e-45, -1e-40];
    const values = new Float32Array(kvDim); // [kvDim]
    values.set(special);
    // the SIMD store takes 8 at a time and the rest one by one: random values of every f16 exponent and both signs
    const random = rng(3);
    for (let i = special.length; i < kvDim; i++) values[i] = (random() < 0.5 ? -1 : 1) * 2 ** (random() * 48 - 30);
    const k = be.alloc(kvDim);
    be.write(k, values);
    be.kvStore(0, k, k, new Int32Array([0]));
    const bytes = be.exportKvBlocks(new Int32Array([0])); // [K|V, 1, kvDim] f16
    const want = new DataView(new ArrayBuffer(kvDim * 2));
    values.forEach((v, i) => want.setFloat16(i * 2, v, true));
    const got = new DataView(bytes.buffer, bytes.byteOffset, kvDim * 2);
    for (let i = 0; i < kvDim; i++) expect([i, got.getUint16(i * 2, true)]).toEqual([i, want.getUint16(i * 2, true)]);
    be.dispose();
  });
});

describe("integer sums at their largest", () => {
  // every quant at its maximum (all quant bytes 0xff) against activations that quantize to +127 or -127 everywhere:
  // the i16 pair sums the nibble kernels accumulate before widening are at their largest, and must not overflow
  test.each(["q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q8_0"])("%s: max quants x max activations, 1 and 5 tokens, every build", async (name) => {
    const wt = WEIGHT_TYPES.find((w) => w.name === name)!;
    const rows = 8;
    const cols = 512;
    const src = randomWeight(wt, rows, cols, () => 0.9999999); // quant bytes 255, scales positive
    const w = new Float32Array(rows * cols); // [rows, cols]
    wt.dequantize(src.data, w, rows * cols);
    const numTokens = 5;
    const x = new Float32Array(numTokens * cols); // [numTokens, cols]: tokens alternate +1 and -1
    for (let t = 0; t < numTokens; t++) x.fill(t % 2 === 0 ? 1 : -1, t * cols, (t + 1) * cols);
    const want = new Float64Array(numTokens * rows); // [numTokens, rows]
    for (let t = 0; t < numTokens; t++) {
      for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) want[t * rows + r]! += w[r * cols + c]! * x[t * cols + c]!;
    }
    const results: Float32Array[] = [];
    for (const simd of ["scalar", "simd", "relaxed-simd"] as const) {
      for (const n of [1, numTokens]) {
        const be = await createWasmBackend({ threads: 1, simd });
        const xb = be.alloc(n * cols);
        be.write(xb, x.subarray(0, n * cols));
        const out = be.alloc(n * rows);
        be.matmul(out, be.loadWeight(src), xb, n);
        const got = await be.read(out, n * rows);
        for (let i = 0; i < n * rows; i++) expect(Math.abs(got[i]! - want[i]!)).toBeLessThanOrEqual(1e-4 * Math.abs(want[i]!) + 1e-6);
        results.push(got.slice(0, rows)); // token 0 of every run: the same bits in every build and batch
        be.dispose();
      }
    }
    for (const r of results) expect(r).toEqual(results[0]!);
  });
});

describe("matmulShared", () => {
  test("weights of different kinds on one input give matmul's bits, for 1, 5 and 13 tokens on 1 and 3 threads, every build, in grown memory", async () => {
    const random = rng(31);
    const cols = 512;
    // q4_k, q6_k and q8_0 side by side, as a q4_k_m model's q / v / k can be; rows not multiples of 4 or of each other
    const sources = [["q4_k", 70], ["q6_k", 30], ["q8_0", 45]].map(([name, rows]) =>
      randomWeight(WEIGHT_TYPES.find((w) => w.name === name)!, rows as number, cols, random));
    const x = randomFloats(13 * cols, random);
    for (const simd of ["scalar", "simd", "relaxed-simd"] as const) {
      for (const threads of [1, 3]) {
        const be = await createWasmBackend({ threads, simd });
        // grow the memory past its size when the threads started: everything below lives where their first view ends
        be.alloc(16 << 20);
        const ws = sources.map((src) => be.loadWeight(src));
        for (const n of [1, 5, 13]) {
          const xb = be.alloc(n * cols);
          be.write(xb, x.subarray(0, n * cols));
          const shared = sources.map((src) => be.alloc(n * src.rows));
          be.matmulShared(shared, ws, xb, n);
          for (let i = 0; i < ws.length; i++) {
            const alone = be.alloc(n * sources[i]!.rows);
            be.matmul(alone, ws[i]!, xb, n);
            expect(await be.read(shared[i]!, n * sources[i]!.rows)).toEqual(await be.read(alone, n * sources[i]!.rows));
          }
        }
        be.dispose();
      }
    }
  });
});

describe("thread counts", () => {
  test("7 threads on a [9 x 8192] matmul (3 row groups, fewer than threads) and 5 threads on [1001 x 256] give one thread's bits", async () => {
    const random = rng(9);
    const wt = weightType(GgmlType.Q4_K)!;
    // both shapes are above the backend's parallel threshold (64 Ki multiply-adds), so the pool runs them
    for (const [rows, cols, threads] of [[9, 8192, 7], [1001, 256, 5]] as const) {
      const src = randomWeight(wt, rows, cols, random);
      const x = randomFloats(3 * cols, random);
      const results: Float32Array[] = [];
      for (const n of [1, threads]) {
        const be = await createWasmBackend({ threads: n });
        const xb = be.alloc(x.length);
        be.write(xb, x);
        const out = be.alloc(3 * rows);
        const w = be.loadWeight(src);
        for (let rep = 0; rep < 50; rep++) be.matmul(out, w, xb, 3); // many generations in a row
        results.push(await be.read(out, 3 * rows));
        be.dispose();
      }
      expect(results[1]).toEqual(results[0]!);
    }
  });

  test("siluMul over 50001 elements (spread over 3 threads in 1024-element units) gives one thread's bits", async () => {
    const n = 50001;
    const gate = randomFloats(n, rng(21), 6);
    const up = randomFloats(n, rng(22), 2);
    const results: Float32Array[] = [];
    for (const threads of [1, 3]) {
      const be = await createWasmBackend({ threads });
      const [g, u, o] = [be.alloc(n), be.alloc(n), be.alloc(n)];
      be.write(g, gate);
      be.write(u, up);
      be.siluMul(o, g, u, n);
      results.push(await be.read(o, n));
      be.dispose();
    }
    expect(results[1]).toEqual(results[0]!);
    const i = n - 1; // the last, partial unit was computed
    expect(results[1]![i]).toBeCloseTo((gate[i]! / (1 + Math.exp(-gate[i]!))) * up[i]!, 4);
  });

  test("createWasmBackend rejects a bad thread count with one line", async () => {
    expect(createWasmBackend({ threads: 0 })).rejects.toThrow("--threads: 0 is not a thread count (1..256)");
  });
});

describe("attention tiles", () => {
  // 37 rows from position 250: tiles of 32 and 5 rows (TILE_ROWS); the first tile's rows 250..255 have one key segment (256
  // keys) and write their output, its later rows two (partials, then the merge). GQA 10/2 (a pair of heads and one
  // more, twice), headDim 20 (past the 16-dim SIMD blocks) and 64 (its own constant-offset loop). Then a second
  // sequence of 3 rows at position 5.
  const numKvHeads = 2, numHeads = 10, blockSize = 16;
  const seqs: AttentionSequence[] = [
    { rowStart: 0, numRows: 37, startPos: 250, blockTable: Int32Array.from({ length: 18 }, (_, i) => 17 - i) },
    { rowStart: 37, numRows: 3, startPos: 5, blockTable: new Int32Array([18]) },
  ];
  const numRows = 40;

  async function run(be: Backend, dtype: KvCacheDtype, headDim: number, split: "batch" | "rows"): Promise<Float32Array> {
    const qDim = numHeads * headDim;
    const kvDim = numKvHeads * headDim;
    be.allocKvCache({ numLayers: 1, numBlocks: 19, blockSize, numKvHeads, headDim, dtype });
    const r = rng(31);
    const upload = (data: Float32Array) => {
      const b = be.alloc(data.length);
      be.write(b, data);
      return b;
    };
    for (const s of seqs) {
      const n = s.startPos + s.numRows;
      const slots = Int32Array.from({ length: n }, (_, p) => s.blockTable[Math.floor(p / blockSize)]! * blockSize + (p % blockSize));
      be.kvStore(0, upload(randomFloats(n * kvDim, r, 2)), upload(randomFloats(n * kvDim, r, 2)), slots);
    }
    const q = upload(randomFloats(numRows * qDim, rng(32), 2));
    const out = be.alloc(numRows * qDim);
    if (split === "batch") be.attention(out, q, 0, numHeads, seqs);
    // every row as a sequence of its own (a decode step at its position)
    else for (const s of seqs) for (let i = 0; i < s.numRows; i++) be.attention(out, q, 0, numHeads, [{ ...s, rowStart: s.rowStart + i, numRows: 1, startPos: s.startPos + i }]);
    return be.read(out, numRows * qDim);
  }

  test.each([["f16", 20], ["q8", 20], ["f16", 64], ["q8", 64]] as const)("%s cache, headDim %d: a tile's rows give each row's bits alone, on 1 and 3 threads and every build, and the oracle's result", async (dtype, headDim) => {
    const results: Float32Array[] = [];
    for (const simd of ["scalar", "simd", "relaxed-simd"] as const) {
      for (const threads of [1, 3]) {
        const be = await createWasmBackend({ threads, simd });
        results.push(await run(be, dtype, headDim, "batch"));
        if (threads === 1) results.push(await run(be, dtype, headDim, "rows"));
        be.dispose();
      }
    }
    for (const r of results.slice(1)) expect(r).toEqual(results[0]!);
    const want = await run(new ReferenceBackend(), dtype, headDim, "batch");
    let sumSq = 0;
    let maxErr = 0;
    want.forEach((w, i) => {
      sumSq += w * w;
      maxErr = Math.max(maxErr, Math.abs(results[0]![i]! - w));
    });
    // as test/conformance/backend.test.ts: 4e-3 x rms over f16 K/V, 1e-4 over the 8-bit cache (the oracle rounds alike)
    expect(maxErr / Math.sqrt(sumSq / want.length)).toBeLessThan(dtype === "f16" ? 4e-3 : 1e-4);
  });
});
