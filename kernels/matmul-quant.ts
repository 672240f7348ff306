// Quantized matmul: out[t, r] = sum_c w[r, c] * x[t, c] over repacked weights and quantized activations (quantize.ts).
// Layouts: block-layouts.ts; tiles: matmul-group-tiles.ts (per-group scales), matmul-k-tiles.ts (K-quants),
// matmul-tile8.ts (8 rows on ready vectors), matmul-scalar.ts (scalar twin); their shared steps: matmul-chunks.ts.
//
// The relaxed dot product multiplies i8 by i7 (0..127): unsigned quants take the i7 side and the int8 activations
// (quantize_q8) the i8 side; its i16 form (pair sums, one pmaddubsw on x86) accumulates a few chunks before they are
// widened to i32 (dotChunk16, widen16). Q8_0's quants are full int8, so instead a chunk is widened to i16 once and
// multiplied by the token's activations widened to i16 (widen_q8) with i32x4.dot_i16x8_s. Its chunk holds quants 0-1
// of the 4 rows in bytes 0-7 and quants 2-3 in bytes 8-15 (not 4 quants per row), so each widened half against the
// token's pair of quants in every lane ([a0, a1] x 4, then [a2, a3] x 4) adds one row's pair sum to each i32 lane:
// lane r is row r with no pairwise adds per group (they were two shuffles and an add per token and group, about a
// third of the 4-token tile's instructions in JSC's dump). Exact, in every build.
//
// Per group and row the integer dot product is exact, then one fixed sequence of f32 ops adds it to the row's sum:
//   acc += (f32(isum) * scale) * da  [+ offset * sa]
// except for the K-quant kinds, which read q8_K activations (per 256, quantize_q8k) and sum sc * isum (and m * bsum)
// as exact i32 over each superblock before one f32 term per superblock, as llama.cpp does (matmul-k-tiles.ts;
// kTile1, u6Tile1, kTile4, scalarTileK). dequant.ts still reads their per-group d * sc and -dmin * m (scaleAt).
// The same sequence runs in every build, alone or in a tile of 4 tokens, so out[t, r] never depends on numTokens,
// on the thread split, or on the build (scalar / SIMD / relaxed give identical bits).

import { KIND_I8, KIND_MXFP4, KIND_U4, KIND_U4K, KIND_U5, KIND_U5K, KIND_U6G16, groupBytes, groupSize, scaleStride, superblockScales } from "./block-layouts";
import { actBytes, quadChunkBytes } from "./matmul-chunks";
import { i8Tile1One, i8Tile2One, mxfp4Tile1One, mxfp4Tile2One, nibbleTile1One, simdTile1, simdTile4 } from "./matmul-group-tiles";
import { kTile1, kTile4, u6Tile1 } from "./matmul-k-tiles";
import { i8Tile8, u4Tile8, unpackPair, widenPair } from "./matmul-tile8";
import { scalarTile1, scalarTileK } from "./matmul-scalar";
import { MXFP4_ZERO_POINT } from "./mxfp4";
import { QUAD_CHUNK_BYTES, QUAD_CHUNK_BYTES_I16, QUAD_SUMS_BYTES } from "./quantize";

/** Bytes of ready activation vectors a block of tokens may take (of this Zen 4's 1 MiB L2; KIND_I8's weights are
 * widened once per row-group pair and block, so its blocks should hold several quads). */
const L2_BLOCK_BYTES: i32 = 256 << 10;

/** Groups of a segment of the 8-row tiles: a row-group pair's 1,024 columns widened to i16 (KIND_I8) take 16 KiB,
 * half of L1, unpacked (Q4_0) 8 KiB (KIND_I8's 4,864 columns, 78 KiB, came from L2 and that GEMM ran no faster than
 * the 4-row tile). */
const SEGMENT_GROUPS: i32 = 32;

/** Bytes at the start of matmul_quant's tmp for the rows past the end; the 8-row tiles' widened or unpacked rows
 * follow. */
const TMP_ROW_BYTES: usize = 64;

