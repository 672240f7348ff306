// The SIMD steps every quantized matmul tile shares (matmul-group-tiles.ts, matmul-k-tiles.ts, matmul-tile8.ts): one
// chunk's dot products (i16 pair sums, then widened to the 4 rows' i32 sums), a nibble kind's chunk unpacking, and a
// group's scales, offsets and f32 term (layouts in block-layouts.ts, the arithmetic in matmul-quant.ts's header).
import { KIND_I8, KIND_MXFP4, KIND_U4, KIND_U4K, KIND_U5, KIND_U5K, KIND_U6G16, groupSize, halfChunks, quantKind, superblockBytes, superblockScales, superblockShift } from "./block-layouts";
import { mxfp4Lookup, mxfp4Scales4 } from "./mxfp4";
import { QUAD_CHUNK_BYTES, QUAD_CHUNK_BYTES_I16 } from "./quantize";

/**
 * Nibble kinds, the cheap step: i16 lane 2r + k += a[4r + 2k] * w[4r + 2k] + a[4r + 2k + 1] * w[4r + 2k + 1] (one
 * pmaddubsw on x86 and no widening: the relaxed dot that adds into i32 lanes costs several instructions in JSC).
 * Exact while the i16 lanes cannot overflow: |a| <= 127, so one chunk adds at most 2 * 127 * wmax to a lane, and
 * i16Chunks(kind) chunks fit; widen16 then moves the sums to the i32 rows.
 */
// @ts-ignore: decorator
@inline export function dotChunk16(a: v128, w: v128, acc: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i16x8.add(acc, i16x8.relaxed_dot_i8x16_i7x16_s(a, w));
  // exact twin: the 16 products as i16, then the pairs of each lane
  const lo = i16x8.extmul_low_i8x16_s(a, w);
  const hi = i16x8.extmul_high_i8x16_s(a, w);
  return i16x8.add(acc, i16x8.add(v128.shuffle<i16>(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14), v128.shuffle<i16>(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15)));
}

/** dotChunk16 from zero sums: the pair sums of one chunk alone. */
// @ts-ignore: decorator
@inline export function dot16(a: v128, w: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i16x8.relaxed_dot_i8x16_i7x16_s(a, w);
  const lo = i16x8.extmul_low_i8x16_s(a, w);
  const hi = i16x8.extmul_high_i8x16_s(a, w);
  return i16x8.add(v128.shuffle<i16>(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14), v128.shuffle<i16>(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15));
}

/**
 * Chunks whose dotChunk16 sums fit one i16 lane: 2 * 127 * wmax per chunk (U4 3810, U5 7874, U6 16002) under 32767;
 * with the zero point in the sums (`zeroed`) 2 * 127 * zeroPoint (U5 4064, U6 8128): a whole group.
 */
// @ts-ignore: decorator
@inline export function i16Chunks(kind: i32, zeroed: bool): i32 {
  if (zeroed) return groupSize(kind) >> 2;
  return quantKind(kind) == KIND_U4 ? 8 : quantKind(kind) == KIND_U5 ? 4 : 2;
}

/**
 * The i16 pair sums a group starts from: zeroPoint * the token's negated activation pair sums at ps (quantize_q8's
 * ps32; ps16 already holds Q6_K's 32 times them), or zeros.
 */
// @ts-ignore: decorator
@inline export function startPairs(kind: i32, zeroed: bool, ps: usize, zeroPoint: i32): v128 {
  if (!zeroed) return i16x8.splat(0);
  return kind == KIND_U6G16 ? v128.load(ps) : i16x8.mul(v128.load(ps), i16x8.splat(<i16>zeroPoint));
}

