/**
 * matmulGrouped (a prefill's routed experts in one dispatch per projection, src/backend/wasm/expert-matmul.ts): every
 * group's rows through its own weights give the bits of one matmul on those rows alone, whatever the groups' sizes
 * (1, 3, 4, 5, 13, 37 rows: tails outside the 4-token tiles, an empty group, one large enough for its quantization to
 * go to the threads; 20 such groups, more than one batch of quantizations), the kinds (q4_k_m's q4_k and q6_k, q8_0,
 * mxfp4, f32, which falls back to one matmul each), the thread count and the build, in grown memory. And
 * weightedRowSum (the k slots' outputs times their weights, kernels/moe-experts.ts) against the sums in f32 one by one.
 */
import { describe, expect, test } from "bun:test";
import type { Backend, DeviceBuffer, Weight } from "../../src/backend/backend.ts";
import { WEIGHT_TYPES } from "../../src/tensor/dtypes.ts";
import { randomFloats, randomWeight } from "../conformance/random-weights.ts";
import { rng } from "../helpers/prng.ts";
import { ensureKernels } from "./ensure-kernels.ts";

await ensureKernels();
const { createWasmBackend } = await import("../../src/backend/wasm/wasm-backend.ts");

const SIZES = [3, 1, 0, 37, 13, 4, 5];
/** an f32 tensor's GGUF bytes as floats */
const wtDequant = (data: Uint8Array, out: Float32Array) => out.set(new Float32Array(data.buffer, data.byteOffset, out.length));
const COLS = 512;

/** each group's rows alone through matmul, at the same rows of a fresh buffer */
async function alone(be: Backend, w: readonly Weight[], x: Float32Array, offsets: Int32Array): Promise<Float32Array> {
  const rows = w[0]!.rows;
  const want = new Float32Array(offsets.at(-1)! * rows);
  for (let g = 0; g + 1 < offsets.length; g++) {
    const n = offsets[g + 1]! - offsets[g]!;
    if (n === 0) continue;
    const xb = be.alloc(n * COLS);
    be.write(xb, x.subarray(offsets[g]! * COLS, offsets[g + 1]! * COLS));
    const out = be.alloc(n * rows);
    be.matmul(out, w[g]!, xb, n);
    want.set(await be.read(out, n * rows), offsets[g]! * rows);
  }
  return want;
}

