// The 8-row tiles on ready activation vectors (Q8_0: i8Tile8, Q4_0: u4Tile8): two row groups x 4 tokens, each
// activation vector loaded once for both, the rows widened (widenPair) or unpacked (unpackPair) once per segment.
import { KIND_I8, KIND_U4 } from "./block-layouts";
import { dotChunk16, dotHalfI16, groupScales, groupTermV, highHalfChunk, lane4, lowHalfChunk, pairSums, startPairs } from "./matmul-chunks";
import { MXFP4_ZERO_POINT } from "./mxfp4";
import { QUAD_CHUNK_BYTES, QUAD_CHUNK_BYTES_I16, QUAD_SUMS_BYTES } from "./quantize";

/** KIND_I8 in i8Tile8: the group term of one token and row quad added to its f32 sums in memory at p (groupTerm's
 * ops in its order: the sums start at +0 and take one add per group, as the register accumulators do). */
// @ts-ignore: decorator
@inline export function addTermAt(p: usize, x: v128, scales: v128, da: v128): void {
  v128.store(p, f32x4.add(v128.load(p), groupTermV(KIND_I8, x, x, scales, i32x4.splat(0), da, i32x4.splat(0), 0)));
}

/**
 * KIND_I8: the quants of two row groups (at qa and qb) widened to i16 into wide [numGroups * 8 chunks, 4 x 16
 * bytes]: per chunk row group a's quants 0-1 and 2-3, then b's. i8Tile8 reads them for every quad of a block of
 * tokens: widened in the tile they cost 4 extends per 128 multiply-adds, about a fifth of its vector work.
 */
// @ts-ignore: decorator
@inline export function widenPair(qa: usize, qb: usize, numGroups: i32, wide: usize): void {
  for (let c = 0; c < numGroups * 8; c++) {
    const wa = v128.load(qa);
    const wb = v128.load(qb);
    v128.store(wide, i16x8.extend_low_i8x16_s(wa));
    v128.store(wide, i16x8.extend_high_i8x16_s(wa), 16);
    v128.store(wide, i16x8.extend_low_i8x16_s(wb), 32);
    v128.store(wide, i16x8.extend_high_i8x16_s(wb), 48);
    qa += 16;
    qb += 16;
    wide += 64;
  }
}

/** The f32 sums of an 8-row x 4-token tile (i8Tile8 / u4Tile8) set to zero: token k's 8 rows at out + k * outStride. */
// @ts-ignore: decorator
@inline export function zeroTile8Sums(out: usize, outStride: usize): void {
  const zero = f32x4.splat(0);
  for (let k: usize = 0; k < 4; k++) {
    v128.store(out + k * outStride, zero);
    v128.store(out + k * outStride, zero, 16);
  }
}

/** KIND_I8, one chunk of a row quad x one token: both widened halves (quants 0-1 and 2-3 of the 4 rows, i16) times
 * the token's ready pair vectors lo and hi: the 4 rows' i32 sums of the chunk's 4 products (i8Tile8). */
// @ts-ignore: decorator
@inline export function i8Pair(wl: v128, wh: v128, lo: v128, hi: v128): v128 {
  return i32x4.add(i32x4.dot_i16x8_s(wl, lo), i32x4.dot_i16x8_s(wh, hi));
}

/**
 * KIND_I8, 8 rows (two row groups, their groups [g0, g1) widened by widenPair into wide; scales at sa and sb) x 4
 * tokens on splat_q8_i16's ready vectors of those groups at quad (da: the first token's scales, dstride apart),
 * adding to the f32 sums in out (set to zero first when g0 is 0): each activation vector is loaded
 * once for both row quads, so the tile reads 16 activation bytes per 16 multiply-adds (a 4-row tile on the ready
 * pair vectors read 32, from L2). The 8 i32 sums and 4 weight halves fill the vector registers, so the f32 sums
 * live in out (token k's rows at out + k * outStride, the second quad's 16 bytes on).
 */