/** The row-group loop of one kind (and zero-point case): tiles of 4 tokens, then single tokens. */
// @ts-ignore: decorator
@inline function matmulRows(
  kind: i32, ready: bool, zeroed: bool, out: usize, wq: usize, ws: usize, wm: usize,
  qa: usize, da: usize, sa: usize, rows: i32, cols: i32, numTokens: i32, zeroPoint: i32, ps: usize, quads: usize,
  groupStart: i32, groupEnd: i32, tmp: usize,
): void {
  const gs = groupSize(kind);
  const numGroups = cols / gs;
  const qStride = <usize>(numGroups * 4 * groupBytes(kind));
  const sStride = scaleStride(kind, numGroups);
  const mStride = sStride;
  const aStride = <usize>(cols * actBytes(kind)); // bytes of one token's quants
  const quadStride = <usize>(cols >> 2) * quadChunkBytes(kind); // bytes of a quad of tokens in splat_q8's (splat_q8_i16's) layout
  const sumsAt = quads + <usize>(numTokens >> 2) * quadStride; // quad_sums' blocks follow the whole quads' vectors
  const sumsStride = <usize>(cols >> 5) * QUAD_SUMS_BYTES;
  const dStride = <usize>((cols >> 5) << 2); // bytes of one token's scales
  const gStride = <usize>(numGroups << 2); // bytes of one token's per-group sums (sa)
  const pStride = <usize>(numGroups << 4); // bytes of one token's pair-sum vectors (ps)
  const pairsAt = ps + <usize>numTokens * pStride; // KIND_U6G16: quantize_q8k's compact pairs (pc16) follow ps16
  const outStride = <usize>(rows << 2);
  const gb4 = 4 * groupBytes(kind); // bytes of a row group's group of quants
  // KIND_I8 and Q4_0 (KIND_U4 with its zero point) on ready vectors: 8-row tiles, in blocks of tokens whose vectors
  // stay in L2 while each row group of the range reads them (KIND_I8 streamed them whole per row group from L3)
  const blocked = ASC_FEATURE_SIMD && ready && (kind == KIND_I8 || (kind == KIND_U4 && zeroed) || kind == KIND_MXFP4);
  const numQuadTokens = numTokens & ~3;
  if (blocked) {
    // the 8-row tiles run over segments of at most SEGMENT_GROUPS groups, so a row-group pair's widened (KIND_I8) or
    // unpacked (Q4_0) quants stay in L1 (the f32 sums continue in out, in group order: the same adds)
    const segGroups = min(numGroups, SEGMENT_GROUPS);
    const blockTokens = max(4, (L2_BLOCK_BYTES / (segGroups * gs * <i32>(quadChunkBytes(kind) >> 4))) & ~3);
    const wide = tmp + TMP_ROW_BYTES;
    for (let t0 = 0; t0 < numQuadTokens; t0 += blockTokens) {
      const t1 = min(t0 + blockTokens, numQuadTokens);
      // pairs of whole row groups in 8-row tiles
      const pairEnd = groupStart + (min(groupEnd - groupStart, (rows >> 2) - groupStart) & ~1);
      for (let g0 = 0; g0 < numGroups; g0 += segGroups) {
        const g1 = min(g0 + segGroups, numGroups);
        for (let rg = groupStart; rg < pairEnd; rg += 2) {
          const q = wq + <usize>rg * qStride;
          const s = ws + <usize>rg * sStride;
          if (kind == KIND_I8) widenPair(q + <usize>(g0 * gb4), q + qStride + <usize>(g0 * gb4), g1 - g0, wide);
          else unpackPair(q + <usize>(g0 * gb4), q + qStride + <usize>(g0 * gb4), g1 - g0, wide, kind);
          for (let t = t0; t < t1; t += 4) {
            const quad = quads + <usize>(t >> 2) * quadStride;
            const o = out + <usize>t * outStride + (<usize>rg << 4);
            if (kind == KIND_I8) i8Tile8(wide, s, s + sStride, quad + <usize>(g0 * 8) * QUAD_CHUNK_BYTES_I16, da + <usize>t * dStride, dStride, g0, g1, o, outStride);
            else u4Tile8(wide, s, s + sStride, quad + <usize>(g0 * 8) * QUAD_CHUNK_BYTES, sumsAt + <usize>(t >> 2) * sumsStride, ps + <usize>t * pStride, pStride, g0, g1, o, outStride, kind);
          }
        }
      }
      // then one whole row group left over in a 4-row tile
      for (let rg = pairEnd; rg < groupEnd; rg++) {
        const rowBase = rg * 4;
        if (rowBase + 4 > rows) continue; // the partial row group: single tokens below
        const q = wq + <usize>rg * qStride;
        const s = ws + <usize>rg * sStride;
        const m = wm + <usize>rg * mStride;
        for (let t = t0; t < t1; t += 4) {
          simdTile4(kind, ready, zeroed, q, s, m, qa + <usize>t * aStride, aStride, quads + <usize>(t >> 2) * quadStride, sumsAt + <usize>(t >> 2) * sumsStride, da + <usize>t * dStride, dStride,
            sa + <usize>t * gStride, ps + <usize>t * pStride, gStride, pStride, numGroups, zeroPoint, out + <usize>t * outStride + (<usize>rowBase << 2), outStride);
        }
      }
    }
  }
  let firstGroup = groupStart;
  if (ASC_FEATURE_SIMD && (kind == KIND_I8 || kind == KIND_MXFP4) && quads != 0 && numTokens == 1) {
    // a lone token's Q8_0 or MXFP4 matvec: pairs of whole row groups share each chunk's activations
    const pairEnd = groupStart + (max(0, min(groupEnd, rows >> 2) - groupStart) & ~1);
    for (let rg = groupStart; rg < pairEnd; rg += 2) {
      const q = wq + <usize>rg * qStride;
      const s = ws + <usize>rg * sStride;
      const o = out + (<usize>rg << 4);
      if (kind == KIND_I8) i8Tile2One(q, q + qStride, s, s + sStride, quads, da, numGroups, o);
      else mxfp4Tile2One(q, q + qStride, s, s + sStride, quads, da, ps, numGroups, o);
    }
    firstGroup = pairEnd;
  }
  for (let rg = firstGroup; rg < groupEnd; rg++) {
    const q = wq + <usize>rg * qStride;
    const s = ws + <usize>rg * sStride;
    const m = wm + <usize>rg * mStride;
    const rowBase = rg * 4;
    const full = rowBase + 4 <= rows;
    let t = 0;
    if (ASC_FEATURE_SIMD && full && superblockScales(kind)) {
      for (; t + 4 <= numTokens; t += 4) {
        kTile4(kind, q, s, quads + <usize>(t >> 2) * quadStride, sumsAt + <usize>(t >> 2) * sumsStride, ps + <usize>t * pStride, pStride, numGroups,
          out + <usize>t * outStride + (<usize>rowBase << 2), outStride);
      }
    }
    if (blocked && full) t = numQuadTokens;
    else if (ASC_FEATURE_SIMD && full && !superblockScales(kind)) {
      for (; t + 4 <= numTokens; t += 4) {
        simdTile4(kind, ready, zeroed, q, s, m, qa + <usize>t * aStride, aStride, quads + <usize>(t >> 2) * quadStride, sumsAt + <usize>(t >> 2) * sumsStride, da + <usize>t * dStride, dStride,
          sa + <usize>t * gStride, ps + <usize>t * pStride, gStride, pStride, numGroups, zeroPoint, out + <usize>t * outStride + (<usize>rowBase << 2), outStride);
      }
    }
    for (; t < numTokens; t++) {
      const dst = out + <usize>t * outStride + (<usize>rowBase << 2);
      const target = full ? dst : tmp;
      const qat = qa + <usize>t * aStride;
      const dat = da + <usize>t * dStride;
      const sat = sa + <usize>t * gStride;
      const pst = ps + <usize>t * pStride;
      if (ASC_FEATURE_SIMD && kind == KIND_I8 && ready && numTokens == 1) v128.store(target, i8Tile1One(q, s, quads, dat, numGroups));
      else if (ASC_FEATURE_SIMD && (kind == KIND_U4 || kind == KIND_U5) && numTokens == 1 && quads != 0) v128.store(target, nibbleTile1One(kind, zeroed, q, s, m, quads, dat, sat, pst, numGroups, zeroPoint));
      else if (ASC_FEATURE_SIMD && kind == KIND_MXFP4 && numTokens == 1 && quads != 0) v128.store(target, mxfp4Tile1One(q, s, quads, dat, pst, numGroups));
      else if (ASC_FEATURE_SIMD && (kind == KIND_U4K || kind == KIND_U5K) && numTokens == 1 && quads != 0) v128.store(target, kTile1(kind, q, s, qat, dat, sat, numGroups, true, quads));
      else if (ASC_FEATURE_SIMD && (kind == KIND_U4K || kind == KIND_U5K)) v128.store(target, kTile1(kind, q, s, qat, dat, sat, numGroups));
      else if (ASC_FEATURE_SIMD && kind == KIND_U6G16 && zeroed) v128.store(target, u6Tile1(q, s, qat, dat, pairsAt + <usize>t * <usize>(numGroups << 2), numGroups));
      else if (ASC_FEATURE_SIMD) v128.store(target, simdTile1(kind, zeroed, q, s, m, qat, dat, sat, pst, numGroups, zeroPoint));
      else if (superblockScales(kind)) scalarTileK(kind, q, s, qat, dat, sat, pst, numGroups, target);
      else scalarTile1(kind, q, s, m, qat, dat, sat, pst, numGroups, target, zeroed ? zeroPoint : 0);
      if (!full) {
        for (let r = 0; r < rows - rowBase; r++) store<f32>(dst + (<usize>r << 2), load<f32>(tmp + (<usize>r << 2)));
      }
    }
  }
}

