/**
 * The matmul kernels run once on zero weights at start-up, so the first request does not pay for the JIT's tiering.
 * @example warmUpKernels(kernels, heap);
 */
import { KernelKind } from "./block-layouts.ts";
import type { KernelExports } from "./kernel-module.ts";
import { q8kPairsAt, quads16Bytes, quadsBytes, TILE_SCRATCH_BYTES } from "./pool-ops.ts";
import { readsQ8K } from "./quantized-activations.ts";
import type { WasmHeap } from "./wasm-memory.ts";

/** Every kernel function of matmul_quant: kind and zero point (repack.ts REPACK's cases) */
const WARM_UP_KINDS: readonly (readonly [KernelKind, number])[] = [[KernelKind.I8, 0], [KernelKind.U5, 0], [KernelKind.U5, 16],
  [KernelKind.U4, 0], [KernelKind.U4, 8], [KernelKind.U6G16, 32], [KernelKind.U4K, 0], [KernelKind.U5K, 0],
  [KernelKind.MXFP4, 12]];

/**
 * Runs every matmul kernel kind on small zero weights so JSC tiers them up to its optimizing JIT before the first
 * request (its thresholds count loop iterations). Runs on the calling thread while the pool's workers boot; the
 * workers' instances share the module's compiled code. About 10 ms once tiered.
 */
export function warmUpKernels(k: KernelExports, heap: WasmHeap): void {
  const rows = 64;
  const cols = 256;
  const numTokens = 5; // up to a tile of 4 tokens and one more
  const numGroups32 = cols / 32;
  const x = heap.alloc(numTokens * cols * 4); // [numTokens, cols] f32
  const out = heap.alloc(numTokens * rows * 4); // [numTokens, rows] f32
  const qa = heap.alloc(numTokens * cols * 2); // [numTokens, cols] i8, or i16 for KIND_I8 (zero weights: any bytes do)
  const quadBytes = Math.max(quadsBytes(4, cols), quads16Bytes(4, cols));
  const quads = heap.alloc(quadBytes); // one quad of tokens in splat_q8's layout, then its quad_sums
  const sums = heap.alloc(numTokens * (cols / 32) * 72); // da | sa32 | sa16 | ps32 | ps16 | q8_K's pc16 (pool-ops.ts q8kPairsAt)
  const w = heap.alloc(rows * cols * 4); // zeros: f32 rows, or quants + scales + offsets of any kind
  const tmpBytes = 64 + TILE_SCRATCH_BYTES; // rows past the end, then the 8-row tiles' rows (matmul_quant's tmp)
  const tmp = heap.alloc(tmpBytes);
  heap.floats.fill(0.5, x / 4, x / 4 + numTokens * cols);
  heap.bytes.fill(0, w, w + rows * cols * 4);
  const da = sums;
  const sa32 = da + numTokens * numGroups32 * 4;
  const sa16 = sa32 + numTokens * numGroups32 * 4;
  const ps32 = sa16 + numTokens * numGroups32 * 8;
  const ps16 = ps32 + numTokens * numGroups32 * 16;
  const quantBytes = rows * cols; // at most one byte per weight in every kind
  const scales = w + quantBytes; // per-group f32 scales (rows * cols / 32 * 4 bytes at most), or superblock factors (fewer)
  const offsets = scales + rows * (cols / 16) * 4;
  for (let i = 0; i < 40; i++) {
    const n = 1 + (i % numTokens);
    // each input rule (quantize_q8, then quantize_q8k) and the kinds that read it
    for (const q8k of [false, true]) {
      if (q8k) k.quantize_q8k(x, n, cols, qa, da, sa32, ps16, q8kPairsAt(ps16, n, cols));
      else k.quantize_q8(x, n, cols, qa, da, sa32, sa16, ps32, ps16);
      k.splat_q8(qa, n, cols, quads);
      if (!q8k) k.splat_q8_i16(qa, n, cols, quads);
      k.quad_sums(da, sa32, n, cols, quads + cols * 16);
      for (const [kind, zeroPoint] of WARM_UP_KINDS) {
        if (readsQ8K(kind) !== q8k) continue;
        const g16 = kind === KernelKind.U6G16;
        // KIND_I8: its tiles on compact rows (no quads) and on ready vectors
        for (const q of kind === KernelKind.I8 ? [0, quads] : [quads]) {
          k.matmul_quant(kind, out, w, scales, offsets, qa, da, g16 && !q8k ? sa16 : sa32, rows, cols, n, zeroPoint, g16 ? ps16 : ps32, q, 0, rows / 4, tmp);
        }
      }
    }
    k.matmul_f32(out, w, x, rows, cols, n, 0, rows / 4, tmp);
  }
  for (const [ptr, bytes] of [[x, numTokens * cols * 4], [out, numTokens * rows * 4], [qa, numTokens * cols * 2], [quads, quadBytes],
    [sums, numTokens * (cols / 32) * 72], [w, rows * cols * 4], [tmp, tmpBytes]] as const) heap.free(ptr, bytes);
}
