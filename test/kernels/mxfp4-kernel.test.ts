/**
 * MXFP4's own kernel kind (kernels/mxfp4.ts): 4-bit codes kept packed and looked up, one E8M0 byte per group. Its
 * matmul must give, in every build, for 1 to 13 tokens (single tokens, 4-token tiles, the 8-row tiles of a prefill
 * over two segments of groups) and on 1 and 3 threads, exactly the bits of a plain emulation: ggml's q8_0 activations
 * (quantize_row_q8_0 on x86: q = nearest-even(x * (127 / amax)), d = amax / 127 stored as f16), per group the exact
 * sum of the reference dequantizer's weights (src/tensor/quant-mxfp4.ts) times q, times d, added in group order. The
 * embedding lookup gives the reference dequantizer's bits for every exponent byte, and the weights take 18 bytes per
 * 32 (the GGUF's 17 and the scale's second byte).
 */
import { describe, expect, test } from "bun:test";
import { GgmlType, weightType } from "../../src/tensor/dtypes.ts";
import { dequantizeMxfp4 } from "../../src/tensor/quant-mxfp4.ts";
import { nearestInt } from "../../src/tensor/rounding.ts";
import { rng } from "../helpers/prng.ts";
import { ensureKernels } from "./ensure-kernels.ts";

await ensureKernels();
const { createWasmBackend } = await import("../../src/backend/wasm/wasm-backend.ts");
const { weightHeapBytes } = await import("../../src/backend/wasm/wasm-weight.ts");

const BUILDS = ["scalar", "simd", "relaxed-simd"] as const;
const BLOCK_BYTES = 17;

const f16 = (x: number): number => {
  const v = new DataView(new ArrayBuffer(2));
  v.setFloat16(0, x, true);
  return v.getFloat16(0, true);
};

/** MXFP4 rows x cols: random codes, exponents 118..123 (scales 2^-10 .. 2^-5); row 0 every code 7 (+12), row 1 every
 * code 15 (-12): the largest integer sums against activations that quantize to +-127; row 2 the exponents 0..3 (the
 * denormal scales 2^-128 and 2^-127, then 2^-126, 2^-125). */
function mxfp4Weight(rows: number, cols: number, random: () => number): Uint8Array {
  const data = new Uint8Array((rows * cols / 32) * BLOCK_BYTES); // [rows, cols / 32] blocks
  for (let i = 0; i < data.length; i++) data[i] = Math.floor(random() * 256);
  for (let b = 0; b < data.length; b += BLOCK_BYTES) data[b] = 118 + Math.floor(random() * 6);
  const rowBytes = (cols / 32) * BLOCK_BYTES;
  for (let b = 0; b < rowBytes; b += BLOCK_BYTES) {
    data.fill(0x77, b + 1, b + BLOCK_BYTES);
    data.fill(0xff, rowBytes + b + 1, rowBytes + b + BLOCK_BYTES);
    if (rows > 2) data[2 * rowBytes + b] = (b / BLOCK_BYTES) % 4;
  }
  return data;
}

/** The emulation: out [numTokens, rows] f32 bits as the kernels must give them (see the header). */
function expected(w: Float32Array, x: Float32Array, rows: number, cols: number, numTokens: number): Float32Array {
  const out = new Float32Array(numTokens * rows); // [numTokens, rows]
  const q = new Int32Array(cols); // [cols] one token's quants
  const d = new Float32Array(cols / 32); // [cols / 32] its f16 scales
  for (let t = 0; t < numTokens; t++) {
    for (let g = 0; g < cols / 32; g++) {
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[t * cols + g * 32 + j]!));
      const id = amax > 0 ? Math.fround(127 / amax) : 0;
      for (let j = 0; j < 32; j++) q[g * 32 + j] = Math.max(-127, Math.min(127, nearestInt(Math.fround(x[t * cols + g * 32 + j]! * id))));
      d[g] = f16(Math.fround(amax / 127));
    }
    for (let r = 0; r < rows; r++) {
      let acc = 0;
      for (let g = 0; g < cols / 32; g++) {
        let sum = 0; // exact: 32 products of a power of two times small integers
        for (let j = 0; j < 32; j++) sum += w[r * cols + g * 32 + j]! * q[g * 32 + j]!;
        acc = Math.fround(acc + Math.fround(Math.fround(sum) * d[g]!));
      }
      out[t * rows + r] = acc;
    }
  }
  return out;
}