/**
 * The one integer zero point of each nibble kind's types (Q4_0 8, Q5_0 16, Q6_K 32: half the quant range; repack.ts
 * REPACK), a constant in its function: a zero point passed at run time cost a branch, a load and a multiply per token
 * and group in the 4-token tiles (JSC's OMG dump), and pushed accumulators to the stack.
 */
// @ts-ignore: decorator
@inline function kindZeroPoint(kind: i32): i32 {
  return kind == KIND_U4 ? 8 : kind == KIND_U5 ? 16 : kind == KIND_U6G16 ? 32 : kind == KIND_MXFP4 ? MXFP4_ZERO_POINT : 0;
}

// One function per kind and zero-point case, each with its own inlined copy of matmulRows with constant kind (and
// zero point): JSC's optimizing tier compiles these small functions far better than one function holding every copy
// (measured: the Q8_0 GEMM ran at half speed inside the big one).
function matmulI8(out: usize, wq: usize, ws: usize, wm: usize, qa: usize, da: usize, sa: usize, rows: i32, cols: i32, n: i32, zp: i32, ps: usize, quads: usize, g0: i32, g1: i32, tmp: usize): void {
  matmulRows(KIND_I8, false, false, out, wq, ws, wm, qa, da, sa, rows, cols, n, 0, ps, quads, g0, g1, tmp);
}
function matmulI8Ready(out: usize, wq: usize, ws: usize, wm: usize, qa: usize, da: usize, sa: usize, rows: i32, cols: i32, n: i32, zp: i32, ps: usize, quads: usize, g0: i32, g1: i32, tmp: usize): void {
  matmulRows(KIND_I8, true, false, out, wq, ws, wm, qa, da, sa, rows, cols, n, 0, ps, quads, g0, g1, tmp);
}
function matmulU5(out: usize, wq: usize, ws: usize, wm: usize, qa: usize, da: usize, sa: usize, rows: i32, cols: i32, n: i32, zp: i32, ps: usize, quads: usize, g0: i32, g1: i32, tmp: usize): void {
  matmulRows(KIND_U5, true, false, out, wq, ws, wm, qa, da, sa, rows, cols, n, 0, ps, quads, g0, g1, tmp);
}
function matmulU5Z(out: usize, wq: usize, ws: usize, wm: usize, qa: usize, da: usize, sa: usize, rows: i32, cols: i32, n: i32, zp: i32, ps: usize, quads: usize, g0: i32, g1: i32, tmp: usize): void {
  matmulRows(KIND_U5, true, true, out, wq, ws, wm, qa, da, sa, rows, cols, n, kindZeroPoint(KIND_U5), ps, quads, g0, g1, tmp);
}
function matmulU4(out: usize, wq: usize, ws: usize, wm: usize, qa: usize, da: usize, sa: usize, rows: i32, cols: i32, n: i32, zp: i32, ps: usize, quads: usize, g0: i32, g1: i32, tmp: usize): void {
  matmulRows(KIND_U4, true, false, out, wq, ws, wm, qa, da, sa, rows, cols, n, 0, ps, quads, g0, g1, tmp);
}
function matmulU4Z(out: usize, wq: usize, ws: usize, wm: usize, qa: usize, da: usize, sa: usize, rows: i32, cols: i32, n: i32, zp: i32, ps: usize, quads: usize, g0: i32, g1: i32, tmp: usize): void {
  matmulRows(KIND_U4, true, true, out, wq, ws, wm, qa, da, sa, rows, cols, n, kindZeroPoint(KIND_U4), ps, quads, g0, g1, tmp);
}
function matmulU4K(out: usize, wq: usize, ws: usize, wm: usize, qa: usize, da: usize, sa: usize, rows: i32, cols: i32, n: i32, zp: i32, ps: usize, quads: usize, g0: i32, g1: i32, tmp: usize): void {
  matmulRows(KIND_U4K, true, false, out, wq, ws, wm, qa, da, sa, rows, cols, n, 0, ps, quads, g0, g1, tmp);
}
function matmulU5K(out: usize, wq: usize, ws: usize, wm: usize, qa: usize, da: usize, sa: usize, rows: i32, cols: i32, n: i32, zp: i32, ps: usize, quads: usize, g0: i32, g1: i32, tmp: usize): void {
  matmulRows(KIND_U5K, true, false, out, wq, ws, wm, qa, da, sa, rows, cols, n, 0, ps, quads, g0, g1, tmp);
}
function matmulMxfp4(out: usize, wq: usize, ws: usize, wm: usize, qa: usize, da: usize, sa: usize, rows: i32, cols: i32, n: i32, zp: i32, ps: usize, quads: usize, g0: i32, g1: i32, tmp: usize): void {
  matmulRows(KIND_MXFP4, true, true, out, wq, ws, wm, qa, da, sa, rows, cols, n, MXFP4_ZERO_POINT, ps, quads, g0, g1, tmp);
}
function matmulG16Z(out: usize, wq: usize, ws: usize, wm: usize, qa: usize, da: usize, sa: usize, rows: i32, cols: i32, n: i32, zp: i32, ps: usize, quads: usize, g0: i32, g1: i32, tmp: usize): void {
  matmulRows(KIND_U6G16, true, true, out, wq, ws, wm, qa, da, sa, rows, cols, n, kindZeroPoint(KIND_U6G16), ps, quads, g0, g1, tmp);
}

