// The tiles of the kinds with scales per group (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4: KIND_I8, KIND_U4, KIND_U5, KIND_MXFP4): 4 rows x 1
// token (simdTile1) and 4 rows x 4 tokens (simdTile4), each a group term per group in matmul-quant.ts's f32 order.
import { KIND_I8, KIND_MXFP4, KIND_U6G16, groupBytes, groupSize, halfChunks } from "./block-layouts";
import { I16_ONES, actBytes, dot16, dotChunk16, dotHalfI16, groupOffsets, groupScales, groupSum, groupTerm, groupTermV, hasOffsets, highBits, highHalfChunk, i16Chunks, lane4, laneChunk, lowHalfChunk, pairSums, pairSumsBy, quadChunkBytes, scaleMinBytes, startPairs, u6Chunk, u6Chunk3, widen16 } from "./matmul-chunks";
import { MXFP4_ZERO_POINT, mxfp4Scales4, mxfp4Scales8 } from "./mxfp4";
import { QUAD_CHUNK_BYTES, QUAD_CHUNK_BYTES_I16, QUAD_SUMS_BYTES } from "./quantize";

/**
 * 4 rows x 1 token: f32x4 of the 4 rows' sums. zeroed: the kind has a zero point (ps: the token's pair sums of
 * activations, quantize_q8's ps16 / ps32), else float offsets (wm, sa) or none (KIND_I8).
 */
// @ts-ignore: decorator
@inline export function simdTile1(kind: i32, zeroed: bool, q: usize, s: usize, m: usize, qa: usize, da: usize, sa: usize, ps: usize, numGroups: i32, zeroPoint: i32): v128 {
  const gs = groupSize(kind);
  const gb = <usize>(groupBytes(kind) << 2);
  let acc = f32x4.splat(0);
  let dp = da;
  for (let g = 0; g < numGroups; g++) {
    let x = i32x4.splat(0), y = x;
    if (kind == KIND_I8) {
      // a loop over pairs of chunks (unrolled it ran at 60%): one plain load of their 8 i16 activations, each pair
      // of quants spread to every lane by a shuffle (JSC computes a splat load's address apart: 3 instructions)
      // two independent i32 sums (exact: the same total), as i8Tile1One's
      for (let c = 0; c < 8; c += 2) {
        const w = q + (<usize>c << 4);
        const a = v128.load(qa + (<usize>c << 3));
        x = dotHalfI16(x, v128.load8x8_s(w), laneChunk(a, 0));
        y = dotHalfI16(y, v128.load8x8_s(w, 8), laneChunk(a, 1));
        x = dotHalfI16(x, v128.load8x8_s(w, 16), laneChunk(a, 2));
        y = dotHalfI16(y, v128.load8x8_s(w, 24), laneChunk(a, 3));
      }
      x = i32x4.add(x, y);
    } else {
      x = groupSum(kind, zeroed, q, v128.load(qa), gs == 32 ? v128.load(qa, 16) : i32x4.splat(0), startPairs(kind, zeroed, ps, zeroPoint), v128.load(I16_ONES));
    }
    const scaleMin = scaleMinBytes(kind, s, g);
    const offsets = hasOffsets(kind, zeroPoint) ? groupOffsets(kind, s, m, g, scaleMin) : i32x4.splat(0);
    acc = f32x4.add(acc, groupTerm(kind, x, y, groupScales(kind, s, g, scaleMin), offsets, dp, sa, zeroPoint));
    // the token's scale of the next group: da advances per 32 activations (KIND_U6G16: every other group)
    dp += kind == KIND_U6G16 ? <usize>((g & 1) << 2) : 4;
    q += gb;
    qa += <usize>(gs * actBytes(kind));
    sa += 4;
    ps += 16;
  }
  return acc;
}

/**
 * KIND_I8, 4 rows x 1 token on splat_q8_signed_one's vectors at one (16 bytes per chunk, then each group's negative
 * sums): simdTile1's exact i32 sums and f32 terms (the same bits) from byte dot products instead of widened i16 ones.
 * The relaxed dot multiplies unsigned 7-bit bytes by signed ones, so the activations go in as |q| (quantize_q8's q is
 * within -127..127) and the weights as w ^ sign(q): w where q >= 0, -w - 1 where q < 0 (for every int8 w), a pair of
 * products within 2 * 127 * 128, inside i16; each group's sums start from sum(max(-q, 0)), what that leaves out.
 * 9 instructions per 16 products in JSC's code, where widening the weights took 12 to 15.
 */