/** KIND_U6G16: the 4 chunks of a group at q (see the header). */
// @ts-ignore: decorator
@inline export function u6Chunk(q: usize, k: i32): v128 {
  return v128.and(v128.load(q + (<usize>k << 4)), i8x16.splat(0x3f));
}
// @ts-ignore: decorator
@inline export function u6Chunk3(q: usize): v128 {
  // the three 2-bit fields at bits 6-7 gathered by byte averages with rounding, avgr_u(x, y) = (x + y + 1) >> 1:
  // exact shifts and ors here (the summands are even and their bits disjoint), 1 instruction each where JSC emits
  // a constant i16x8 / i32x4 shift as 4 (the count moved through a general register)
  const m = i8x16.splat(<i8>0xc0);
  const z = i8x16.splat(0);
  let t = i8x16.avgr_u(i8x16.avgr_u(v128.and(v128.load(q), m), z), z); // bits 4-5: chunk 3's bits 0-1
  t = i8x16.avgr_u(t, v128.and(v128.load(q, 16), m)); // bits 3-4, 5-6: bits 0-1, 2-3
  t = i8x16.avgr_u(i8x16.avgr_u(t, z), v128.and(v128.load(q, 32), m)); // bits 1-2, 3-4, 5-6: bits 0-5
  return i8x16.avgr_u(t, z);
}

/**
 * A row quad's i16 pair sums (lanes 2r, 2r + 1) as i32 sums (lane r): extadd_pairwise's values through a dot product
 * with ones (one pmaddwd; JSC emits extadd_pairwise as 4 instructions, 23 bytes, in its OMG dump).
 */
// @ts-ignore: decorator
@inline export function pairSums(acc16: v128): v128 {
  return i32x4.dot_i16x8_s(acc16, v128.load(I16_ONES));
}

/** pairSums with each row's two lanes weighted by its i16 lanes of w (w = [w0, w0, w1, w1, ..]): lane r = w_r * (sum). */
// @ts-ignore: decorator
@inline export function pairSumsBy(acc16: v128, w: v128): v128 {
  return i32x4.dot_i16x8_s(acc16, w);
}

/** Eight i16 ones in memory: pairSums loads them, as JSC turns a dot product with a constant of ones back into
 * extadd_pairwise's 24-byte sequence (it materializes the constant each time). */
export const I16_ONES: usize = memory.data<i16>([1, 1, 1, 1, 1, 1, 1, 1], 16);

/** Adds a row quad's i16 pair sums to its i32 sums (lane r). */
// @ts-ignore: decorator
@inline export function widen16(acc16: v128, x: v128): v128 {
  return i32x4.add(x, pairSums(acc16));
}

/** The 16 bytes of high bits of a KIND_U5 group at q (loaded once per group), else unused. */
// @ts-ignore: decorator
@inline export function highBits(kind: i32, q: usize): v128 {
  return quantKind(kind) == KIND_U5 ? v128.load(q + (<usize>halfChunks(kind) << 4)) : i32x4.splat(0);
}

/** Chunk c of a nibble kind's group from its 16 bytes p (c < half): low nibbles, plus KIND_U5's high bit (bit 4 + c);
 * KIND_MXFP4's codes looked up (mxfp4.ts). */
// @ts-ignore: decorator
@inline export function lowHalfChunk(k: i32, p: v128, plane: v128, c: i32): v128 {
  const kind = quantKind(k);
  const nibbles = v128.and(p, i8x16.splat(0x0f));
  if (k == KIND_MXFP4) return mxfp4Lookup(nibbles);
  if (kind == KIND_U5) return v128.or(nibbles, v128.and(i16x8.shr_u(plane, c), i8x16.splat(0x10)));
  return nibbles;
}

/** Chunk c + half of the same 16 bytes: high nibbles, plus KIND_U5's high bit (bit 3 - c); KIND_MXFP4's looked up. */
// @ts-ignore: decorator
@inline export function highHalfChunk(k: i32, p: v128, plane: v128, c: i32): v128 {
  const kind = quantKind(k);
  const nibbles = v128.and(i16x8.shr_u(p, 4), i8x16.splat(0x0f));
  if (k == KIND_MXFP4) return mxfp4Lookup(nibbles);
  if (kind == KIND_U5) return v128.or(nibbles, v128.and(i16x8.shl(plane, c + 1), i8x16.splat(0x10)));
  return nibbles;
}