/**
 * out [numTokens, rows] f32 for row groups [groupStart, groupEnd) (of 4 rows). Activations from quantize_q8
 * (qa [numTokens, cols] i8, da [numTokens, cols / 32]); for KIND_I8 qa is widen_q8's i16 [numTokens, cols] instead;
 * sa / ps are sa16 / ps16 for KIND_U6G16, else sa32 / ps32 (unused by KIND_I8; ps only read with a zero point); the
 * K-quant kinds read quantize_q8k's outputs (da, bs32 as sa, ps16 as ps), and KIND_U6G16's single tokens its compact
 * pairs pc16 right after the ps16 of all numTokens (at ps + numTokens * cols).
 * zeroPoint: 0 when wm holds float offsets (or for KIND_I8, KIND_U4K, KIND_U5K: no zero point), else the integer
 * offset (wm unused); KIND_U6G16 always has 32.
 * quads: the 4-token tiles' ready vectors of the whole quads of tokens: for the nibble kinds splat_q8's, for KIND_I8
 * splat_q8_i16's or 0 (then its tiles splat the compact i16 rows themselves: a few tokens, whose rows stay in L1);
 * with numTokens 1, for KIND_I8 splat_q8_signed_one's vectors of the token, for the others splat_q8_one's (of its
 * q8_0 or q8_K quants), or 0.
 * tmp: per-thread scratch: 64 bytes for rows past the end, then for KIND_I8 and Q4_0 with quads 16 KiB (widenPair's
 * and unpackPair's rows of a segment, SEGMENT_GROUPS).
 */