// @ts-ignore: decorator
@inline export function i8Tile1One(q: usize, s: usize, one: usize, da: usize, numGroups: i32): v128 {
  const ones = v128.load(I16_ONES);
  const rowPairs = v128.load(I8_ROW_PAIRS);
  let negatives = one + (<usize>numGroups << 7);
  let acc = f32x4.splat(0);
  let dp = da;
  for (let g = 0; g < numGroups; g++) {
    // two independent i32 sums (exact: the same total)
    let x0 = v128.load(negatives), x1 = i32x4.splat(0);
    x0 = signedChunk(x0, v128.load(q), v128.load(one), rowPairs, ones);
    x1 = signedChunk(x1, v128.load(q, 16), v128.load(one, 16), rowPairs, ones);
    x0 = signedChunk(x0, v128.load(q, 32), v128.load(one, 32), rowPairs, ones);
    x1 = signedChunk(x1, v128.load(q, 48), v128.load(one, 48), rowPairs, ones);
    x0 = signedChunk(x0, v128.load(q, 64), v128.load(one, 64), rowPairs, ones);
    x1 = signedChunk(x1, v128.load(q, 80), v128.load(one, 80), rowPairs, ones);
    x0 = signedChunk(x0, v128.load(q, 96), v128.load(one, 96), rowPairs, ones);
    x1 = signedChunk(x1, v128.load(q, 112), v128.load(one, 112), rowPairs, ones);
    const x = i32x4.add(x0, x1);
    acc = f32x4.add(acc, groupTerm(KIND_I8, x, x, groupScales(KIND_I8, s, g, x), x, dp, 0, 0));
    dp += 4;
    q += 128;
    one += 128;
    negatives += 16;
  }
  return acc;
}

/**
 * i8Tile1One for two row groups at once (qb, sb: the second's quants and scales): each chunk's activations loaded,
 * made |q| and sign(q) once for both. Stores the 8 rows' f32 sums at out (rows 0-3) and out + 16 (rows 4-7).
 */
// @ts-ignore: decorator
@inline export function i8Tile2One(qa: usize, qb: usize, sa: usize, sb: usize, one: usize, da: usize, numGroups: i32, out: usize): void {
  const ones = v128.load(I16_ONES);
  const rowPairs = v128.load(I8_ROW_PAIRS);
  let negatives = one + (<usize>numGroups << 7);
  let accA = f32x4.splat(0), accB = accA;
  let dp = da;
  for (let g = 0; g < numGroups; g++) {
    const start = v128.load(negatives);
    let xa = start, xb = start;
    for (let c: usize = 0; c < 128; c += 16) {
      const a = v128.load(one + c);
      const sign = i8x16.lt_s(a, i8x16.splat(0));
      const magnitude = i8x16.abs(a);
      xa = signedProducts(xa, v128.load(qa + c), sign, magnitude, rowPairs, ones);
      xb = signedProducts(xb, v128.load(qb + c), sign, magnitude, rowPairs, ones);
    }
    accA = f32x4.add(accA, groupTerm(KIND_I8, xa, xa, groupScales(KIND_I8, sa, g, xa), xa, dp, 0, 0));
    accB = f32x4.add(accB, groupTerm(KIND_I8, xb, xb, groupScales(KIND_I8, sb, g, xb), xb, dp, 0, 0));
    dp += 4;
    qa += 128;
    qb += 128;
    one += 128;
    negatives += 16;
  }
  v128.store(out, accA);
  v128.store(out, accB, 16);
}

/** i16 lanes r and r + 4 (a KIND_I8 chunk's pair sums of row r) brought side by side, for one pmaddwd. */
const I8_ROW_PAIRS: usize = memory.data<u8>([0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15], 16);

/** One chunk of i8Tile1One: the 4 rows' sums x plus w ^ sign(a) times |a| (a: the chunk's ready vector). */
// @ts-ignore: decorator
@inline function signedChunk(x: v128, w: v128, a: v128, rowPairs: v128, ones: v128): v128 {
  return signedProducts(x, w, i8x16.lt_s(a, i8x16.splat(0)), i8x16.abs(a), rowPairs, ones);
}

