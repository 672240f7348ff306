/**
 * The WASM kernels' repacked weights are about the GGUF's size: the K-quants keep ggml's superblock factors (d, dmin
 * and the integer group scales, repack.ts) instead of an f32 scale and offset per group, which took q4_K to 1.33x and
 * q6_K to 1.22x of the file (an 8B q4_k_m held 6.2 GiB of weights for a 4.6 GiB file). Heap bytes as loadWeight
 * takes them (weightHeapBytes, what the memory plan and `fennec inspect` count) on an 8B model's matrix shapes; and
 * loadWeight's own allocations agree. The factors multiply back exactly: embed gives the reference dequantizer's bits.
 */
import { describe, expect, test } from "bun:test";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { GgmlType, weightType } from "../../src/tensor/dtypes.ts";
import { randomWeight } from "../conformance/random-weights.ts";
import { rng } from "../helpers/prng.ts";
import { ensureKernels } from "./ensure-kernels.ts";

await ensureKernels();
const { createWasmBackend } = await import("../../src/backend/wasm/wasm-backend.ts");
const { weightHeapBytes } = await import("../../src/backend/wasm/wasm-weight.ts");

/** the most heap bytes per GGUF byte each type may take */
const MAX_RATIO: readonly (readonly [GgmlType, number])[] = [[GgmlType.Q4_K, 1.06], [GgmlType.Q5_K, 1.06], [GgmlType.Q6_K, 1.02]];
/** llama-3.1-8b's matrices: q / o, k / v, gate / up, down, the output head */
const SHAPES: readonly (readonly [number, number])[] = [[4096, 4096], [1024, 4096], [14336, 4096], [4096, 14336], [128256, 4096]];

const fileBytes = (type: GgmlType, rows: number, cols: number): number => {
  const wt = weightType(type)!;
  return (rows * cols / wt.blockSize) * wt.bytesPerBlock;
};

describe("repacked weight size", () => {
  test.each(MAX_RATIO.map(([t, r]) => [weightType(t)!.name, t, r] as const))("%s: heap bytes at most the ratio's times the GGUF bytes on an 8B's shapes", (_name, type, maxRatio) => {
    for (const [rows, cols] of SHAPES) {
      const ratio = weightHeapBytes(type, rows, cols) / fileBytes(type, rows, cols);
      expect(ratio).toBeLessThanOrEqual(maxRatio);
    }
  });

  test.each(MAX_RATIO.map(([t]) => [weightType(t)!.name, t] as const))("%s: loadWeight takes what weightHeapBytes says, and embed gives the reference's exact values", async (_name, type) => {
    const rows = 9; // a partial row group
    const cols = 768; // three superblocks
    const src = randomWeight(weightType(type)!, rows, cols, rng(5));
    const be = await createWasmBackend({ threads: 1 });
    const before = be.memoryBytes;
    const w = be.loadWeight(src);
    expect(be.memoryBytes - before).toBe(weightHeapBytes(type, rows, cols));
    const ids = Int32Array.of(0, 8, 3, 4);
    const out = be.alloc(ids.length * cols);
    be.embed(out, w, ids);
    const oracle = new ReferenceBackend();
    const ref = oracle.alloc(ids.length * cols);
    oracle.embed(ref, oracle.loadWeight(src), ids);
    expect(await be.read(out, ids.length * cols)).toEqual(await oracle.read(ref, ids.length * cols));
    be.dispose();
  });
});