export function matmul_quant(
  kind: i32, out: usize, wq: usize, ws: usize, wm: usize,
  qa: usize, da: usize, sa: usize, rows: i32, cols: i32, numTokens: i32, zeroPoint: i32, ps: usize, quads: usize,
  groupStart: i32, groupEnd: i32, tmp: usize,
): void {
  const z = zeroPoint != 0;
  if (z && zeroPoint != kindZeroPoint(kind)) unreachable(); // a zero point no type has (repack.ts)
  if (kind == KIND_I8) (quads != 0 ? matmulI8Ready : matmulI8)(out, wq, ws, wm, qa, da, sa, rows, cols, numTokens, zeroPoint, ps, quads, groupStart, groupEnd, tmp);
  else if (kind == KIND_U5) (z ? matmulU5Z : matmulU5)(out, wq, ws, wm, qa, da, sa, rows, cols, numTokens, zeroPoint, ps, quads, groupStart, groupEnd, tmp);
  else if (kind == KIND_U4) (z ? matmulU4Z : matmulU4)(out, wq, ws, wm, qa, da, sa, rows, cols, numTokens, zeroPoint, ps, quads, groupStart, groupEnd, tmp);
  else if (kind == KIND_U4K) matmulU4K(out, wq, ws, wm, qa, da, sa, rows, cols, numTokens, zeroPoint, ps, quads, groupStart, groupEnd, tmp);
  else if (kind == KIND_MXFP4) {
    if (!z) unreachable(); // MXFP4 always has its zero point (mxfp4.ts)
    matmulMxfp4(out, wq, ws, wm, qa, da, sa, rows, cols, numTokens, zeroPoint, ps, quads, groupStart, groupEnd, tmp);
  } else if (kind == KIND_U5K) matmulU5K(out, wq, ws, wm, qa, da, sa, rows, cols, numTokens, zeroPoint, ps, quads, groupStart, groupEnd, tmp);
  else matmulG16Z(out, wq, ws, wm, qa, da, sa, rows, cols, numTokens, zeroPoint, ps, quads, groupStart, groupEnd, tmp);
}