/** x plus the 4 rows' products of the weight chunk w with a chunk of activations given as sign and magnitude. */
// @ts-ignore: decorator
@inline function signedProducts(x: v128, w: v128, sign: v128, magnitude: v128, rowPairs: v128, ones: v128): v128 {
  const pairs = dot16(v128.xor(w, sign), magnitude);
  const rows = ASC_FEATURE_RELAXED_SIMD ? i8x16.relaxed_swizzle(pairs, rowPairs) : i8x16.swizzle(pairs, rowPairs);
  return i32x4.add(x, pairSumsBy(rows, ones));
}

/**
 * KIND_U4 / KIND_U5, 4 rows x 1 token on splat_q8_one's ready vectors at one (16 bytes per chunk): simdTile1's sums
 * and terms (the same bits), each chunk's activations loaded instead of spread by a shuffle in every row group (8 of
 * Q5_0's ~75 vector-pipe instructions per group in JSC's dump).
 */
// @ts-ignore: decorator
@inline export function nibbleTile1One(kind: i32, zeroed: bool, q: usize, s: usize, m: usize, one: usize, da: usize, sa: usize, ps: usize, numGroups: i32, zeroPoint: i32): v128 {
  const gb = <usize>(groupBytes(kind) << 2);
  const none = i32x4.splat(0);
  let acc = f32x4.splat(0);
  let dp = da;
  for (let g = 0; g < numGroups; g++) {
    const x = groupSum(kind, zeroed, q, none, none, startPairs(kind, zeroed, ps, zeroPoint), v128.load(I16_ONES), true, one);
    const scaleMin = scaleMinBytes(kind, s, g);
    const offsets = hasOffsets(kind, zeroPoint) ? groupOffsets(kind, s, m, g, scaleMin) : i32x4.splat(0);
    acc = f32x4.add(acc, groupTerm(kind, x, x, groupScales(kind, s, g, scaleMin), offsets, dp, sa, zeroPoint));
    dp += 4;
    q += gb;
    one += 128;
    sa += 4;
    ps += 16;
  }
  return acc;
}

/**
 * KIND_MXFP4, 4 rows x 1 token on splat_q8_one's ready vectors at one: nibbleTile1One's sums and terms (the same bits,
 * added in the same order), two groups a loop: JSC builds the loop's constants (the table, masks, ones) and counts
 * once per iteration, and one load and two byte shuffles widen both groups' scales (mxfp4Scales8).
 */
// @ts-ignore: decorator
@inline export function mxfp4Tile1One(q: usize, s: usize, one: usize, da: usize, ps: usize, numGroups: i32): v128 {
  const none = i32x4.splat(0);
  let acc = f32x4.splat(0);
  let dp = da;
  let g = 0;
  for (; g + 1 < numGroups; g += 2) {
    const x0 = groupSum(KIND_MXFP4, true, q, none, none, startPairs(KIND_MXFP4, true, ps, MXFP4_ZERO_POINT), v128.load(I16_ONES), true, one);
    const x1 = groupSum(KIND_MXFP4, true, q + 64, none, none, startPairs(KIND_MXFP4, true, ps + 16, MXFP4_ZERO_POINT), v128.load(I16_ONES), true, one + 128);
    const scales = v128.load(s);
    acc = f32x4.add(acc, groupTerm(KIND_MXFP4, x0, x0, mxfp4Scales8(scales, 0), none, dp, 0, MXFP4_ZERO_POINT));
    acc = f32x4.add(acc, groupTerm(KIND_MXFP4, x1, x1, mxfp4Scales8(scales, 1), none, dp + 4, 0, MXFP4_ZERO_POINT));
    dp += 8;
    q += 128;
    s += 16;
    one += 256;
    ps += 32;
  }
  if (g < numGroups) {
    const x = groupSum(KIND_MXFP4, true, q, none, none, startPairs(KIND_MXFP4, true, ps, MXFP4_ZERO_POINT), v128.load(I16_ONES), true, one);
    acc = f32x4.add(acc, groupTerm(KIND_MXFP4, x, x, mxfp4Scales4(s), none, dp, 0, MXFP4_ZERO_POINT));
  }
  return acc;
}