// @ts-ignore: decorator
@inline export function i8Tile8(wide: usize, sa: usize, sb: usize, quad: usize, da: usize, dstride: usize, g0: i32, g1: i32, out: usize, outStride: usize): void {
  if (g0 == 0) zeroTile8Sums(out, outStride);
  let w = wide;
  let a = quad;
  for (let g = g0; g < g1; g++) {
    // chunk 0 starts the 8 sums (zeroed sums took an add each per group: 8 of the group's ~280 vector instructions)
    let al = v128.load(w), ah = v128.load(w, 16), bl = v128.load(w, 32), bh = v128.load(w, 48);
    let lo = v128.load(a), hi = v128.load(a, 64);
    let x0 = i8Pair(al, ah, lo, hi), y0 = i8Pair(bl, bh, lo, hi);
    lo = v128.load(a, 16); hi = v128.load(a, 80);
    let x1 = i8Pair(al, ah, lo, hi), y1 = i8Pair(bl, bh, lo, hi);
    lo = v128.load(a, 32); hi = v128.load(a, 96);
    let x2 = i8Pair(al, ah, lo, hi), y2 = i8Pair(bl, bh, lo, hi);
    lo = v128.load(a, 48); hi = v128.load(a, 112);
    let x3 = i8Pair(al, ah, lo, hi), y3 = i8Pair(bl, bh, lo, hi);
    w += 64;
    a += QUAD_CHUNK_BYTES_I16;
    for (let c = 1; c < 8; c++) {
      al = v128.load(w);
      ah = v128.load(w, 16);
      bl = v128.load(w, 32);
      bh = v128.load(w, 48);
      lo = v128.load(a);
      hi = v128.load(a, 64);
      x0 = dotHalfI16(dotHalfI16(x0, al, lo), ah, hi);
      y0 = dotHalfI16(dotHalfI16(y0, bl, lo), bh, hi);
      lo = v128.load(a, 16);
      hi = v128.load(a, 80);
      x1 = dotHalfI16(dotHalfI16(x1, al, lo), ah, hi);
      y1 = dotHalfI16(dotHalfI16(y1, bl, lo), bh, hi);
      lo = v128.load(a, 32);
      hi = v128.load(a, 96);
      x2 = dotHalfI16(dotHalfI16(x2, al, lo), ah, hi);
      y2 = dotHalfI16(dotHalfI16(y2, bl, lo), bh, hi);
      lo = v128.load(a, 48);
      hi = v128.load(a, 112);
      x3 = dotHalfI16(dotHalfI16(x3, al, lo), ah, hi);
      y3 = dotHalfI16(dotHalfI16(y3, bl, lo), bh, hi);
      w += 64;
      a += QUAD_CHUNK_BYTES_I16;
    }
    const scA = v128.load(sa + (<usize>g << 4));
    const scB = v128.load(sb + (<usize>g << 4));
    const daG = da + (<usize>g << 2);
    let d = v128.load32_splat(daG);
    addTermAt(out, x0, scA, d);
    addTermAt(out + 16, y0, scB, d);
    d = v128.load32_splat(daG + dstride);
    addTermAt(out + outStride, x1, scA, d);
    addTermAt(out + outStride + 16, y1, scB, d);
    d = v128.load32_splat(daG + 2 * dstride);
    addTermAt(out + 2 * outStride, x2, scA, d);
    addTermAt(out + 2 * outStride + 16, y2, scB, d);
    d = v128.load32_splat(daG + 3 * dstride);
    addTermAt(out + 3 * outStride, x3, scA, d);
    addTermAt(out + 3 * outStride + 16, y3, scB, d);
  }
}

/**
 * Q4_0 (KIND_U4, zero point 8), 8 rows x 4 tokens on splat_q8's ready vectors at quad and quad_sums' blocks at sums
 * (ps: the first token's pair sums, pstride apart): i8Tile8's shape for the nibbles. Each activation vector is loaded
 * once for both row quads and the zero point's start once per token (the 4-row tile: about 56 Air instructions per
 * 128 multiply-adds in JSC's dump, of which 9 loads and the per-group epilogue, near this core's 6 per cycle).
 * kind: KIND_U4, or KIND_MXFP4 (its values unpacked by unpackPair, zero point 12, its scales the f32s' upper halves).
 */