/**
 * KIND_U5, the single token's tile: chunks c and c + 4 from the nibbles p and their high bits already at bit 4 of lo
 * and hi (any other bits: masked here), into one token's i16 pair sums s (a0, a1: the group's 32 activations).
 */
// @ts-ignore: decorator
@inline export function u5Pair(p: v128, lo: v128, hi: v128, a0: v128, a1: v128, c: i32, s: v128, ready: bool = false, one: usize = 0): v128 {
  const bit = i8x16.splat(0x10);
  s = dotChunk16(oneChunk(a0, c, ready, one), v128.or(v128.and(p, i8x16.splat(0x0f)), v128.and(lo, bit)), s);
  return dotChunk16(oneChunk(a1, c + 4, ready, one), v128.or(v128.and(i16x8.shr_u(p, 4), i8x16.splat(0x0f)), v128.and(hi, bit)), s);
}

/** Bytes of one chunk of a quad of tokens' ready vectors: splat_q8_i16's for KIND_I8, else splat_q8's. */
// @ts-ignore: decorator
@inline export function quadChunkBytes(kind: i32): usize {
  return kind == KIND_I8 ? QUAD_CHUNK_BYTES_I16 : QUAD_CHUNK_BYTES;
}

/** Bytes per activation quant: i16 for KIND_I8, else i8. */
// @ts-ignore: decorator
@inline export function actBytes(kind: i32): i32 {
  return kind == KIND_I8 ? 2 : 1;
}

/** KIND_I8: adds one widened half of a chunk (quants 0-1 or 2-3 of the 4 rows, i16) times a token's pair of i16
 * activations in every lane: the 4 rows' pair sums in lanes 0-3. */
// @ts-ignore: decorator
@inline export function dotHalfI16(acc: v128, rows: v128, act: v128): v128 {
  return i32x4.add(acc, i32x4.dot_i16x8_s(rows, act));
}

/** Whether a kind and zero point case has offsets (w = scale * q + offset). */
// @ts-ignore: decorator
@inline export function hasOffsets(kind: i32, zeroPoint: i32): bool {
  return kind != KIND_I8 && zeroPoint == 0;
}

/** KIND_U4K / KIND_U5K: group g's 8 factor bytes (sc of the 4 rows, then m) widened to u16, in one load; else unused. */
// @ts-ignore: decorator
@inline export function scaleMinBytes(kind: i32, s: usize, g: i32): v128 {
  if (kind != KIND_U4K && kind != KIND_U5K) return i32x4.splat(0);
  const sb = s + <usize>(g >> 3) * <usize>superblockBytes(kind);
  return v128.load8x8_u(sb + 32 + (<usize>(g & 7) << 3));
}

/**
 * The 4 rows' scales of group g of a row group whose scales are at s: as stored, or for the K-quant kinds d * f32(sc)
 * (ggml-quants.c dequantize_row_q4_K / _q5_K: d * sc with sc from get_scale_min_k4; dequantize_row_q6_K: d * scales[g]),
 * an exact f32 product (see the header), or KIND_MXFP4's f32 upper halves widened (mxfp4Scales4). scaleMin: scaleMinBytes(kind, s, g).
 */
// @ts-ignore: decorator
@inline export function groupScales(kind: i32, s: usize, g: i32, scaleMin: v128): v128 {
  if (kind == KIND_MXFP4) return mxfp4Scales4(s + (<usize>g << 3));
  if (!superblockScales(kind)) return v128.load(s + (<usize>g << 4));
  const shift = superblockShift(kind);
  const sb = s + <usize>(g >> shift) * <usize>superblockBytes(kind);
  if (kind == KIND_U6G16) {
    const j = <usize>(g & 15);
    const sc = i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(v128.load32_zero(sb + 16 + (j << 2))));
    return f32x4.mul(v128.load(sb), f32x4.convert_i32x4_s(sc));
  }
  return f32x4.mul(v128.load(sb), f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(scaleMin)));
}