describe("matmulGrouped", () => {
  test.each([["q4_k", "q6_k"], ["q8_0", "q4_0"], ["mxfp4", "mxfp4"], ["f32", "q4_k"]])("%s gate / up and %s down: each group's rows give matmul's bits alone, on 1 and 3 threads, every build", async (upName, downName) => {
    const random = rng(7);
    const type = (name: string) => WEIGHT_TYPES.find((w) => w.name === name)!;
    const offsets = Int32Array.from([0, ...SIZES.map((_, i) => SIZES.slice(0, i + 1).reduce((a, b) => a + b, 0))]);
    const total = offsets.at(-1)!;
    // per group: gate and up [36 x 512] (rows not a multiple of 8), down [512 x 36 -> padded]: down reads 64 cols
    const gateSrc = SIZES.map(() => randomWeight(type(upName), 36, COLS, random));
    const upSrc = SIZES.map(() => randomWeight(type(upName), 36, COLS, random));
    const downSrc = SIZES.map(() => randomWeight(type(downName), 20, COLS, random));
    const x = randomFloats(total * COLS, random);
    const results: Float32Array[] = [];
    for (const simd of ["scalar", "simd", "relaxed-simd"] as const) {
      for (const threads of [1, 3]) {
        const be = await createWasmBackend({ threads, simd });
        be.alloc(16 << 20); // grow the memory past its size when the threads started
        const [gates, ups, downs] = [gateSrc, upSrc, downSrc].map((ss) => ss.map((s) => be.loadWeight(s)));
        const xb = be.alloc(total * COLS);
        be.write(xb, x);
        const outs: DeviceBuffer[] = [be.alloc(total * 36), be.alloc(total * 36)];
        be.matmulGrouped(outs, [gates!, ups!], xb, offsets);
        const down = be.alloc(total * 20);
        be.matmulGrouped([down], [downs!], xb, offsets);
        const got = [await be.read(outs[0]!, total * 36), await be.read(outs[1]!, total * 36), await be.read(down, total * 20)];
        expect(got[0]).toEqual(await alone(be, gates!, x, offsets));
        expect(got[1]).toEqual(await alone(be, ups!, x, offsets));
        expect(got[2]).toEqual(await alone(be, downs!, x, offsets));
        results.push(...got);
        be.dispose();
      }
    }
    // the same bits on every thread count (each build may round its own way)
    for (let i = 0; i < results.length; i += 6) for (let j = 0; j < 3; j++) expect(results[i + 3 + j]).toEqual(results[i + j]!);
  });

  test.each(["mxfp4", "q4_k", "f32"])("%s with biases (gpt-oss): each group's rows give matmul then addBias's bits, on 1 and 3 threads, scalar and relaxed SIMD", async (name) => {
    const random = rng(11);
    const offsets = Int32Array.from([0, ...SIZES.map((_, i) => SIZES.slice(0, i + 1).reduce((a, b) => a + b, 0))]);
    const total = offsets.at(-1)!;
    const f32 = WEIGHT_TYPES.find((w) => w.name === "f32")!;
    const wSrc = SIZES.map(() => randomWeight(WEIGHT_TYPES.find((w) => w.name === name)!, 36, COLS, random));
    const bSrc = SIZES.map(() => randomWeight(f32, 1, 36, random));
    const x = randomFloats(total * COLS, random);
    for (const simd of ["scalar", "relaxed-simd"] as const) {
      for (const threads of [1, 3]) {
        const be = await createWasmBackend({ threads, simd });
        const ws = wSrc.map((s) => be.loadWeight(s));
        const bs = bSrc.map((s) => be.loadWeight(s));
        const xb = be.alloc(total * COLS);
        be.write(xb, x);
        const out = be.alloc(total * 36);
        be.matmulGrouped([out], [ws], xb, offsets, [bs]);
        const want = await alone(be, ws, x, offsets);
        for (let g = 0; g < SIZES.length; g++) {
          const b = new Float32Array(36);
          wtDequant(bSrc[g]!.data, b);
          for (let r = offsets[g]!; r < offsets[g + 1]!; r++) for (let c = 0; c < 36; c++) want[r * 36 + c] = Math.fround(want[r * 36 + c]! + b[c]!);
        }
        expect(await be.read(out, total * 36)).toEqual(want);
        be.dispose();
      }
    }
  });

  test.each([["q4_k"], ["q8_0"]])("%s: 20 groups of 33 rows (their quantizations in two batches) give matmul's bits alone, on 3 threads", async (name) => {
    const random = rng(5);
    const sizes = Array.from({ length: 20 }, () => 33);
    const offsets = Int32Array.from([0, ...sizes.map((_, i) => 33 * (i + 1))]);
    const total = offsets.at(-1)!;
    const src = sizes.map(() => randomWeight(WEIGHT_TYPES.find((w) => w.name === name)!, 12, COLS, random));
    const x = randomFloats(total * COLS, random);
    const be = await createWasmBackend({ threads: 3 });
    const ws = src.map((s) => be.loadWeight(s));
    const xb = be.alloc(total * COLS);
    be.write(xb, x);
    const out = be.alloc(total * 12);
    be.matmulGrouped([out], [ws], xb, offsets);
    expect(await be.read(out, total * 12)).toEqual(await alone(be, ws, x, offsets));
    be.dispose();
  });

  test("projections and groups that do not match are refused with one line", async () => {
    const be = await createWasmBackend({ threads: 1 });
    const w = be.loadWeight(randomWeight(WEIGHT_TYPES.find((t) => t.name === "q8_0")!, 8, COLS, rng(1)));
    const xb = be.alloc(4 * COLS);
    expect(() => be.matmulGrouped([be.alloc(32)], [[w, w]], xb, Int32Array.of(0, 4))).toThrow(/matmulGrouped: 1 projections of 2 weights for 1 outputs and 1 groups/);
    be.dispose();
  });
});

describe("weightedRowSum", () => {
  test("k = 8 slots over 3 rows of 70 columns (a tail past the 4-lane vectors): the f32 products and sums in slot order, every build", async () => {
    const random = rng(3);
    const [numRows, k, cols] = [3, 8, 70];
    const src = randomFloats(numRows * k * cols, random);
    const weights = randomFloats(numRows * k, random);
    const want = new Float32Array(numRows * cols);
    for (let r = 0; r < numRows; r++) {
      for (let c = 0; c < cols; c++) {
        let sum = 0;
        for (let j = 0; j < k; j++) sum = Math.fround(sum + Math.fround(weights[r * k + j]! * src[(r * k + j) * cols + c]!));
        want[r * cols + c] = sum;
      }
    }
    for (const simd of ["scalar", "simd", "relaxed-simd"] as const) {
      const be = await createWasmBackend({ threads: 1, simd });
      const sb = be.alloc(src.length);
      be.write(sb, src);
      const out = be.alloc(numRows * cols);
      be.weightedRowSum(out, sb, weights, numRows, k, cols);
      expect(await be.read(out, numRows * cols)).toEqual(want);
      be.dispose();
    }
  });
});