/**
 * mxfp4Tile1One for two row groups at once (qb, sb: the second's codes and scales), two groups a loop: each chunk's
 * activations and each group's zero-point start loaded once for both row groups, two weight streams side by side.
 * Stores the 8 rows' f32 sums at out (rows 0-3) and out + 16 (rows 4-7): per row group the same sums and terms in
 * the same order, so the same bits.
 */
// @ts-ignore: decorator
@inline export function mxfp4Tile2One(qa: usize, qb: usize, sa: usize, sb: usize, one: usize, da: usize, ps: usize, numGroups: i32, out: usize): void {
  const ones = v128.load(I16_ONES);
  let accA = f32x4.splat(0), accB = accA;
  let dp = da;
  let g = 0;
  for (; g + 1 < numGroups; g += 2) {
    const start0 = startPairs(KIND_MXFP4, true, ps, MXFP4_ZERO_POINT);
    const start1 = startPairs(KIND_MXFP4, true, ps + 16, MXFP4_ZERO_POINT);
    let pa0 = start0, pb0 = start0, pa1 = start1, pb1 = start1;
    for (let c: usize = 0; c < 64; c += 16) {
      const low0 = v128.load(one + c);
      const high0 = v128.load(one + c + 64);
      const low1 = v128.load(one + c + 128);
      const high1 = v128.load(one + c + 192);
      pa0 = codesPair(pa0, v128.load(qa + c), low0, high0);
      pb0 = codesPair(pb0, v128.load(qb + c), low0, high0);
      pa1 = codesPair(pa1, v128.load(qa + c + 64), low1, high1);
      pb1 = codesPair(pb1, v128.load(qb + c + 64), low1, high1);
    }
    const scalesA = v128.load(sa);
    const scalesB = v128.load(sb);
    accA = f32x4.add(accA, mxfp4Term(pa0, ones, mxfp4Scales8(scalesA, 0), dp));
    accA = f32x4.add(accA, mxfp4Term(pa1, ones, mxfp4Scales8(scalesA, 1), dp + 4));
    accB = f32x4.add(accB, mxfp4Term(pb0, ones, mxfp4Scales8(scalesB, 0), dp));
    accB = f32x4.add(accB, mxfp4Term(pb1, ones, mxfp4Scales8(scalesB, 1), dp + 4));
    dp += 8;
    qa += 128;
    qb += 128;
    sa += 16;
    sb += 16;
    one += 256;
    ps += 32;
  }
  if (g < numGroups) {
    const start = startPairs(KIND_MXFP4, true, ps, MXFP4_ZERO_POINT);
    let pa = start, pb = start;
    for (let c: usize = 0; c < 64; c += 16) {
      const low = v128.load(one + c);
      const high = v128.load(one + c + 64);
      pa = codesPair(pa, v128.load(qa + c), low, high);
      pb = codesPair(pb, v128.load(qb + c), low, high);
    }
    accA = f32x4.add(accA, mxfp4Term(pa, ones, mxfp4Scales4(sa), dp));
    accB = f32x4.add(accB, mxfp4Term(pb, ones, mxfp4Scales4(sb), dp));
  }
  v128.store(out, accA);
  v128.store(out, accB, 16);
}

/** 16 bytes of MXFP4 codes (chunks c and c + 4 of a group) times their activations, added to the i16 pair sums p. */
// @ts-ignore: decorator
@inline function codesPair(p: v128, w: v128, low: v128, high: v128): v128 {
  return dotChunk16(high, highHalfChunk(KIND_MXFP4, w, w, 0), dotChunk16(low, lowHalfChunk(KIND_MXFP4, w, w, 0), p));
}

/** A MXFP4 group's f32 term from its i16 pair sums (groupTerm's operations). */
// @ts-ignore: decorator
@inline function mxfp4Term(pairs: v128, ones: v128, scales: v128, daG: usize): v128 {
  const x = pairSumsBy(pairs, ones);
  return groupTerm(KIND_MXFP4, x, x, scales, x, daG, 0, MXFP4_ZERO_POINT);
}

