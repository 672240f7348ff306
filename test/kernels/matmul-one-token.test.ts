/**
 * The single-token matvec (decode) on ready activation vectors (kernels/quantize.ts splat_q8_signed_one and splat_q8_one,
 * read by matmul-group-tiles.ts i8Tile1One, nibbleTile1One, mxfp4Tile1One and matmul-k-tiles.ts kTile1 for inputs up to
 * MAX_READY_ONE_BYTES of vectors): Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (zero points and float offsets), MXFP4 (its looked-up codes), Q4_K and Q5_K (their
 * q8_K quants), the same bits as the token inside a
 * batch (the 4-token tiles' path), on every build (the scalar build has no ready vectors) and on 1 and 2 threads, both
 * below and above the column limit, and near the reference backend's values.
 */
import { describe, expect, test } from "bun:test";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { WEIGHT_TYPES } from "../../src/tensor/dtypes.ts";
import { ensureKernels } from "./ensure-kernels.ts";
import { randomFloats, randomWeight } from "../conformance/random-weights.ts";
import { rng } from "../helpers/prng.ts";

await ensureKernels();
const { createWasmBackend } = await import("../../src/backend/wasm/wasm-backend.ts");
const { supportsLevel } = await import("../../src/backend/wasm/kernel-module.ts");

const levels = (["scalar", "simd", "relaxed-simd"] as const).filter((l) => supportsLevel(l));

describe("single-token matvec on ready vectors", () => {
  // a few groups, qwen2.5-0.5b's hidden size, an odd number of groups (MXFP4 runs two a loop), the limit (16 KiB of
  // vectors, 4 bytes per column), and past it (the shuffling tiles)
  const cases = [
    ...["q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "mxfp4"].flatMap((name) => [64, 896, 2080, 4096, 4128].map((cols) => [name, cols] as const)),
    ...["q4_k", "q5_k"].flatMap((name) => [256, 2048, 4096, 4352].map((cols) => [name, cols] as const)),
  ];
  test.each(cases)("%s, %d columns: token alone = token in a batch, every build and thread count", async (name, cols) => {
    const wt = WEIGHT_TYPES.find((w) => w.name === name)!;
    const random = rng(7 + cols + wt.type);
    const rows = 45; // 11 whole row groups and a partial one
    const numTokens = 6;
    const src = randomWeight(wt, rows, cols, random);
    const x = randomFloats(numTokens * cols, random);
    const results: Float32Array[] = [];
    for (const level of levels) {
      for (const threads of [1, 2]) {
        const be = await createWasmBackend({ threads, simd: level });
        try {
          const w = be.loadWeight(src);
          const xb = be.alloc(numTokens * cols);
          be.write(xb, x);
          const batch = be.alloc(numTokens * rows);
          be.matmul(batch, w, xb, numTokens);
          const all = await be.read(batch, numTokens * rows);
          const alone: Float32Array<ArrayBufferLike> = new Float32Array(numTokens * rows);
          for (let t = 0; t < numTokens; t++) {
            const x1 = be.alloc(cols);
            be.write(x1, x.subarray(t * cols, (t + 1) * cols));
            const o1 = be.alloc(rows);
            be.matmul(o1, w, x1, 1);
            alone.set(await be.read(o1, rows), t * rows);
          }
          expect(alone).toEqual(all);
          results.push(alone);
        } finally {
          be.dispose();
        }
      }
    }
    for (const r of results.slice(1)) expect(r).toEqual(results[0]!);
    // and the values themselves: near the reference backend's f32 matmul of the dequantized weights
    const ref = new ReferenceBackend();
    const xr = ref.alloc(cols);
    ref.write(xr, x.subarray(0, cols));
    const or = ref.alloc(rows);
    ref.matmul(or, ref.loadWeight(src), xr, 1);
    const want = await ref.read(or, rows);
    const got = results[0]!.subarray(0, rows);
    // (the activations' int8 rounding: the largest error within 3% of the outputs' root mean square, as the
    // conformance suite's bound)
    const rms = Math.sqrt(want.reduce((s, v) => s + v * v, 0) / rows);
    for (let r = 0; r < rows; r++) expect(Math.abs(got[r]! - want[r]!)).toBeLessThan(3e-2 * rms);
  });
});
