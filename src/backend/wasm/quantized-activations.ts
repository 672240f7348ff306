/**
 * A matmul input quantized to int8 once for every quantized weight that reads it, as llama.cpp does: per 32
 * (quantize_q8, Q8_0) for the 32-value weight kinds, per 256 (quantize_q8k, Q8_K) for Q4_K / Q5_K / Q6_K, and the
 * ready vectors the 4-token tiles read (kernels/quantize.ts); then each weight kind's matmul_quant arguments.
 * @example const a = quantizeActivations(ctx, xp, numRows, cols, [KernelKind.U4K]); activationArgs(a, KernelKind.U4K);
 */
import type { KernelExports } from "./kernel-module.ts";
import { PoolOp, quads16Bytes, quadsBytes, QuantizeRule, quantizeTokens } from "./pool-ops.ts";
import { KernelKind } from "./block-layouts.ts";
import type { Scratch } from "./scratch.ts";
import type { SimdLevel } from "./simd-levels.ts";
import type { MemoryPool } from "./thread-pool.ts";

/** rmsNorm and the activation quantization spread over the threads from this many elements (prefill, not decode:
 * on one thread they were 4-9% of a 128-token chunk, time the other threads spent waiting) */
export const MIN_PARALLEL_ROWS_ELEMENTS = 16384;
/** Q8_0 weights' 4-token tiles read ready i16 vectors (splat_q8_i16) from this many tokens: a prefill chunk */
const MIN_READY_I8_TOKENS = 32;
/** A lone token's ready vectors (splat_q8_one and splat_q8_signed_one, 4 bytes per column) up to this many bytes:
 * half of L1, beside the weight stream (at 14,336 columns the K-quants' ready vectors, 56 KiB, left L1 and stalled it) */
const MAX_READY_ONE_BYTES = 16 << 10;

/** What quantizeActivations runs on: the kernels, the pool, the build, and the scratch the quants go to. */
export interface QuantizeContext {
  readonly k: KernelExports;
  readonly pool: MemoryPool;
  readonly level: SimdLevel;
  readonly scratch: Scratch;
}

/** One matmul input prepared for the quantized kernels (addresses in the activations scratch; kernels/quantize.ts). */
export interface QuantizedActivations {
  /** [numRows, cols] i8 */
  readonly qa: number;
  /** qa widened to i16, for KIND_I8 (0 when no weight needs it) */
  readonly qa16: number;
  /** splat_q8's whole quads of tokens, for the nibble kinds' 4-token tiles (0 when unused) */
  readonly quads: number;
  /** splat_q8_i16's, for KIND_I8's 4-token tiles in a prefill, or for a lone token splat_q8_signed_one's (0 when
   * unused) */
  readonly quads16: number;
  readonly da: number;
  readonly sa32: number;
  readonly sa16: number;
  /** quantize_q8's pair sums for zero points */
  readonly ps32: number;
  readonly ps16: number;
  /** the same input as q8_K (quantize_q8k) for the K-quant weights, or null when none reads it (the fields above are
   * then unused: 0) */
  readonly k: Q8KActivations | null;
}

/** quantize_q8k's outputs (kernels/quantize.ts), and splat_q8 / quad_sums of them */
export interface Q8KActivations {
  readonly qa: number;
  readonly quads: number;
  /** [numRows, cols / 32] f32: the superblock's d per 32 */
  readonly da: number;
  /** [numRows, cols / 32] i32: bsums per 32 */
  readonly bs32: number;
  readonly ps16: number;
}

/** Weight kinds whose matmul input is q8_K (llama.cpp's vec_dot_type of Q4_K, Q5_K, Q6_K); the others read q8_0. */
export function readsQ8K(kind: KernelKind): boolean {
  return kind === KernelKind.U4K || kind === KernelKind.U5K || kind === KernelKind.U6G16;
}

/** matmul_quant's activation arguments for one weight kind. */
export function activationArgs(a: QuantizedActivations, kind: KernelKind): { acts: number; da: number; sa: number; qs: number; quads: number } {
  if (readsQ8K(kind)) {
    const k = a.k!;
    return { acts: k.qa, da: k.da, sa: k.bs32, qs: k.ps16, quads: k.quads };
  }
  const g16 = kind === KernelKind.U6G16;
  const i8 = kind === KernelKind.I8;
  return { acts: i8 ? a.qa16 : a.qa, da: a.da, sa: g16 ? a.sa16 : a.sa32, qs: g16 ? a.ps16 : a.ps32, quads: i8 ? a.quads16 : a.quads };
}

/**
 * x [numRows, cols] quantized for weights of `kinds` into the activations scratch: as q8_0 for the 32-value kinds,
 * laid out as quads [numRows / 4, cols / 4, 4, 16] i8 + quad_sums | quads16 [numRows / 4, cols / 4, 2, 4, 16] i16
 * (splat_q8_i16) | qa [numRows, cols] i8 |
 * da [numRows, cols/32] f32 | sa32 [numRows, cols/32] f32 | sa16 [numRows, cols/16] f32 | ps32 [numRows, cols/32, 8] i16 |
 * ps16 [numRows, cols/16, 8] i16 | qa16 [numRows, cols] i16; then, for the K-quant kinds, as q8_K: quads + quad_sums |
 * qa | da | bs32 [numRows, cols/32] i32 | ps16. Only the parts some weight reads are written.
 */
