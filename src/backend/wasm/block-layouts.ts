/**
 * The repacked quantized block layouts, as the kernels read them (kernels/block-layouts.ts: KIND_*, groupSize,
 * groupBytes, superblockBytes, quantAt, scaleAt, offsetAt), in one table per kernel kind: repack.ts writes by it and
 * nothing else restates a size or an offset. A change here is a change to the kernels' file, and back.
 *   wq [rowGroups, numGroups, groupSize / 4 chunks, 4 rows, 4 quants]  ("K-quads"; quantByte / pairByte below)
 *   per-group kinds: ws, wm [rowGroups, numGroups, 4 rows] f32 (MXFP4: ws [rowGroups, numGroups, 4 rows] u16, the
 *                    upper half of its E8M0 scale's f32, whose lower half is zero; no wm: its zero point)
 *   K-quant kinds:   ws [rowGroups, numSuperblocks, superblock.bytes]: d [4 rows] f32 at dAt | -dmin [4 rows] f32 at
 *                    negDminAt | per group j: sc [4 rows] at scAt + j * groupStride, m [4 rows] at minAt + j * groupStride
 * @example BLOCK_LAYOUTS[KernelKind.U4K].superblock?.bytes // 96
 */

/** The kernel kinds of kernels/block-layouts.ts (same numbers). */
export enum KernelKind {
  I8 = 0,
  U5 = 1,
  U4 = 2,
  /** Q6_K: superblock scales, zero point 32 */
  U6G16 = 3,
  /** Q4_K: U4's quants, superblock scales */
  U4K = 4,
  /** Q5_K: U5's quants, superblock scales */
  U5K = 5,
  /** MXFP4: U4's nibbles holding E2M1 codes (looked up in the kernels, zero point 12), a u16 scale per group */
  MXFP4 = 6,
}

/** Where ggml's K-quant factors of one superblock (256 weights) and row group lie in ws, in bytes. */
export interface SuperblockFactorLayout {
  /** ws bytes per superblock and row group */
  readonly bytes: number;
  /** d [4 rows] f32 */
  readonly dAt: number;
  /** -dmin [4 rows] f32; -1 where the type has no min (Q6_K) */
  readonly negDminAt: number;
  /** group j's scales sc [4 rows] (u8; Q6_K i8) at scAt + j * groupStride */
  readonly scAt: number;
  /** group j's mins m [4 rows] u8 at minAt + j * groupStride; -1 without mins */
  readonly minAt: number;
  readonly groupStride: number;
}

export interface BlockLayout {
  /** weights per kernel group (one scale and one offset, or one K-quant sc / m) */
  readonly groupSize: number;
  /** quant bytes per group and row */
  readonly groupBytes: number;
  /** 5-bit kinds: byte offset of the 16 bytes of high bits in a row group's group (after the nibbles); else -1 */
  readonly highBitsAt: number;
  /** the K-quant kinds' factors per superblock in ws; null: scales (and offsets) per group */
  readonly superblock: SuperblockFactorLayout | null;
  /** per-group kinds: bytes of one row's scale per group in ws (kernels/block-layouts.ts groupScaleBytes / 4): 4, an
   * f32, unless given; 2 for MXFP4's scale (the f32's upper half) */
  readonly scaleBytes?: number;
}

/** Q4_K / Q5_K: 96 bytes = d [4] f32 | -dmin [4] f32 | 8 groups x (sc [4] u8, m [4] u8). */
const K4_FACTORS: SuperblockFactorLayout = { bytes: 96, dAt: 0, negDminAt: 16, scAt: 32, minAt: 36, groupStride: 8 };
/** Q6_K: 80 bytes = d [4] f32 | 16 groups x sc [4] i8. */
const Q6_FACTORS: SuperblockFactorLayout = { bytes: 80, dAt: 0, negDminAt: -1, scAt: 16, minAt: -1, groupStride: 4 };

/** THE table of repacked layouts (kernels/block-layouts.ts groupSize, groupBytes, halfChunks, superblockBytes). */
export const BLOCK_LAYOUTS: Readonly<Record<KernelKind, BlockLayout>> = {
  [KernelKind.I8]: { groupSize: 32, groupBytes: 32, highBitsAt: -1, superblock: null },
  [KernelKind.U5]: { groupSize: 32, groupBytes: 20, highBitsAt: 64, superblock: null },
  [KernelKind.U4]: { groupSize: 32, groupBytes: 16, highBitsAt: -1, superblock: null },
  [KernelKind.U6G16]: { groupSize: 16, groupBytes: 12, highBitsAt: -1, superblock: Q6_FACTORS },
  [KernelKind.U4K]: { groupSize: 32, groupBytes: 16, highBitsAt: -1, superblock: K4_FACTORS },
  [KernelKind.U5K]: { groupSize: 32, groupBytes: 20, highBitsAt: 64, superblock: K4_FACTORS },
  [KernelKind.MXFP4]: { groupSize: 32, groupBytes: 16, highBitsAt: -1, superblock: null, scaleBytes: 2 },
};

/** The byte of quant i of row `lane` in the K-quad group at `base` (a function, not a closure per group: no garbage). */
export function quantByte(base: number, lane: number, i: number): number {
  return base + (i >> 2) * 16 + lane * 4 + (i & 3);
}

/** Q8_0's byte of quant i of row `lane` in the group at `base`: chunk i >> 2 holds quants 0-1 of rows 0-3 in bytes
 * 0-7 and quants 2-3 in bytes 8-15, so each half widened to i16 leaves one row per i32 lane of a dot product. */
export function pairByte(base: number, lane: number, i: number): number {
  return base + (i >> 2) * 16 + ((i >> 1) & 1) * 8 + lane * 2 + (i & 1);
}