/** The 4 rows' offsets of group g (only where hasOffsets): as stored in m, or for KIND_U4K / KIND_U5K -dmin * f32(m). */
// @ts-ignore: decorator
@inline export function groupOffsets(kind: i32, s: usize, m: usize, g: i32, scaleMin: v128): v128 {
  if (!superblockScales(kind)) return v128.load(m + (<usize>g << 4));
  const sb = s + <usize>(g >> 3) * <usize>superblockBytes(kind);
  return f32x4.mul(v128.load(sb, 16), f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_u(scaleMin)));
}

/**
 * The f32 term one group adds to the 4 rows' sums of one token (see the header), its scales and offsets given; x
 * holds the zero point already.
 */
// @ts-ignore: decorator
@inline export function groupTerm(kind: i32, x: v128, y: v128, scales: v128, offsets: v128, daG: usize, saG: usize, zeroPoint: i32): v128 {
  const t = f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(x), scales), v128.load32_splat(daG));
  return hasOffsets(kind, zeroPoint) ? f32x4.add(t, f32x4.mul(offsets, v128.load32_splat(saG))) : t;
}

/**
 * groupTerm with the token's da and sa as splatted vectors (the 4-token tiles spread them from quad_sums' blocks): the
 * same f32 operations in the same order, so the same bits.
 */
// @ts-ignore: decorator
@inline export function groupTermV(kind: i32, x: v128, y: v128, scales: v128, offsets: v128, da: v128, sa: v128, zeroPoint: i32): v128 {
  const t = f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(x), scales), da);
  return hasOffsets(kind, zeroPoint) ? f32x4.add(t, f32x4.mul(offsets, sa)) : t;
}

/** Lane k of v in all 4 lanes. */
// @ts-ignore: decorator
@inline export function lane4(v: v128, k: i32): v128 {
  return k == 0 ? v128.shuffle<i32>(v, v, 0, 0, 0, 0) : k == 1 ? v128.shuffle<i32>(v, v, 1, 1, 1, 1)
    : k == 2 ? v128.shuffle<i32>(v, v, 2, 2, 2, 2) : v128.shuffle<i32>(v, v, 3, 3, 3, 3);
}

/**
 * Chunk k (0..3) of 16 activations in a, its 4 quants repeated across the vector: one plain load of a group's
 * activations and a shuffle per chunk instead of a splat load per chunk (JSC computes each splat load's address
 * apart: 3 instructions, counted in its OMG dump).
 */
// @ts-ignore: decorator
@inline export function laneChunk(a: v128, k: i32): v128 {
  if (k == 0) return v128.shuffle<i32>(a, a, 0, 0, 0, 0);
  if (k == 1) return v128.shuffle<i32>(a, a, 1, 1, 1, 1);
  if (k == 2) return v128.shuffle<i32>(a, a, 2, 2, 2, 2);
  return v128.shuffle<i32>(a, a, 3, 3, 3, 3);
}

/**
 * Chunk j's 4 activations repeated across the vector: from a lone token's ready vectors (one: splat_q8_one, 16 bytes
 * per chunk) by a plain load, else laneChunk of a (its chunk j & 3). ready: a constant in every caller.
 */
// @ts-ignore: decorator
@inline export function oneChunk(a: v128, j: i32, ready: bool, one: usize): v128 {
  return ready ? v128.load(one + (<usize>j << 4)) : laneChunk(a, j & 3);
}

/** A nibble kind's chunks c and c + half (one 16-byte load), added to one token's i16 pair sums s (a0, a1: the
 * group's 32 activations). */
// @ts-ignore: decorator
@inline export function nibblePair(kind: i32, q: usize, a0: v128, a1: v128, c: i32, plane: v128, s: v128, ready: bool = false, one: usize = 0): v128 {
  const p = v128.load(q + (<usize>c << 4));
  s = dotChunk16(oneChunk(a0, c, ready, one), lowHalfChunk(kind, p, plane, c), s);
  return dotChunk16(oneChunk(a1, c + 4, ready, one), highHalfChunk(kind, p, plane, c), s);
}