export function quantizeActivations(ctx: QuantizeContext, xp: number, numRows: number, cols: number, kinds: readonly KernelKind[]): QuantizedActivations {
  const { k: kernels, pool, level, scratch } = ctx;
  const numBlocks = numRows * (cols / 32);
  const q8 = kinds.some((k) => !readsQ8K(k));
  const q8k = kinds.some(readsQ8K);
  const wide = kinds.includes(KernelKind.I8);
  // the nibble kinds' 4-token tiles read splat_q8's quads (the scalar build has no 4-token tiles)
  const tiles = numRows >= 4 && level !== "scalar";
  const useQuads = kinds.some((k) => k !== KernelKind.I8 && !readsQ8K(k)) && tiles;
  // and in a decode step Q4_0 / Q4_1 / Q5_0 / Q5_1 / MXFP4's single-token tile a short input's vectors (splat_q8_one)
  const useOne8 = numRows === 1 && cols * 4 <= MAX_READY_ONE_BYTES && level !== "scalar" && kinds.some((k) => k === KernelKind.U4 || k === KernelKind.U5 || k === KernelKind.MXFP4);
  // and Q4_K / Q5_K's (of the q8_K quants)
  const useOneK = numRows === 1 && cols * 4 <= MAX_READY_ONE_BYTES && level !== "scalar" && kinds.some((k) => k === KernelKind.U4K || k === KernelKind.U5K);
  // and KIND_I8's, in a prefill, splat_q8_i16's (a few tokens' compact i16 rows stay in L1: batched decode is faster so)
  // and in a decode step a short input's vectors in KIND_I8's order with their negative sums (splat_q8_signed_one)
  const useOne16 = wide && numRows === 1 && cols * 4 <= MAX_READY_ONE_BYTES && level !== "scalar";
  const useQuads16 = (wide && numRows >= MIN_READY_I8_TOKENS && level !== "scalar") || useOne16;
  const quadsSize = useOne8 ? cols * 4 : quadsBytes(numRows, cols);
  const quads16Size = useOne16 ? cols * 4 + cols / 2 : useQuads16 ? quads16Bytes(numRows, cols) : 0;
  const qaBytes = Math.ceil((numRows * cols) / 64) * 64;
  const q8Bytes = q8 ? (useQuads || useOne8 ? quadsSize : 0) + quads16Size + qaBytes * 3 + numBlocks * 64 : 0;
  const kQuadsSize = useOneK ? cols * 4 : tiles ? quadsBytes(numRows, cols) : 0;
  const q8kBytes = q8k ? kQuadsSize + qaBytes + numBlocks * 48 : 0; // da | bs32 | ps16 | pc16 (pool-ops.ts q8kPairsAt)
  const base = scratch.ensure(q8Bytes + q8kBytes);
  const quads = useQuads || useOne8 ? base : 0;
  const quads16 = useQuads16 ? base + (useQuads || useOne8 ? quadsSize : 0) : 0;
  const qa = base + (useQuads || useOne8 ? quadsSize : 0) + quads16Size;
  const da = qa + qaBytes;
  const sa32 = da + numBlocks * 4;
  const sa16 = sa32 + numBlocks * 4;
  const ps32 = sa16 + numBlocks * 8;
  const ps16 = ps32 + numBlocks * 16;
  const qa16 = ps16 + numBlocks * 32;
  const spread = numRows * cols >= MIN_PARALLEL_ROWS_ELEMENTS && pool.numThreads > 1;
  const run = (args: number[]) => {
    if (spread) pool.run(PoolOp.QuantizeActivations, args, Math.ceil(numRows / 4));
    else quantizeTokens(kernels, args, 0, 0, numRows);
  };
  if (q8) run([xp, numRows, cols, qa, da, sa32, sa16, ps32, ps16, wide ? qa16 : 0, quads, quads16, QuantizeRule.Q8_0]); // pool-ops.ts QUANTIZE_ARGS
  let k: Q8KActivations | null = null;
  if (q8k) {
    const kBase = base + q8Bytes;
    const kQuads = kQuadsSize > 0 ? kBase : 0;
    const kQa = kBase + kQuadsSize;
    const kDa = kQa + qaBytes;
    const bs32 = kDa + numBlocks * 4;
    const kPs16 = bs32 + numBlocks * 4;
    run([xp, numRows, cols, kQa, kDa, bs32, 0, 0, kPs16, 0, kQuads, 0, QuantizeRule.Q8_K]);
    k = { qa: kQa, quads: kQuads, da: kDa, bs32, ps16: kPs16 };
  }
  if (!q8) return { qa: 0, qa16: 0, quads: 0, quads16: 0, da: 0, sa32: 0, sa16: 0, ps32: 0, ps16: 0, k };
  return { qa, qa16: wide ? qa16 : 0, quads, quads16, da, sa32, sa16, ps32, ps16, k };
}