// @ts-ignore: decorator
@inline export function u4Tile8(wide: usize, sa: usize, sb: usize, quad: usize, sums: usize, ps: usize, pstride: usize, g0: i32, g1: i32, out: usize, outStride: usize, kind: i32 = KIND_U4): void {
  if (g0 == 0) zeroTile8Sums(out, outStride);
  const zp = kind == KIND_U4 ? 8 : MXFP4_ZERO_POINT;
  let w = wide;
  for (let g = g0; g < g1; g++) {
    const pg = ps + (<usize>g << 4);
    let x0 = startPairs(kind, true, pg, zp);
    let x1 = startPairs(kind, true, pg + pstride, zp);
    let x2 = startPairs(kind, true, pg + 2 * pstride, zp);
    let x3 = startPairs(kind, true, pg + 3 * pstride, zp);
    let y0 = x0, y1 = x1, y2 = x2, y3 = x3;
    // chunk c (low nibbles) and c + 4 (high nibbles) of both row quads, unpacked by unpackPair
    for (let c = 0; c < 4; c++) {
      const la = v128.load(w);
      const ha = v128.load(w, 16);
      const lb = v128.load(w, 32);
      const hb = v128.load(w, 48);
      let a = v128.load(quad);
      x0 = dotChunk16(a, la, x0);
      y0 = dotChunk16(a, lb, y0);
      a = v128.load(quad, 16);
      x1 = dotChunk16(a, la, x1);
      y1 = dotChunk16(a, lb, y1);
      a = v128.load(quad, 32);
      x2 = dotChunk16(a, la, x2);
      y2 = dotChunk16(a, lb, y2);
      a = v128.load(quad, 48);
      x3 = dotChunk16(a, la, x3);
      y3 = dotChunk16(a, lb, y3);
      a = v128.load(quad, 4 * QUAD_CHUNK_BYTES);
      x0 = dotChunk16(a, ha, x0);
      y0 = dotChunk16(a, hb, y0);
      a = v128.load(quad, 4 * QUAD_CHUNK_BYTES + 16);
      x1 = dotChunk16(a, ha, x1);
      y1 = dotChunk16(a, hb, y1);
      a = v128.load(quad, 4 * QUAD_CHUNK_BYTES + 32);
      x2 = dotChunk16(a, ha, x2);
      y2 = dotChunk16(a, hb, y2);
      a = v128.load(quad, 4 * QUAD_CHUNK_BYTES + 48);
      x3 = dotChunk16(a, ha, x3);
      y3 = dotChunk16(a, hb, y3);
      w += 64;
      quad += QUAD_CHUNK_BYTES;
    }
    quad += 4 * QUAD_CHUNK_BYTES; // past the high nibbles' chunks 4-7
    const scA = groupScales(kind, sa, g, i32x4.splat(0));
    const scB = groupScales(kind, sb, g, i32x4.splat(0));
    const d4 = v128.load(sums + <usize>g * QUAD_SUMS_BYTES);
    let d = lane4(d4, 0);
    addTermU4At(out, pairSums(x0), scA, d);
    addTermU4At(out + 16, pairSums(y0), scB, d);
    d = lane4(d4, 1);
    addTermU4At(out + outStride, pairSums(x1), scA, d);
    addTermU4At(out + outStride + 16, pairSums(y1), scB, d);
    d = lane4(d4, 2);
    addTermU4At(out + 2 * outStride, pairSums(x2), scA, d);
    addTermU4At(out + 2 * outStride + 16, pairSums(y2), scB, d);
    d = lane4(d4, 3);
    addTermU4At(out + 3 * outStride, pairSums(x3), scA, d);
    addTermU4At(out + 3 * outStride + 16, pairSums(y3), scB, d);
  }
}

/**
 * Q4_0: the nibbles of two row groups' groups (at qa and qb, numGroups of them) unpacked into wide [numGroups * 4,
 * 4 x 16 bytes]: per 16 bytes of quants a's low nibbles, a's high, then b's. u4Tile8 reads them for every quad of a
 * block of tokens instead of unpacking each load (an and, a shift and an and; JSC rebuilds the shift count in a
 * vector register for every shift: 6 instructions per 16 bytes of quants). KIND_MXFP4: its codes looked up once here.
 */
// @ts-ignore: decorator
@inline export function unpackPair(qa: usize, qb: usize, numGroups: i32, wide: usize, kind: i32 = KIND_U4): void {
  const none = i32x4.splat(0);
  for (let i = 0; i < numGroups * 4; i++) {
    const pa = v128.load(qa);
    const pb = v128.load(qb);
    v128.store(wide, lowHalfChunk(kind, pa, none, 0));
    v128.store(wide, highHalfChunk(kind, pa, none, 0), 16);
    v128.store(wide, lowHalfChunk(kind, pb, none, 0), 32);
    v128.store(wide, highHalfChunk(kind, pb, none, 0), 48);
    qa += 16;
    qb += 16;
    wide += 64;
  }
}

/** u4Tile8's addTermAt: groupTermV of Q4_0 (no offsets) added to the f32 sums in memory at p. */
// @ts-ignore: decorator
@inline export function addTermU4At(p: usize, x: v128, scales: v128, da: v128): void {
  v128.store(p, f32x4.add(v128.load(p), groupTermV(KIND_U4, x, x, scales, i32x4.splat(0), da, i32x4.splat(0), 8)));
}