/** KIND_U6G16: a group's chunks k0 and k0 + 1 added to one token's i16 pair sums s (a: the group's 16 activations). */
// @ts-ignore: decorator
@inline export function u6Pair(q: usize, a: v128, k0: i32, s: v128): v128 {
  s = dotChunk16(laneChunk(a, k0), u6Chunk(q, k0), s);
  return dotChunk16(laneChunk(a, k0 + 1), k0 == 2 ? u6Chunk3(q) : u6Chunk(q, k0 + 1), s);
}

/**
 * A nibble kind's (not KIND_I8) group of 4 rows x 1 token as exact i32 sums of the 4 rows, from its quants at q and
 * the token's activations a0 (and a1: KIND_U6G16 has 16 per group, the others 32), the i16 pair sums starting at
 * `start` (startPairs), each row's pair sums weighted by its lanes of w16 (i16 [w0, w0, w1, w1, w2, w2, w3, w3]):
 * ones (I16_ONES) for the plain sums, a K-quant group's scales for sc * sum (exact: one pmaddwd either way).
 * ready (KIND_U4 / KIND_U5, a constant): the activations from a lone token's ready vectors at one (oneChunk) instead. Unrolled by hand (binaryen does not unroll; as a loop they ran at half speed, and constant
 * chunk indices make constant shuffles).
 */
// @ts-ignore: decorator
@inline export function groupSum(kind: i32, zeroed: bool, q: usize, a0: v128, a1: v128, start: v128, w16: v128, ready: bool = false, one: usize = 0): v128 {
  const perWiden = i16Chunks(kind, zeroed);
  let x = i32x4.splat(0);
  let pairs = start;
  if (kind == KIND_U6G16) {
    pairs = u6Pair(q, a0, 0, pairs);
    if (perWiden == 2) { x = pairSumsBy(pairs, w16); pairs = i16x8.splat(0); }
    pairs = u6Pair(q, a0, 2, pairs);
    return perWiden == 2 ? i32x4.add(x, pairSumsBy(pairs, w16)) : pairSumsBy(pairs, w16);
  }
  const plane = highBits(kind, q);
  if (quantKind(kind) == KIND_U5) {
    // the high bits to bit 4: chunks 0-3 by byte averages with 0 (exact halvings: the masked bytes are even), chunks
    // 4-7 by byte doublings
    const z = i8x16.splat(0);
    const r1 = i8x16.avgr_u(v128.and(plane, i8x16.splat(<i8>0xe0)), z);
    const r2 = i8x16.avgr_u(r1, z);
    const l1 = i8x16.add(plane, plane);
    const l2 = i8x16.add(l1, l1);
    pairs = u5Pair(v128.load(q), plane, l1, a0, a1, 0, pairs, ready, one);
    pairs = u5Pair(v128.load(q, 16), r1, l2, a0, a1, 1, pairs, ready, one);
    if (perWiden == 4) { x = pairSumsBy(pairs, w16); pairs = i16x8.splat(0); }
    const l3 = i8x16.add(l2, l2);
    pairs = u5Pair(v128.load(q, 32), r2, l3, a0, a1, 2, pairs, ready, one);
    pairs = u5Pair(v128.load(q, 48), i8x16.avgr_u(r2, z), i8x16.add(l3, l3), a0, a1, 3, pairs, ready, one);
    return perWiden == 4 ? i32x4.add(x, pairSumsBy(pairs, w16)) : pairSumsBy(pairs, w16);
  }
  // pairs of chunks into i16 sums, widened before they can overflow (every 8 or 4 chunks)
  pairs = nibblePair(kind, q, a0, a1, 0, plane, pairs, ready, one);
  pairs = nibblePair(kind, q, a0, a1, 1, plane, pairs, ready, one);
  if (perWiden == 4) { x = pairSumsBy(pairs, w16); pairs = i16x8.splat(0); }
  pairs = nibblePair(kind, q, a0, a1, 2, plane, pairs, ready, one);
  pairs = nibblePair(kind, q, a0, a1, 3, plane, pairs, ready, one);
  return perWiden == 4 ? i32x4.add(x, pairSumsBy(pairs, w16)) : pairSumsBy(pairs, w16);
}