/** 4 rows x 4 tokens (KIND_I8: activations `stride` bytes apart from qa; nibble kinds: a quad of splat_q8's vectors
 * at quad, +0, 16, 32, 48 per chunk; the tokens' sa `gstride` apart, their ps `pstride`): each weight chunk is loaded
 * (and unpacked or widened) once for 4 tokens. Stores the 4 tokens' f32x4 at out + k * outStride. */
// @ts-ignore: decorator
@inline export function simdTile4(kind: i32, ready: bool, zeroed: bool, q: usize, s: usize, m: usize, qa: usize, stride: usize, quad: usize, sums: usize, da: usize, dstride: usize,
  sa: usize, ps: usize, gstride: usize, pstride: usize, numGroups: i32, zeroPoint: i32, out: usize, outStride: usize): void {
  const gs = groupSize(kind);
  const gb = <usize>(groupBytes(kind) << 2);
  let acc0 = f32x4.splat(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (let g = 0; g < numGroups; g++) {
    let x0 = i32x4.splat(0), x1 = x0, x2 = x0, x3 = x0;
    let y0 = x0, y1 = x0, y2 = x0, y3 = x0;
    if (kind == KIND_I8 && ready) {
      // splat_q8_i16's ready vectors: chunk c of the quad's token k at quad + 128 c + 16 k (its quants 0-1 in every
      // lane) and + 64 (quants 2-3), plain loads at constant offsets (no shuffles): 4 dot products and 4 adds per
      // token and chunk pair, one accumulator per token
      let w = q;
      let a = quad;
      for (let c = 0; c < 8; c += 2) {
        const wa = v128.load(w);
        const wb = v128.load(w, 16);
        const wal = i16x8.extend_low_i8x16_s(wa);
        const wah = i16x8.extend_high_i8x16_s(wa);
        const wbl = i16x8.extend_low_i8x16_s(wb);
        const wbh = i16x8.extend_high_i8x16_s(wb);
        x0 = dotHalfI16(dotHalfI16(dotHalfI16(dotHalfI16(x0, wal, v128.load(a)), wah, v128.load(a, 64)), wbl, v128.load(a, 128)), wbh, v128.load(a, 192));
        x1 = dotHalfI16(dotHalfI16(dotHalfI16(dotHalfI16(x1, wal, v128.load(a, 16)), wah, v128.load(a, 80)), wbl, v128.load(a, 144)), wbh, v128.load(a, 208));
        x2 = dotHalfI16(dotHalfI16(dotHalfI16(dotHalfI16(x2, wal, v128.load(a, 32)), wah, v128.load(a, 96)), wbl, v128.load(a, 160)), wbh, v128.load(a, 224));
        x3 = dotHalfI16(dotHalfI16(dotHalfI16(dotHalfI16(x3, wal, v128.load(a, 48)), wah, v128.load(a, 112)), wbl, v128.load(a, 176)), wbh, v128.load(a, 240));
        w += 32;
        a += 2 * QUAD_CHUNK_BYTES_I16;
      }
    } else if (kind == KIND_I8) {
      // a loop over pairs of chunks: each token's 8 i16 activations come in one plain load, each pair of quants
      // spread to every lane by a shuffle (JSC computes every splat load's address apart: 3 instructions each,
      // counted in its OMG dump; a plain load folds it into the addressing)
      let w = q;
      let p0 = qa, p1 = qa + stride, p2 = qa + 2 * stride, p3 = qa + 3 * stride;
      for (let c = 0; c < 8; c += 2) {
        const wa = v128.load(w);
        const wb = v128.load(w, 16);
        const wal = i16x8.extend_low_i8x16_s(wa);
        const wah = i16x8.extend_high_i8x16_s(wa);
        const wbl = i16x8.extend_low_i8x16_s(wb);
        const wbh = i16x8.extend_high_i8x16_s(wb);
        let a = v128.load(p0);
        x0 = dotHalfI16(dotHalfI16(dotHalfI16(dotHalfI16(x0, wal, laneChunk(a, 0)), wah, laneChunk(a, 1)), wbl, laneChunk(a, 2)), wbh, laneChunk(a, 3));
        a = v128.load(p1);
        x1 = dotHalfI16(dotHalfI16(dotHalfI16(dotHalfI16(x1, wal, laneChunk(a, 0)), wah, laneChunk(a, 1)), wbl, laneChunk(a, 2)), wbh, laneChunk(a, 3));
        a = v128.load(p2);
        x2 = dotHalfI16(dotHalfI16(dotHalfI16(dotHalfI16(x2, wal, laneChunk(a, 0)), wah, laneChunk(a, 1)), wbl, laneChunk(a, 2)), wbh, laneChunk(a, 3));
        a = v128.load(p3);
        x3 = dotHalfI16(dotHalfI16(dotHalfI16(dotHalfI16(x3, wal, laneChunk(a, 0)), wah, laneChunk(a, 1)), wbl, laneChunk(a, 2)), wbh, laneChunk(a, 3));
        w += 32;
        p0 += 16;
        p1 += 16;
        p2 += 16;
        p3 += 16;
      }
    } else if (kind == KIND_U6G16) {
      // 4 chunks from 3 planes, unpacked once for the 4 tokens
      let s0 = startPairs(kind, zeroed, ps, zeroPoint);
      let s1 = startPairs(kind, zeroed, ps + pstride, zeroPoint);
      let s2 = startPairs(kind, zeroed, ps + 2 * pstride, zeroPoint);
      let s3 = startPairs(kind, zeroed, ps + 3 * pstride, zeroPoint);
      let w = u6Chunk(q, 0);
      s0 = dotChunk16(v128.load(quad), w, s0);
      s1 = dotChunk16(v128.load(quad, 16), w, s1);
      s2 = dotChunk16(v128.load(quad, 32), w, s2);
      s3 = dotChunk16(v128.load(quad, 48), w, s3);
      w = u6Chunk(q, 1);
      s0 = dotChunk16(v128.load(quad, 64), w, s0);
      s1 = dotChunk16(v128.load(quad, 80), w, s1);
      s2 = dotChunk16(v128.load(quad, 96), w, s2);
      s3 = dotChunk16(v128.load(quad, 112), w, s3);
      if (!zeroed) {
        x0 = pairSums(s0);
        x1 = pairSums(s1);
        x2 = pairSums(s2);
        x3 = pairSums(s3);
        s0 = i16x8.splat(0);
        s1 = s0;
        s2 = s0;
        s3 = s0;
      }
      w = u6Chunk(q, 2);
      s0 = dotChunk16(v128.load(quad, 128), w, s0);
      s1 = dotChunk16(v128.load(quad, 144), w, s1);
      s2 = dotChunk16(v128.load(quad, 160), w, s2);
      s3 = dotChunk16(v128.load(quad, 176), w, s3);
      w = u6Chunk3(q);
      s0 = dotChunk16(v128.load(quad, 192), w, s0);
      s1 = dotChunk16(v128.load(quad, 208), w, s1);
      s2 = dotChunk16(v128.load(quad, 224), w, s2);
      s3 = dotChunk16(v128.load(quad, 240), w, s3);
      if (zeroed) {
        x0 = pairSums(s0);
        x1 = pairSums(s1);
        x2 = pairSums(s2);
        x3 = pairSums(s3);
      } else {
        x0 = widen16(s0, x0);
        x1 = widen16(s1, x1);
        x2 = widen16(s2, x2);
        x3 = widen16(s3, x3);
      }
    } else {
      // nibble kinds: each 16-byte load holds chunk c (low nibbles) and chunk c + half (high nibbles)
      // the 4 tokens' i16 pair sums (dotChunk16), widened into x0..x3 every i16Chunks chunks
      const half = halfChunks(kind);
      const loadsPerWiden = i16Chunks(kind, zeroed) >> 1;
      const plane = highBits(kind, q);
      let s0 = startPairs(kind, zeroed, ps, zeroPoint);
      let s1 = startPairs(kind, zeroed, ps + pstride, zeroPoint);
      let s2 = startPairs(kind, zeroed, ps + 2 * pstride, zeroPoint);
      let s3 = startPairs(kind, zeroed, ps + 3 * pstride, zeroPoint);
      for (let c = 0; c < half; c++) {
        const p = v128.load(q + (<usize>c << 4));
        const lo = lowHalfChunk(kind, p, plane, c);
        const hi = highHalfChunk(kind, p, plane, c);
        const a = quad + <usize>c * QUAD_CHUNK_BYTES;
        s0 = dotChunk16(v128.load(a), lo, s0);
        s1 = dotChunk16(v128.load(a, 16), lo, s1);
        s2 = dotChunk16(v128.load(a, 32), lo, s2);
        s3 = dotChunk16(v128.load(a, 48), lo, s3);
        const ah = a + <usize>half * QUAD_CHUNK_BYTES;
        s0 = dotChunk16(v128.load(ah), hi, s0);
        s1 = dotChunk16(v128.load(ah, 16), hi, s1);
        s2 = dotChunk16(v128.load(ah, 32), hi, s2);
        s3 = dotChunk16(v128.load(ah, 48), hi, s3);
        if (loadsPerWiden < half && c + 1 < half && (c + 1) % loadsPerWiden == 0) {
          x0 = widen16(s0, x0);
          x1 = widen16(s1, x1);
          x2 = widen16(s2, x2);
          x3 = widen16(s3, x3);
          s0 = i16x8.splat(0);
          s1 = s0;
          s2 = s0;
          s3 = s0;
        }
      }
      // the last widening after the loop; a group that fits the i16 sums whole (KIND_U4, or with its zero point in
      // them) widens only here
      if (loadsPerWiden == half) {
        x0 = pairSums(s0);
        x1 = pairSums(s1);
        x2 = pairSums(s2);
        x3 = pairSums(s3);
      } else {
        x0 = widen16(s0, x0);
        x1 = widen16(s1, x1);
        x2 = widen16(s2, x2);
        x3 = widen16(s3, x3);
      }
    }
    // the group's scales and offsets once for the 4 tokens
    const scaleMin = scaleMinBytes(kind, s, g);
    const scales = groupScales(kind, s, g, scaleMin);
    const offsets = hasOffsets(kind, zeroPoint) ? groupOffsets(kind, s, m, g, scaleMin) : i32x4.splat(0);
    if (ready && kind != KIND_I8) {
      // the 4 tokens' da and sa in one vector each (quad_sums' block of the group's 32 columns; KIND_I8's tiles
      // measured 2-9% slower so, and keep the per-token splat loads)
      const block = sums + <usize>((g * gs) >> 5) * QUAD_SUMS_BYTES;
      const d4 = v128.load(block);
      const sa4 = hasOffsets(kind, zeroPoint) ? v128.load(block, 16) : i32x4.splat(0);
      acc0 = f32x4.add(acc0, groupTermV(kind, x0, y0, scales, offsets, lane4(d4, 0), lane4(sa4, 0), zeroPoint));
      acc1 = f32x4.add(acc1, groupTermV(kind, x1, y1, scales, offsets, lane4(d4, 1), lane4(sa4, 1), zeroPoint));
      acc2 = f32x4.add(acc2, groupTermV(kind, x2, y2, scales, offsets, lane4(d4, 2), lane4(sa4, 2), zeroPoint));
      acc3 = f32x4.add(acc3, groupTermV(kind, x3, y3, scales, offsets, lane4(d4, 3), lane4(sa4, 3), zeroPoint));
    } else {
      const daG = da + (<usize>((g * gs) >> 5) << 2);
      acc0 = f32x4.add(acc0, groupTerm(kind, x0, y0, scales, offsets, daG, sa, zeroPoint));
      acc1 = f32x4.add(acc1, groupTerm(kind, x1, y1, scales, offsets, daG + dstride, sa + gstride, zeroPoint));
      acc2 = f32x4.add(acc2, groupTerm(kind, x2, y2, scales, offsets, daG + 2 * dstride, sa + 2 * gstride, zeroPoint));
      acc3 = f32x4.add(acc3, groupTerm(kind, x3, y3, scales, offsets, daG + 3 * dstride, sa + 3 * gstride, zeroPoint));
    }
    q += gb;
    qa += <usize>(gs * actBytes(kind));
    quad += <usize>(gs >> 2) * quadChunkBytes(kind);
    sa += 4;
    ps += 16;
  }
  v128.store(out, acc0);
  v128.store(out + outStride, acc1);
  v128.store(out + 2 * outStride, acc2);
  v128.store(out + 3 * outStride, acc3);
}