describe("MXFP4 kernels", () => {
  // 12 rows: a pair of row groups for the 8-row tiles and one left over; 10: a partial row group. 1,280 columns: 40
  // groups, two segments of the 8-row tiles (32 groups each)
  test.each([[12, 1280], [10, 1280], [8, 64]] as const)("%i x %i: matmul gives the emulation's bits, 1 / 5 / 13 tokens, 1 and 3 threads, every build", async (rows, cols) => {
    const random = rng(rows * 7 + cols);
    const data = mxfp4Weight(rows, cols, random);
    const w = new Float32Array(rows * cols); // [rows, cols]
    dequantizeMxfp4(data, w, rows * cols);
    const maxTokens = 13;
    const x = new Float32Array(maxTokens * cols); // [maxTokens, cols]: token 0 all ones, token 1 all -1, then random
    x.fill(1, 0, cols);
    x.fill(-1, cols, 2 * cols);
    for (let i = 2 * cols; i < x.length; i++) x[i] = (random() - 0.5) * 2 ** Math.floor(random() * 8 - 4);
    const want = expected(w, x, rows, cols, maxTokens);
    for (const simd of BUILDS) {
      for (const threads of [1, 3]) {
        const be = await createWasmBackend({ threads, simd });
        const weight = be.loadWeight({ name: "w", type: GgmlType.MXFP4, rows, cols, data });
        for (const n of [1, 5, maxTokens]) {
          const xb = be.alloc(n * cols);
          be.write(xb, x.subarray(0, n * cols));
          const out = be.alloc(n * rows);
          be.matmul(out, weight, xb, n);
          const got = await be.read(out, n * rows);
          expect([simd, threads, n, Array.from(got)]).toEqual([simd, threads, n, Array.from(want.subarray(0, n * rows))]);
        }
        be.dispose();
      }
    }
  });

  test.each(BUILDS)("%s: embed gives the reference dequantizer's bits for every exponent byte (denormal, 2^127)", async (simd) => {
    const rows = 9;
    const cols = 256;
    const random = rng(5);
    const data = mxfp4Weight(rows, cols, random);
    const exponents = [0, 1, 2, 3, 100, 127, 128, 200, 253, 254, 255];
    for (let b = 0; b < data.length; b += BLOCK_BYTES) data[b] = exponents[(b / BLOCK_BYTES) % exponents.length]!;
    const want = new Float32Array(rows * cols); // [rows, cols]
    dequantizeMxfp4(data, want, rows * cols);
    const be = await createWasmBackend({ threads: 1, simd });
    const weight = be.loadWeight({ name: "w", type: GgmlType.MXFP4, rows, cols, data });
    const out = be.alloc(rows * cols);
    be.embed(out, weight, Int32Array.from({ length: rows }, (_, i) => i));
    const got = await be.read(out, rows * cols);
    expect(Array.from(got)).toEqual(Array.from(want));
    be.dispose();
  });

  test.each(BUILDS)("%s: a single token's matvec reads every exponent byte's scale as the 4-token tiles do", async (simd) => {
    // the repacked scales (the f32's upper half, repack.ts) of every byte 0..255 in turn, read by the single-token
    // matvec and the tiles of several tokens (33 groups a row)
    const rows = 8;
    const cols = 33 * 32;
    const random = rng(11);
    const data = mxfp4Weight(rows, cols, random);
    for (let b = 0; b < data.length; b += BLOCK_BYTES) data[b] = (b / BLOCK_BYTES) % 256;
    const x = Float32Array.from({ length: 5 * cols }, () => random() - 0.5);
    const be = await createWasmBackend({ threads: 1, simd });
    const weight = be.loadWeight({ name: "w", type: GgmlType.MXFP4, rows, cols, data });
    const xb = be.alloc(5 * cols);
    be.write(xb, x);
    const batch = be.alloc(5 * rows);
    be.matmul(batch, weight, xb, 5);
    const one = be.alloc(rows);
    be.matmul(one, weight, xb, 1);
    const want = await be.read(batch, rows);
    const got = await be.read(one, rows);
    expect(want.some((v) => Number.isFinite(v) && v !== 0)).toBe(true);
    expect(Array.from(got)).toEqual(Array.from(want));
    be.dispose();
  });

  test("the weights take 4.5 bits per weight (the GGUF's 17 bytes per 32 and a second scale byte), not int8's", () => {
    const wt = weightType(GgmlType.MXFP4)!;
    for (const [rows, cols] of [[2880, 2880], [5760, 2880], [4096, 64]] as const) {
      const file = (rows * cols / wt.blockSize) * wt.bytesPerBlock;
      const heap = weightHeapBytes(GgmlType.MXFP4, rows, cols);
      expect(heap).toBeGreaterThanOrEqual((file * 18) / 17);
      expect(heap).toBeLessThanOrEqual((file * 18 / 17) * 1.01);
    }
  });
});
