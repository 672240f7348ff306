/**
 * The K-quant matmuls (Q4_K, Q5_K, Q6_K) quantize their input like llama.cpp's CPU path, q8_K per 256 values
 * (ggml-quants.c quantize_row_q8_K_ref), and sum sc * isum exactly per superblock: their output must be the exact
 * dot product of the dequantized weights with the q8_K-rounded input (test/model/ggml-activation-rounding.ts, the
 * oracle's emulation of ggml) up to the f32 rounding of a few ops per superblock, in every build, for single tokens
 * and 4-token tiles, on 1 and 2 threads. Rounding the input per 32 (q8_0, what the 32-value types read) instead
 * misses by far more, so the check tells the two rules apart.
 */
import { describe, expect, test } from "bun:test";
import { GgmlType, WEIGHT_TYPES } from "../../src/tensor/dtypes.ts";
import { roundLikeGgml } from "../model/ggml-activation-rounding.ts";
import { randomFloats, randomWeight } from "../conformance/random-weights.ts";
import { rng } from "../helpers/prng.ts";
import { ensureKernels } from "./ensure-kernels.ts";

await ensureKernels();
const { createWasmBackend } = await import("../../src/backend/wasm/wasm-backend.ts");

/** out [numTokens, rows] in f64 from the dequantized weights and each token's input rounded by `round` */
function exactProducts(w: Float32Array, x: Float32Array, rows: number, cols: number, numTokens: number, round: (row: Float32Array) => Float32Array): Float64Array {
  const out = new Float64Array(numTokens * rows); // [numTokens, rows]
  for (let t = 0; t < numTokens; t++) {
    const xr = round(x.subarray(t * cols, (t + 1) * cols));
    for (let r = 0; r < rows; r++) {
      let sum = 0;
      for (let c = 0; c < cols; c++) sum += w[r * cols + c]! * xr[c]!;
      out[t * rows + r] = sum;
    }
  }
  return out;
}

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

describe("K-quant matmuls on q8_K activations", () => {
  test.each(["q4_k", "q5_k", "q6_k"])("%s: the exact product with the q8_K-rounded input, every build, 1 and 2 threads, tiles and single tokens", async (name) => {
    const wt = WEIGHT_TYPES.find((w) => w.name === name)!;
    const rows = 70; // 17 full row groups and a partial one
    const cols = 1024; // 4 superblocks
    const numTokens = 6; // a 4-token tile and two single tokens
    const random = rng(wt.type * 7 + 3);
    const src = randomWeight(wt, rows, cols, random);
    const w = new Float32Array(rows * cols); // [rows, cols]
    wt.dequantize(src.data, w, rows * cols);
    const x = randomFloats(numTokens * cols, random, 2);
    // a token whose largest value is negative (q8_K's d is then positive) and one all zeros (d = 0)
    x[2 * cols + 77] = -5;
    x.fill(0, 5 * cols, 6 * cols);
    const want = exactProducts(w, x, rows, cols, numTokens, (row) => roundLikeGgml(row, GgmlType.Q4_K));
    const perBlock32 = exactProducts(w, x, rows, cols, numTokens, (row) => roundLikeGgml(row, GgmlType.Q8_0));
    let scale = 0;
    for (const v of want) scale = Math.max(scale, Math.abs(v));
    const tolerance = 2e-6 * scale; // a few f32 roundings per superblock (measured: at most 1.1e-7 x the largest output)
    expect(maxDiff(perBlock32, want)).toBeGreaterThan(50 * tolerance); // the rule per 32 would fail this check
    let first: Float32Array | null = null;
    for (const simd of ["scalar", "simd", "relaxed-simd"] as const) {
      for (const threads of [1, 2]) {
        const be = await createWasmBackend({ threads, simd });
        const wb = be.loadWeight(src);
        for (const n of [numTokens, 1]) {
          const xb = be.alloc(n * cols);
          be.write(xb, x.subarray(0, n * cols));
          const out = be.alloc(n * rows);
          be.matmul(out, wb, xb, n);
          const got = await be.read(out, n * rows);
          expect(maxDiff(got, want.subarray(0, n * rows))).toBeLessThan(tolerance);
          first ??= got.slice();
          // the same bits in every build, thread count and batch
          expect(got).toEqual(first.subarray(0, n * rows));
        }
        be.dispose();
      }
    }
  });
});
