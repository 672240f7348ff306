// Quantized matmul: out[t, r] = sum_c w[r, c] * x[t, c] over repacked weights and quantized activations (quantize.ts).
//
// Repacked weight layout (built at load by src/backend/wasm/repack.ts), rows padded to a multiple of 4, "K-quads":
//   wq [numRows / 4, numGroups, groupSize / 4 chunks, 4 rows, 4 quants]
//      chunk c holds quants 4c..4c+3 of each of the 4 rows, so one i8x16 x i7x16 dot product against the token's 4
//      activations (splat) leaves the 4 rows' partial sums in its 4 lanes: no horizontal sums per group (KIND_I8
//      orders a chunk's bytes for its i16 dot products instead: below).
//      The 4- and 5-bit kinds pack two chunks in 16 bytes: low nibbles chunk c, high nibbles chunk c + half (half =
//      the group's chunks / 2). KIND_U5 follows its nibbles with 16 bytes of high bits laid out like a chunk: byte
//      4r + j holds bit 4 of quant j of row r of every chunk: chunk c < 4 at bit 4 + c, chunk 4 + c at bit 3 - c, so
//      the single token's tile moves them to bit 4 by byte averages with 0 (>> 1) and byte doublings (<< 1), one
//      instruction each, in two chains (JSC emits a constant i16x8 shift as 4).
//      KIND_U6G16's 4 chunks are 3 byte planes: plane k (k < 3) holds chunk k's 6-bit quants in bits 0-5 and 2 bits of
//      chunk 3's in bits 6-7 (bits 2k and 2k + 1): chunks 0-2 are one and each, chunk 3 three ands and six byte
//      averages (a nibble plane and a high-bit plane took 17 vector ops per group and 4 shift counts; the same 12 bytes).
// Scales, per group (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1):
//   ws [numRows / 4, numGroups, 4 rows] f32   scale per group
//   wm [numRows / 4, numGroups, 4 rows] f32   offset per group ("min"), absent for KIND_I8 and with a zero point
// or, for the K-quant kinds (Q4_K, Q5_K, Q6_K), ggml's own factors per 256-weight superblock, in ws alone:
//   KIND_U4K, KIND_U5K  ws [numRows / 4, numSuperblocks, 96 bytes]: d [4 rows] f32 | -dmin [4 rows] f32 |
//                       per group of 32 (8): sc [4 rows] u8, m [4 rows] u8 (the 6-bit get_scale_min_k4 values)
//   KIND_U6G16          ws [numRows / 4, numSuperblocks, 80 bytes]: d [4 rows] f32 | per group of 16 (16): sc [4 rows] i8
// and the kernel forms scale = d * f32(sc) and offset = -dmin * f32(m) per group, as ggml's dequantize_row_q4_K /
// _q5_K / _q6_K do (ggml-quants.c). Exact in f32 (an f16 d has 11 significant bits, sc at most 8), so they are the
// very values a stored f32 scale would hold, in 1.06x (Q4_K), 1.05x (Q5_K) and 1.01x (Q6_K) of the GGUF bytes
// instead of 1.33x / 1.27x / 1.22x with f32 scales and offsets per group.
// So w = scale * q + offset for every weight of a group; or, for types whose offset is a fixed multiple of the scale
// (Q4_0: -8, Q5_0: -16, Q6_K: -32), w = scale * (q - zeroPoint) with no offset at all: the zero point is applied to
// the exact integer sum (isum - zeroPoint * sum(qa)), in the SIMD builds by starting the group's i16 pair sums at
// zeroPoint times the token's negated pair sums of activations (quantize_q8's ps16 / ps32), so the widened sum is
// already sum(qa * (q - zeroPoint)); each lane then stays within 8 * 127 * 32 = 32512 (Q6_K, Q5_0 16 * 127 * 16), so
// a whole group needs one i16 -> i32 widening (without the zero point two, for Q6_K and Q5_0). Kinds:
//   KIND_I8    signed int8, 32 per group (Q8_0)
//   KIND_U5    unsigned 0..31 as a nibble and a bit, 32 per group in 20 bytes (Q5_0, Q5_1); KIND_U5K (Q5_K)
//   KIND_U4    unsigned nibbles, 32 per group in 16 bytes (Q4_0, Q4_1); KIND_U4K (Q4_K)
//   KIND_U6G16 unsigned 0..63 in 3 byte planes, 16 per group in 12 bytes (Q6_K, whose scales change every 16;
//              always zero point 32)
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
// as exact i32 over each superblock before one f32 term per superblock, as llama.cpp does (see "K-quants" below;
// kTile1, u6Tile1, kTile4, scalarTileK). dequant.ts still reads their per-group d * sc and -dmin * m (scaleAt).
// The same sequence runs in every build, alone or in a tile of 4 tokens, so out[t, r] never depends on numTokens,
// on the thread split, or on the build (scalar / SIMD / relaxed give identical bits).

import { QUAD_CHUNK_BYTES, QUAD_CHUNK_BYTES_I16, QUAD_SUMS_BYTES } from "./quantize";

export const KIND_I8: i32 = 0;
export const KIND_U5: i32 = 1;
export const KIND_U4: i32 = 2;
export const KIND_U6G16: i32 = 3;
export const KIND_U4K: i32 = 4;
export const KIND_U5K: i32 = 5;

/** The quant layout of a kind: KIND_U4K / KIND_U5K store their quants as KIND_U4 / KIND_U5 (only the scales differ). */
// @ts-ignore: decorator
@inline export function quantKind(kind: i32): i32 {
  return kind == KIND_U4K ? KIND_U4 : kind == KIND_U5K ? KIND_U5 : kind;
}

/** Kinds whose scales are ggml's K-quant factors per 256-weight superblock (see the header). */
// @ts-ignore: decorator
@inline export function superblockScales(kind: i32): bool {
  return kind == KIND_U4K || kind == KIND_U5K || kind == KIND_U6G16;
}

/** log2 of the groups per superblock: 16 groups of 16 (Q6_K), 8 of 32 (Q4_K, Q5_K). */
// @ts-ignore: decorator
@inline function superblockShift(kind: i32): i32 {
  return kind == KIND_U6G16 ? 4 : 3;
}

/** Bytes of one superblock's scales of a row group (the header's ws layout). */
// @ts-ignore: decorator
@inline export function superblockBytes(kind: i32): i32 {
  return kind == KIND_U6G16 ? 80 : 96;
}

// @ts-ignore: decorator
@inline export function groupSize(kind: i32): i32 {
  return kind == KIND_U6G16 ? 16 : 32;
}

/** Bytes per group and row. */
// @ts-ignore: decorator
@inline export function groupBytes(kind: i32): i32 {
  const q = quantKind(kind);
  return q == KIND_I8 ? 32 : q == KIND_U5 ? 20 : q == KIND_U6G16 ? 12 : 16;
}

/** Quant i (0..groupSize-1) of row r (0..3) in a group of the K-quad layout at q. */
// @ts-ignore: decorator
@inline export function quantAt(k: i32, q: usize, r: i32, i: i32): i32 {
  const kind = quantKind(k);
  const lane = (r << 2) + (i & 3);
  if (kind == KIND_I8) return <i32>load<i8>(q + <usize>(((i >> 2) << 4) + (((i >> 1) & 1) << 3) + (r << 1) + (i & 1)));
  const c = i >> 2;
  if (kind == KIND_U6G16) {
    if (c < 3) return <i32>load<u8>(q + <usize>((c << 4) + lane)) & 63;
    const b0 = <i32>load<u8>(q + <usize>lane), b1 = <i32>load<u8>(q + <usize>(16 + lane)), b2 = <i32>load<u8>(q + <usize>(32 + lane));
    return (b0 >> 6) | ((b1 >> 6) << 2) | ((b2 >> 6) << 4);
  }
  const half = halfChunks(kind);
  const b = <i32>load<u8>(q + <usize>(((c % half) << 4) + lane));
  const nibble = c < half ? b & 15 : b >> 4;
  if (kind == KIND_U4) return nibble;
  return nibble | (((<i32>load<u8>(q + <usize>((half << 4) + lane)) >> (c < 4 ? 4 + c : 7 - c)) & 1) << 4);
}

/** Chunks per packed half of a nibble kind's group: chunk c and chunk c + half share 16 bytes. */
// @ts-ignore: decorator
@inline function halfChunks(kind: i32): i32 {
  return groupSize(kind) >> 3;
}

// ---- SIMD ----

/**
 * Nibble kinds, the cheap step: i16 lane 2r + k += a[4r + 2k] * w[4r + 2k] + a[4r + 2k + 1] * w[4r + 2k + 1] (one
 * pmaddubsw on x86 and no widening: the relaxed dot that adds into i32 lanes costs several instructions in JSC).
 * Exact while the i16 lanes cannot overflow: |a| <= 127, so one chunk adds at most 2 * 127 * wmax to a lane, and
 * i16Chunks(kind) chunks fit; widen16 then moves the sums to the i32 rows.
 */
// @ts-ignore: decorator
@inline function dotChunk16(a: v128, w: v128, acc: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i16x8.add(acc, i16x8.relaxed_dot_i8x16_i7x16_s(a, w));
  // exact twin: the 16 products as i16, then the pairs of each lane
  const lo = i16x8.extmul_low_i8x16_s(a, w);
  const hi = i16x8.extmul_high_i8x16_s(a, w);
  return i16x8.add(acc, i16x8.add(v128.shuffle<i16>(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14), v128.shuffle<i16>(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15)));
}

/** dotChunk16 from zero sums: the pair sums of one chunk alone. */
// @ts-ignore: decorator
@inline function dot16(a: v128, w: v128): v128 {
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
@inline function i16Chunks(kind: i32, zeroed: bool): i32 {
  if (zeroed) return groupSize(kind) >> 2;
  return quantKind(kind) == KIND_U4 ? 8 : quantKind(kind) == KIND_U5 ? 4 : 2;
}

/**
 * The i16 pair sums a group starts from: zeroPoint * the token's negated activation pair sums at ps (quantize_q8's
 * ps32; ps16 already holds Q6_K's 32 times them), or zeros.
 */
// @ts-ignore: decorator
@inline function startPairs(kind: i32, zeroed: bool, ps: usize, zeroPoint: i32): v128 {
  if (!zeroed) return i16x8.splat(0);
  return kind == KIND_U6G16 ? v128.load(ps) : i16x8.mul(v128.load(ps), i16x8.splat(<i16>zeroPoint));
}

/** KIND_U6G16: the 4 chunks of a group at q (see the header). */
// @ts-ignore: decorator
@inline function u6Chunk(q: usize, k: i32): v128 {
  return v128.and(v128.load(q + (<usize>k << 4)), i8x16.splat(0x3f));
}
// @ts-ignore: decorator
@inline function u6Chunk3(q: usize): v128 {
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
@inline function pairSums(acc16: v128): v128 {
  return i32x4.dot_i16x8_s(acc16, v128.load(I16_ONES));
}

/** pairSums with each row's two lanes weighted by its i16 lanes of w (w = [w0, w0, w1, w1, ..]): lane r = w_r * (sum). */
// @ts-ignore: decorator
@inline function pairSumsBy(acc16: v128, w: v128): v128 {
  return i32x4.dot_i16x8_s(acc16, w);
}

/** Eight i16 ones in memory: pairSums loads them, as JSC turns a dot product with a constant of ones back into
 * extadd_pairwise's 24-byte sequence (it materializes the constant each time). */
const I16_ONES: usize = memory.data<i16>([1, 1, 1, 1, 1, 1, 1, 1], 16);

/** Adds a row quad's i16 pair sums to its i32 sums (lane r). */
// @ts-ignore: decorator
@inline function widen16(acc16: v128, x: v128): v128 {
  return i32x4.add(x, pairSums(acc16));
}

/** The 16 bytes of high bits of a KIND_U5 group at q (loaded once per group), else unused. */
// @ts-ignore: decorator
@inline function highBits(kind: i32, q: usize): v128 {
  return quantKind(kind) == KIND_U5 ? v128.load(q + (<usize>halfChunks(kind) << 4)) : i32x4.splat(0);
}

/** Chunk c of a nibble kind's group from its 16 bytes p (c < half): low nibbles, plus KIND_U5's high bit (bit 4 + c). */
// @ts-ignore: decorator
@inline function lowHalfChunk(k: i32, p: v128, plane: v128, c: i32): v128 {
  const kind = quantKind(k);
  const nibbles = v128.and(p, i8x16.splat(0x0f));
  if (kind == KIND_U5) return v128.or(nibbles, v128.and(i16x8.shr_u(plane, c), i8x16.splat(0x10)));
  return nibbles;
}

/** Chunk c + half of the same 16 bytes: high nibbles, plus KIND_U5's high bit (bit 3 - c). */
// @ts-ignore: decorator
@inline function highHalfChunk(k: i32, p: v128, plane: v128, c: i32): v128 {
  const kind = quantKind(k);
  const nibbles = v128.and(i16x8.shr_u(p, 4), i8x16.splat(0x0f));
  if (kind == KIND_U5) return v128.or(nibbles, v128.and(i16x8.shl(plane, c + 1), i8x16.splat(0x10)));
  return nibbles;
}

/**
 * KIND_U5, the single token's tile: chunks c and c + 4 from the nibbles p and their high bits already at bit 4 of lo
 * and hi (any other bits: masked here), into one token's i16 pair sums s (a0, a1: the group's 32 activations).
 */
// @ts-ignore: decorator
@inline function u5Pair(p: v128, lo: v128, hi: v128, a0: v128, a1: v128, c: i32, s: v128): v128 {
  const bit = i8x16.splat(0x10);
  s = dotChunk16(laneChunk(a0, c), v128.or(v128.and(p, i8x16.splat(0x0f)), v128.and(lo, bit)), s);
  return dotChunk16(laneChunk(a1, c), v128.or(v128.and(i16x8.shr_u(p, 4), i8x16.splat(0x0f)), v128.and(hi, bit)), s);
}

/** Bytes of one chunk of a quad of tokens' ready vectors: splat_q8_i16's for KIND_I8, else splat_q8's. */
// @ts-ignore: decorator
@inline function quadChunkBytes(kind: i32): usize {
  return kind == KIND_I8 ? QUAD_CHUNK_BYTES_I16 : QUAD_CHUNK_BYTES;
}

/** Bytes per activation quant: i16 for KIND_I8, else i8. */
// @ts-ignore: decorator
@inline function actBytes(kind: i32): i32 {
  return kind == KIND_I8 ? 2 : 1;
}

/** KIND_I8: adds one widened half of a chunk (quants 0-1 or 2-3 of the 4 rows, i16) times a token's pair of i16
 * activations in every lane: the 4 rows' pair sums in lanes 0-3. */
// @ts-ignore: decorator
@inline function dotHalfI16(acc: v128, rows: v128, act: v128): v128 {
  return i32x4.add(acc, i32x4.dot_i16x8_s(rows, act));
}

/** Whether a kind and zero point case has offsets (w = scale * q + offset). */
// @ts-ignore: decorator
@inline function hasOffsets(kind: i32, zeroPoint: i32): bool {
  return kind != KIND_I8 && zeroPoint == 0;
}

/** KIND_U4K / KIND_U5K: group g's 8 factor bytes (sc of the 4 rows, then m) widened to u16, in one load; else unused. */
// @ts-ignore: decorator
@inline function scaleMinBytes(kind: i32, s: usize, g: i32): v128 {
  if (kind != KIND_U4K && kind != KIND_U5K) return i32x4.splat(0);
  const sb = s + <usize>(g >> 3) * <usize>superblockBytes(kind);
  return v128.load8x8_u(sb + 32 + (<usize>(g & 7) << 3));
}

/**
 * The 4 rows' scales of group g of a row group whose scales are at s: as stored, or for the K-quant kinds d * f32(sc)
 * (ggml-quants.c dequantize_row_q4_K / _q5_K: d * sc with sc from get_scale_min_k4; dequantize_row_q6_K: d * scales[g]),
 * an exact f32 product (see the header). scaleMin: scaleMinBytes(kind, s, g).
 */
// @ts-ignore: decorator
@inline function groupScales(kind: i32, s: usize, g: i32, scaleMin: v128): v128 {
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
@inline function groupOffsets(kind: i32, s: usize, m: usize, g: i32, scaleMin: v128): v128 {
  if (!superblockScales(kind)) return v128.load(m + (<usize>g << 4));
  const sb = s + <usize>(g >> 3) * <usize>superblockBytes(kind);
  return f32x4.mul(v128.load(sb, 16), f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_u(scaleMin)));
}

/**
 * The f32 term one group adds to the 4 rows' sums of one token (see the header), its scales and offsets given; x
 * holds the zero point already.
 */
// @ts-ignore: decorator
@inline function groupTerm(kind: i32, x: v128, y: v128, scales: v128, offsets: v128, daG: usize, saG: usize, zeroPoint: i32): v128 {
  const t = f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(x), scales), v128.load32_splat(daG));
  return hasOffsets(kind, zeroPoint) ? f32x4.add(t, f32x4.mul(offsets, v128.load32_splat(saG))) : t;
}

/**
 * groupTerm with the token's da and sa as splatted vectors (the 4-token tiles spread them from quad_sums' blocks): the
 * same f32 operations in the same order, so the same bits.
 */
// @ts-ignore: decorator
@inline function groupTermV(kind: i32, x: v128, y: v128, scales: v128, offsets: v128, da: v128, sa: v128, zeroPoint: i32): v128 {
  const t = f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(x), scales), da);
  return hasOffsets(kind, zeroPoint) ? f32x4.add(t, f32x4.mul(offsets, sa)) : t;
}

/** Lane k of v in all 4 lanes. */
// @ts-ignore: decorator
@inline function lane4(v: v128, k: i32): v128 {
  return k == 0 ? v128.shuffle<i32>(v, v, 0, 0, 0, 0) : k == 1 ? v128.shuffle<i32>(v, v, 1, 1, 1, 1)
    : k == 2 ? v128.shuffle<i32>(v, v, 2, 2, 2, 2) : v128.shuffle<i32>(v, v, 3, 3, 3, 3);
}

/**
 * Chunk k (0..3) of 16 activations in a, its 4 quants repeated across the vector: one plain load of a group's
 * activations and a shuffle per chunk instead of a splat load per chunk (JSC computes each splat load's address
 * apart: 3 instructions, counted in its OMG dump).
 */
// @ts-ignore: decorator
@inline function laneChunk(a: v128, k: i32): v128 {
  if (k == 0) return v128.shuffle<i32>(a, a, 0, 0, 0, 0);
  if (k == 1) return v128.shuffle<i32>(a, a, 1, 1, 1, 1);
  if (k == 2) return v128.shuffle<i32>(a, a, 2, 2, 2, 2);
  return v128.shuffle<i32>(a, a, 3, 3, 3, 3);
}

/** A nibble kind's chunks c and c + half (one 16-byte load), added to one token's i16 pair sums s (a0, a1: the
 * group's 32 activations). */
// @ts-ignore: decorator
@inline function nibblePair(kind: i32, q: usize, a0: v128, a1: v128, c: i32, plane: v128, s: v128): v128 {
  const p = v128.load(q + (<usize>c << 4));
  s = dotChunk16(laneChunk(a0, c), lowHalfChunk(kind, p, plane, c), s);
  return dotChunk16(laneChunk(a1, c), highHalfChunk(kind, p, plane, c), s);
}

/** KIND_U6G16: a group's chunks k0 and k0 + 1 added to one token's i16 pair sums s (a: the group's 16 activations). */
// @ts-ignore: decorator
@inline function u6Pair(q: usize, a: v128, k0: i32, s: v128): v128 {
  s = dotChunk16(laneChunk(a, k0), u6Chunk(q, k0), s);
  return dotChunk16(laneChunk(a, k0 + 1), k0 == 2 ? u6Chunk3(q) : u6Chunk(q, k0 + 1), s);
}

/**
 * A nibble kind's (not KIND_I8) group of 4 rows x 1 token as exact i32 sums of the 4 rows, from its quants at q and
 * the token's activations a0 (and a1: KIND_U6G16 has 16 per group, the others 32), the i16 pair sums starting at
 * `start` (startPairs), each row's pair sums weighted by its lanes of w16 (i16 [w0, w0, w1, w1, w2, w2, w3, w3]):
 * ones (I16_ONES) for the plain sums, a K-quant group's scales for sc * sum (exact: one pmaddwd either way). Unrolled by hand (binaryen does not unroll; as a loop they ran at half speed, and constant
 * chunk indices make constant shuffles).
 */
// @ts-ignore: decorator
@inline function groupSum(kind: i32, zeroed: bool, q: usize, a0: v128, a1: v128, start: v128, w16: v128): v128 {
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
    pairs = u5Pair(v128.load(q), plane, l1, a0, a1, 0, pairs);
    pairs = u5Pair(v128.load(q, 16), r1, l2, a0, a1, 1, pairs);
    if (perWiden == 4) { x = pairSumsBy(pairs, w16); pairs = i16x8.splat(0); }
    const l3 = i8x16.add(l2, l2);
    pairs = u5Pair(v128.load(q, 32), r2, l3, a0, a1, 2, pairs);
    pairs = u5Pair(v128.load(q, 48), i8x16.avgr_u(r2, z), i8x16.add(l3, l3), a0, a1, 3, pairs);
    return perWiden == 4 ? i32x4.add(x, pairSumsBy(pairs, w16)) : pairSumsBy(pairs, w16);
  }
  // pairs of chunks into i16 sums, widened before they can overflow (every 8 or 4 chunks)
  pairs = nibblePair(kind, q, a0, a1, 0, plane, pairs);
  pairs = nibblePair(kind, q, a0, a1, 1, plane, pairs);
  if (perWiden == 4) { x = pairSumsBy(pairs, w16); pairs = i16x8.splat(0); }
  pairs = nibblePair(kind, q, a0, a1, 2, plane, pairs);
  pairs = nibblePair(kind, q, a0, a1, 3, plane, pairs);
  return perWiden == 4 ? i32x4.add(x, pairSumsBy(pairs, w16)) : pairSumsBy(pairs, w16);
}

/**
 * 4 rows x 1 token: f32x4 of the 4 rows' sums. zeroed: the kind has a zero point (ps: the token's pair sums of
 * activations, quantize_q8's ps16 / ps32), else float offsets (wm, sa) or none (KIND_I8).
 */
// @ts-ignore: decorator
@inline function simdTile1(kind: i32, zeroed: bool, q: usize, s: usize, m: usize, qa: usize, da: usize, sa: usize, ps: usize, numGroups: i32, zeroPoint: i32): v128 {
  const gs = groupSize(kind);
  const gb = <usize>(groupBytes(kind) << 2);
  let acc = f32x4.splat(0);
  let dp = da;
  for (let g = 0; g < numGroups; g++) {
    let x = i32x4.splat(0), y = x;
    if (kind == KIND_I8) {
      // a loop over pairs of chunks (unrolled it ran at 60%): one plain load of their 8 i16 activations, each pair
      // of quants spread to every lane by a shuffle (JSC computes a splat load's address apart: 3 instructions)
      for (let c = 0; c < 8; c += 2) {
        const wa = v128.load(q + (<usize>c << 4));
        const wb = v128.load(q + (<usize>c << 4), 16);
        const a = v128.load(qa + (<usize>c << 3));
        x = dotHalfI16(x, i16x8.extend_low_i8x16_s(wa), laneChunk(a, 0));
        x = dotHalfI16(x, i16x8.extend_high_i8x16_s(wa), laneChunk(a, 1));
        x = dotHalfI16(x, i16x8.extend_low_i8x16_s(wb), laneChunk(a, 2));
        x = dotHalfI16(x, i16x8.extend_high_i8x16_s(wb), laneChunk(a, 3));
      }
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

// ---- K-quants (Q4_K, Q5_K, Q6_K) on q8_K activations (quantize.ts quantize_q8k) ----
// As llama.cpp's ggml-cpu dot products (arch/x86/quants.c ggml_vec_dot_q4_K_q8_K / _q5_K_q8_K / _q6_K_q8_K and their
// generic twins in ggml-cpu/quants.c): per 256-superblock and row the exact integer sums
//   isc = sum_j sc_j * isum_j      (isum_j: the group's sum(q * a); Q6_K: sum((q - 32) * a), the zero point in the i16 sums)
//   imin = sum_j m_j * bsum_j      (Q4_K / Q5_K; bsum_j = sum(a) over group j's 32 activations)
// then, once per superblock and in this one f32 order in every build and tile (Q6_K without the min term):
//   acc += (f32(isc) * d + f32(imin) * -dmin) * dy      (d, -dmin: the row's f32 factors; dy: the token's q8_K d)
// The scale multiply is free: a group's i16 pair sums are widened by a dot product with [sc_r, sc_r] instead of ones.
// Bounds (|a| <= 127): Q4_K |isum_j| <= 32 * 15 * 127 = 60960, |isc| <= 8 * 63 * 60960 = 30.7e6; Q5_K 32 * 31 * 127 =
// 125984, |isc| <= 63.5e6; Q6_K |isum_j| <= 16 * 32 * 127 = 65024, |sc| <= 128, |isc| <= 16 * 128 * 65024 = 133e6;
// |imin| <= 8 * 63 * 32 * 127 = 2.05e6: all far inside i32. The i16 pair sums are the kernels' usual ones (i16Chunks).
// f32(isc) rounds above 2^24 (relative 6e-8), the same in every build.

/** A row quad's 4 i16 scales, lanes 4 * half .. 4 * half + 3 of sc16 (half constant), as pair weights [sc0, sc0, sc1, sc1, ..]. */
// @ts-ignore: decorator
@inline function pairWeights16(sc16: v128, half: i32): v128 {
  if (half == 0) return v128.shuffle<i16>(sc16, sc16, 0, 0, 1, 1, 2, 2, 3, 3);
  return v128.shuffle<i16>(sc16, sc16, 4, 4, 5, 5, 6, 6, 7, 7);
}

/** KIND_U4K / KIND_U5K: group scales from scaleMinBytes' u16 [sc0..sc3, m0..m3] as pair weights [sc0, sc0, sc1, sc1, ..]. */
// @ts-ignore: decorator
@inline function kScales16(scaleMin: v128): v128 {
  return pairWeights16(scaleMin, 0);
}

/** KIND_U6G16: a row quad's 4 i8 scales at p as pair weights [sc0, sc0, sc1, sc1, ..] (sign-extended to i16). */
// @ts-ignore: decorator
@inline function u6Scales16(p: usize): v128 {
  return pairWeights16(i16x8.extend_low_i8x16_s(v128.load32_zero(p)), 0);
}

/** The f32 term of one superblock for one token (see above): (f32(isc) * d + f32(imin) * negDmin) * dy. */
// @ts-ignore: decorator
@inline function kTerm(isc: v128, imin: v128, d: v128, negDmin: v128, dy: v128): v128 {
  return f32x4.mul(f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(isc), d), f32x4.mul(f32x4.convert_i32x4_s(imin), negDmin)), dy);
}

/** Q6_K's: (f32(isc) * d) * dy. */
// @ts-ignore: decorator
@inline function u6Term(isc: v128, d: v128, dy: v128): v128 {
  return f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(isc), d), dy);
}

/**
 * KIND_U6G16, 4 rows x 1 token: per superblock d loaded once, the token's dy (da, one per 256 values, repeated per 32),
 * 16 groups' sc * sum((q - 32) * a) as i32 (the i16 sums start at the token's -32 * pair sums), then u6Term. The
 * pairs come compact (pc: quantize_q8k's pc16, 4 bytes per group), 4 groups per load spread by a lane shuffle each:
 * with ps16's 16 bytes per group a 14,336-column input took 28 KiB with its quants, and the matvec from memory ran at
 * 0.65x of the same kernel reading one ps16 vector for all (the activations left L1 to the weight stream). Unrolled
 * by 4 groups (one set of pointer steps per 4).
 */
// @ts-ignore: decorator
@inline function u6Tile1(q: usize, s: usize, qa: usize, da: usize, pc: usize, numGroups: i32): v128 {
  let acc = f32x4.splat(0);
  for (let b = 0; b < (numGroups >> 4); b++) {
    let isc = i32x4.splat(0);
    let sc = s + 16;
    for (let j = 0; j < 16; j += 4) {
      const p = v128.load(pc);
      // the 4 groups' i8 scales in one load, widened by halves, each group's spread to its pair weights by a shuffle
      const scv = v128.load(sc);
      const s01 = i16x8.extend_low_i8x16_s(scv), s23 = i16x8.extend_high_i8x16_s(scv);
      isc = i32x4.add(isc, groupSum(KIND_U6G16, true, q, v128.load(qa), v128.load(qa), lane4(p, 0), pairWeights16(s01, 0)));
      isc = i32x4.add(isc, groupSum(KIND_U6G16, true, q + 48, v128.load(qa, 16), v128.load(qa, 16), lane4(p, 1), pairWeights16(s01, 1)));
      isc = i32x4.add(isc, groupSum(KIND_U6G16, true, q + 96, v128.load(qa, 32), v128.load(qa, 32), lane4(p, 2), pairWeights16(s23, 0)));
      isc = i32x4.add(isc, groupSum(KIND_U6G16, true, q + 144, v128.load(qa, 48), v128.load(qa, 48), lane4(p, 3), pairWeights16(s23, 1)));
      q += 192;
      qa += 64;
      pc += 16;
      sc += 16;
    }
    acc = f32x4.add(acc, u6Term(isc, v128.load(s), v128.load32_splat(da)));
    da += 32;
    s += 80;
  }
  return acc;
}

/**
 * KIND_U4K / KIND_U5K, 4 rows x 1 token: per superblock 8 groups' sc * isum and m * bsum as i32 (bs: the token's
 * bsum per 32, quantize_q8k's bs32), then kTerm with the superblock's d and -dmin and the token's dy.
 */
// @ts-ignore: decorator
@inline function kTile1(kind: i32, q: usize, s: usize, qa: usize, da: usize, bs: usize, numGroups: i32): v128 {
  const gb = <usize>(groupBytes(kind) << 2);
  let acc = f32x4.splat(0);
  for (let b = 0; b < (numGroups >> 3); b++) {
    let isc = i32x4.splat(0), imin = isc;
    let p = s + 32;
    for (let j = 0; j < 8; j++) {
      const w16 = kScales16(v128.load8x8_u(p));
      if (kind == KIND_U4K) isc = i32x4.add(isc, u4kGroup8(q, v128.load(qa), v128.load(qa, 16), w16));
      else isc = i32x4.add(isc, groupSum(kind, false, q, v128.load(qa), v128.load(qa, 16), i16x8.splat(0), w16));
      q += gb;
      qa += 32;
      p += 8;
    }
    // the mins per pair of groups: one pmaddwd of [m_j, m_j+1] per row against [bsum_j, bsum_j+1] (i16: |bsum| <=
    // 32 * 127) instead of a multiply per group (ggml's AVX2 q4_K dot: _mm256_madd_epi16 of mins and q8 bsums)
    const bs16 = i16x8.narrow_i32x4_s(v128.load(bs), v128.load(bs, 16));
    imin = kPairMins(s + 32, bs16, 0, imin);
    imin = kPairMins(s + 32, bs16, 1, imin);
    imin = kPairMins(s + 32, bs16, 2, imin);
    imin = kPairMins(s + 32, bs16, 3, imin);
    bs += 32;
    if (kind == KIND_U4K) isc = i32x4.shr_s(isc, 3); // u4kGroup8's 8 * (sc * isum): exact
    acc = f32x4.add(acc, kTerm(isc, imin, v128.load(s), v128.load(s, 16), v128.load32_splat(da)));
    da += 32;
    s += <usize>superblockBytes(kind);
  }
  return acc;
}

/**
 * KIND_U4K, one group of 4 rows x 1 token: 8 * sum_r(sc_r * isum_r) as i32 (w16: the pair weights [sc0, sc0, ..]).
 * The high nibbles are taken as 8 * q (masked, halved by one byte average: no i16 shift, which JSC emits as 4
 * instructions), at most 120 (the relaxed dot's i7 side), so one chunk's pair sums reach 2 * 120 * 127 = 30480: each
 * is widened alone, by sc; the low nibbles' 4 chunks (at most 4 * 3810) once, by 8 * sc (at most 504). The i32 sum
 * is at most 8 * 8 * 63 * 60960 / 8 per group, 8 * 30.7e6 per superblock: inside i32.
 */
// @ts-ignore: decorator
@inline function u4kGroup8(q: usize, a0: v128, a1: v128, w16: v128): v128 {
  const lo = i8x16.splat(0x0f);
  const hiMask = i8x16.splat(<i8>0xf0);
  const z = i8x16.splat(0);
  const p0 = v128.load(q), p1 = v128.load(q, 16), p2 = v128.load(q, 32), p3 = v128.load(q, 48);
  let s = dot16(laneChunk(a0, 0), v128.and(p0, lo));
  s = dotChunk16(laneChunk(a0, 1), v128.and(p1, lo), s);
  s = dotChunk16(laneChunk(a0, 2), v128.and(p2, lo), s);
  s = dotChunk16(laneChunk(a0, 3), v128.and(p3, lo), s);
  let x = pairSumsBy(s, i16x8.mul(w16, i16x8.splat(8)));
  x = i32x4.add(x, pairSumsBy(dot16(laneChunk(a1, 0), i8x16.avgr_u(v128.and(p0, hiMask), z)), w16));
  x = i32x4.add(x, pairSumsBy(dot16(laneChunk(a1, 1), i8x16.avgr_u(v128.and(p1, hiMask), z)), w16));
  x = i32x4.add(x, pairSumsBy(dot16(laneChunk(a1, 2), i8x16.avgr_u(v128.and(p2, hiMask), z)), w16));
  return i32x4.add(x, pairSumsBy(dot16(laneChunk(a1, 3), i8x16.avgr_u(v128.and(p3, hiMask), z)), w16));
}

/** kTile1: imin += m * bsum of groups 2k and 2k + 1 (k constant; their factor bytes at p + 16k, the bsums i16 in bs16). */
// @ts-ignore: decorator
@inline function kPairMins(p: usize, bs16: v128, k: i32, imin: v128): v128 {
  const v = v128.load(p + (<usize>k << 4));
  const m16 = i16x8.extend_low_i8x16_u(v128.shuffle<u8>(v, v, 4, 12, 5, 13, 6, 14, 7, 15, 4, 12, 5, 13, 6, 14, 7, 15));
  return i32x4.add(imin, i32x4.dot_i16x8_s(m16, lane4(bs16, k)));
}

/**
 * The K-quant kinds, 4 rows x 4 tokens: kTile1 / u6Tile1's integer sums and f32 ops for a quad of tokens, each weight
 * chunk unpacked once for the 4 (splat_q8's vectors at quad; quad_sums' blocks at sums: the 4 tokens' dy and bsums
 * per 32 columns; ps: the first token's ps16, the others pstride apart). Stores token k's f32x4 at out + k * outStride.
 */
// @ts-ignore: decorator
@inline function kTile4(kind: i32, q: usize, s: usize, quad: usize, sums: usize, ps: usize, pstride: usize, numGroups: i32, out: usize, outStride: usize): void {
  const gb = <usize>(groupBytes(kind) << 2);
  const shift = superblockShift(kind);
  let acc0 = f32x4.splat(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (let b = 0; b < (numGroups >> shift); b++) {
    let i0 = i32x4.splat(0), i1 = i0, i2 = i0, i3 = i0;
    const blk = sums + <usize>(b << 3) * QUAD_SUMS_BYTES; // the superblock's first 32 columns
    if (kind == KIND_U6G16) {
      let sc = s + 16;
      for (let j = 0; j < 16; j++) {
        const w16 = u6Scales16(sc);
        let s0 = v128.load(ps), s1 = v128.load(ps + pstride), s2 = v128.load(ps + 2 * pstride), s3 = v128.load(ps + 3 * pstride);
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
        i0 = i32x4.add(i0, pairSumsBy(s0, w16));
        i1 = i32x4.add(i1, pairSumsBy(s1, w16));
        i2 = i32x4.add(i2, pairSumsBy(s2, w16));
        i3 = i32x4.add(i3, pairSumsBy(s3, w16));
        q += gb;
        quad += 4 * QUAD_CHUNK_BYTES;
        ps += 16;
        sc += 4;
      }
      const d = v128.load(s);
      const dy = v128.load(blk);
      acc0 = f32x4.add(acc0, u6Term(i0, d, lane4(dy, 0)));
      acc1 = f32x4.add(acc1, u6Term(i1, d, lane4(dy, 1)));
      acc2 = f32x4.add(acc2, u6Term(i2, d, lane4(dy, 2)));
      acc3 = f32x4.add(acc3, u6Term(i3, d, lane4(dy, 3)));
    } else {
      const half = halfChunks(kind);
      const loadsPerWiden = i16Chunks(kind, false) >> 1;
      let p = s + 32;
      for (let j = 0; j < 8; j++) {
        const w16 = kScales16(v128.load8x8_u(p));
        const plane = highBits(kind, q);
        let s0 = i16x8.splat(0), s1 = s0, s2 = s0, s3 = s0;
        for (let c = 0; c < half; c++) {
          const pk = v128.load(q + (<usize>c << 4));
          const lo = lowHalfChunk(kind, pk, plane, c);
          const hi = highHalfChunk(kind, pk, plane, c);
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
            i0 = i32x4.add(i0, pairSumsBy(s0, w16));
            i1 = i32x4.add(i1, pairSumsBy(s1, w16));
            i2 = i32x4.add(i2, pairSumsBy(s2, w16));
            i3 = i32x4.add(i3, pairSumsBy(s3, w16));
            s0 = i16x8.splat(0);
            s1 = s0;
            s2 = s0;
            s3 = s0;
          }
        }
        i0 = i32x4.add(i0, pairSumsBy(s0, w16));
        i1 = i32x4.add(i1, pairSumsBy(s1, w16));
        i2 = i32x4.add(i2, pairSumsBy(s2, w16));
        i3 = i32x4.add(i3, pairSumsBy(s3, w16));
        q += gb;
        quad += <usize>(half << 1) * QUAD_CHUNK_BYTES;
        p += 8;
      }
      // the mins: m_j of the 4 rows times each token's bsum_j (quad_sums' second vector of block j)
      let m0 = i32x4.splat(0), m1 = m0, m2 = m0, m3 = m0;
      let pm = s + 32;
      for (let j = 0; j < 8; j++) {
        const mins = i32x4.extend_high_i16x8_u(v128.load8x8_u(pm));
        const bs = v128.load(blk + <usize>j * QUAD_SUMS_BYTES, 16);
        m0 = i32x4.add(m0, i32x4.mul(mins, lane4(bs, 0)));
        m1 = i32x4.add(m1, i32x4.mul(mins, lane4(bs, 1)));
        m2 = i32x4.add(m2, i32x4.mul(mins, lane4(bs, 2)));
        m3 = i32x4.add(m3, i32x4.mul(mins, lane4(bs, 3)));
        pm += 8;
      }
      const d = v128.load(s);
      const negDmin = v128.load(s, 16);
      const dy = v128.load(blk);
      acc0 = f32x4.add(acc0, kTerm(i0, m0, d, negDmin, lane4(dy, 0)));
      acc1 = f32x4.add(acc1, kTerm(i1, m1, d, negDmin, lane4(dy, 1)));
      acc2 = f32x4.add(acc2, kTerm(i2, m2, d, negDmin, lane4(dy, 2)));
      acc3 = f32x4.add(acc3, kTerm(i3, m3, d, negDmin, lane4(dy, 3)));
    }
    s += <usize>superblockBytes(kind);
  }
  v128.store(out, acc0);
  v128.store(out + outStride, acc1);
  v128.store(out + 2 * outStride, acc2);
  v128.store(out + 3 * outStride, acc3);
}

/** 4 rows x 4 tokens (KIND_I8: activations `stride` bytes apart from qa; nibble kinds: a quad of splat_q8's vectors
 * at quad, +0, 16, 32, 48 per chunk; the tokens' sa `gstride` apart, their ps `pstride`): each weight chunk is loaded
 * (and unpacked or widened) once for 4 tokens. Stores the 4 tokens' f32x4 at out + k * outStride. */
// @ts-ignore: decorator
@inline function simdTile4(kind: i32, ready: bool, zeroed: bool, q: usize, s: usize, m: usize, qa: usize, stride: usize, quad: usize, sums: usize, da: usize, dstride: usize,
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

/** KIND_I8 in i8Tile8: the group term of one token and row quad added to its f32 sums in memory at p (groupTerm's
 * ops in its order: the sums start at +0 and take one add per group, as the register accumulators do). */
// @ts-ignore: decorator
@inline function addTermAt(p: usize, x: v128, scales: v128, da: v128): void {
  v128.store(p, f32x4.add(v128.load(p), groupTermV(KIND_I8, x, x, scales, i32x4.splat(0), da, i32x4.splat(0), 0)));
}

/**
 * KIND_I8: the quants of two row groups (at qa and qb) widened to i16 into wide [numGroups * 8 chunks, 4 x 16
 * bytes]: per chunk row group a's quants 0-1 and 2-3, then b's. i8Tile8 reads them for every quad of a block of
 * tokens: widened in the tile they cost 4 extends per 128 multiply-adds, about a fifth of its vector work.
 */
// @ts-ignore: decorator
@inline function widenPair(qa: usize, qb: usize, numGroups: i32, wide: usize): void {
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
@inline function zeroTile8Sums(out: usize, outStride: usize): void {
  const zero = f32x4.splat(0);
  for (let k: usize = 0; k < 4; k++) {
    v128.store(out + k * outStride, zero);
    v128.store(out + k * outStride, zero, 16);
  }
}

/** KIND_I8, one chunk of a row quad x one token: both widened halves (quants 0-1 and 2-3 of the 4 rows, i16) times
 * the token's ready pair vectors lo and hi: the 4 rows' i32 sums of the chunk's 4 products (i8Tile8). */
// @ts-ignore: decorator
@inline function i8Pair(wl: v128, wh: v128, lo: v128, hi: v128): v128 {
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
@inline function i8Tile8(wide: usize, sa: usize, sb: usize, quad: usize, da: usize, dstride: usize, g0: i32, g1: i32, out: usize, outStride: usize): void {
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
 */
// @ts-ignore: decorator
@inline function u4Tile8(wide: usize, sa: usize, sb: usize, quad: usize, sums: usize, ps: usize, pstride: usize, g0: i32, g1: i32, out: usize, outStride: usize): void {
  if (g0 == 0) zeroTile8Sums(out, outStride);
  let w = wide;
  for (let g = g0; g < g1; g++) {
    const pg = ps + (<usize>g << 4);
    let x0 = startPairs(KIND_U4, true, pg, 8);
    let x1 = startPairs(KIND_U4, true, pg + pstride, 8);
    let x2 = startPairs(KIND_U4, true, pg + 2 * pstride, 8);
    let x3 = startPairs(KIND_U4, true, pg + 3 * pstride, 8);
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
    const scA = v128.load(sa + (<usize>g << 4));
    const scB = v128.load(sb + (<usize>g << 4));
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
 * vector register for every shift: 6 instructions per 16 bytes of quants).
 */
// @ts-ignore: decorator
@inline function unpackPair(qa: usize, qb: usize, numGroups: i32, wide: usize): void {
  const none = i32x4.splat(0);
  for (let i = 0; i < numGroups * 4; i++) {
    const pa = v128.load(qa);
    const pb = v128.load(qb);
    v128.store(wide, lowHalfChunk(KIND_U4, pa, none, 0));
    v128.store(wide, highHalfChunk(KIND_U4, pa, none, 0), 16);
    v128.store(wide, lowHalfChunk(KIND_U4, pb, none, 0), 32);
    v128.store(wide, highHalfChunk(KIND_U4, pb, none, 0), 48);
    qa += 16;
    qb += 16;
    wide += 64;
  }
}

/** u4Tile8's addTermAt: groupTermV of Q4_0 (no offsets) added to the f32 sums in memory at p. */
// @ts-ignore: decorator
@inline function addTermU4At(p: usize, x: v128, scales: v128, da: v128): void {
  v128.store(p, f32x4.add(v128.load(p), groupTermV(KIND_U4, x, x, scales, i32x4.splat(0), da, i32x4.splat(0), 8)));
}

// ---- scalar twin: the same integer sums and the same f32 op sequence per row ----

/** Row r's scale of group g (groupScales' lane r). */
// @ts-ignore: decorator
@inline export function scaleAt(kind: i32, s: usize, g: i32, r: i32): f32 {
  if (!superblockScales(kind)) return load<f32>(s + <usize>((g * 4 + r) << 2));
  const shift = superblockShift(kind);
  const sb = s + <usize>(g >> shift) * <usize>superblockBytes(kind);
  const j = g & ((1 << shift) - 1);
  const d = load<f32>(sb + (<usize>r << 2));
  if (kind == KIND_U6G16) return d * <f32>load<i8>(sb + 16 + <usize>((j << 2) + r));
  return d * <f32>load<u8>(sb + 32 + <usize>((j << 3) + r));
}

/** Row r's offset of group g (groupOffsets' lane r). */
// @ts-ignore: decorator
@inline export function offsetAt(kind: i32, s: usize, m: usize, g: i32, r: i32): f32 {
  if (!superblockScales(kind)) return load<f32>(m + <usize>((g * 4 + r) << 2));
  const sb = s + <usize>(g >> 3) * <usize>superblockBytes(kind);
  return load<f32>(sb + 16 + (<usize>r << 2)) * <f32>load<u8>(sb + 36 + <usize>(((g & 7) << 3) + r));
}


/** sum(qa) of a group from its pair sums at ps (quantize_q8), negated: ps16 holds Q6_K's 32 times them. */
// @ts-ignore: decorator
@inline function zeroTerm(kind: i32, ps: usize, zeroPoint: i32): i32 {
  const pairs = <i32>load<i16>(ps) + <i32>load<i16>(ps, 2);
  return kind == KIND_U6G16 ? pairs : zeroPoint * pairs;
}

function scalarTile1(kind: i32, q: usize, s: usize, m: usize, qa: usize, da: usize, sa: usize, ps: usize, numGroups: i32, out4: usize, zeroPoint: i32): void {
  const gs = groupSize(kind);
  const gb = groupBytes(kind) << 2;
  for (let r = 0; r < 4; r++) {
    let acc: f32 = 0;
    for (let g = 0; g < numGroups; g++) {
      const qg = q + <usize>(g * gb);
      const ag = qa + <usize>(g * gs * actBytes(kind));
      let isum: i32 = 0;
      for (let i = 0; i < gs; i++) {
        const a = kind == KIND_I8 ? <i32>load<i16>(ag + (<usize>i << 1)) : <i32>load<i8>(ag + i);
        isum += quantAt(kind, qg, r, i) * a;
      }
      const dag = load<f32>(da + (<usize>((g * gs) >> 5) << 2));
      if (kind != KIND_I8 && zeroPoint != 0) isum += zeroTerm(kind, ps + (<usize>g << 4), zeroPoint);
      let t: f32 = (<f32>isum * scaleAt(kind, s, g, r)) * dag;
      if (hasOffsets(kind, zeroPoint)) t = t + offsetAt(kind, s, m, g, r) * load<f32>(sa + (<usize>g << 2));
      acc = acc + t;
    }
    store<f32>(out4 + (<usize>r << 2), acc);
  }
}

/**
 * The K-quant kinds' scalar twin (kTile1 / u6Tile1 / kTile4): per row and superblock the same exact i32 sums and the
 * same f32 ops (kTerm / u6Term). da: the token's q8_K d per 32 (repeated), bs: its bsums per 32, ps: its ps16.
 */
function scalarTileK(kind: i32, q: usize, s: usize, qa: usize, da: usize, bs: usize, ps: usize, numGroups: i32, out4: usize): void {
  const gs = groupSize(kind);
  const gb = groupBytes(kind) << 2;
  const shift = superblockShift(kind);
  const sbBytes = superblockBytes(kind);
  for (let r = 0; r < 4; r++) {
    let acc: f32 = 0;
    for (let b = 0; b < (numGroups >> shift); b++) {
      const sb = s + <usize>(b * sbBytes);
      let isc: i32 = 0, imin: i32 = 0;
      for (let j = 0; j < (1 << shift); j++) {
        const g = (b << shift) + j;
        const qg = q + <usize>(g * gb);
        const ag = qa + <usize>(g * gs);
        let isum: i32 = 0;
        for (let i = 0; i < gs; i++) isum += quantAt(kind, qg, r, i) * <i32>load<i8>(ag + i);
        if (kind == KIND_U6G16) {
          isum += zeroTerm(kind, ps + (<usize>g << 4), 32);
          isc += <i32>load<i8>(sb + 16 + <usize>((j << 2) + r)) * isum;
        } else {
          isc += <i32>load<u8>(sb + 32 + <usize>((j << 3) + r)) * isum;
          imin += <i32>load<u8>(sb + 36 + <usize>((j << 3) + r)) * load<i32>(bs + (<usize>g << 2));
        }
      }
      const d = load<f32>(sb + (<usize>r << 2));
      const dy = load<f32>(da + (<usize>b << 5));
      const t: f32 = kind == KIND_U6G16 ? (<f32>isc * d) * dy : (<f32>isc * d + <f32>imin * load<f32>(sb + 16 + (<usize>r << 2))) * dy;
      acc = acc + t;
    }
    store<f32>(out4 + (<usize>r << 2), acc);
  }
}

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
  const sStride = <usize>(superblockScales(kind) ? (numGroups >> superblockShift(kind)) * superblockBytes(kind) : numGroups * 16);
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
  const blocked = ASC_FEATURE_SIMD && ready && (kind == KIND_I8 || (kind == KIND_U4 && zeroed));
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
          else unpackPair(q + <usize>(g0 * gb4), q + qStride + <usize>(g0 * gb4), g1 - g0, wide);
          for (let t = t0; t < t1; t += 4) {
            const quad = quads + <usize>(t >> 2) * quadStride;
            const o = out + <usize>t * outStride + (<usize>rg << 4);
            if (kind == KIND_I8) i8Tile8(wide, s, s + sStride, quad + <usize>(g0 * 8) * QUAD_CHUNK_BYTES_I16, da + <usize>t * dStride, dStride, g0, g1, o, outStride);
            else u4Tile8(wide, s, s + sStride, quad + <usize>(g0 * 8) * QUAD_CHUNK_BYTES, sumsAt + <usize>(t >> 2) * sumsStride, ps + <usize>t * pStride, pStride, g0, g1, o, outStride);
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
  for (let rg = groupStart; rg < groupEnd; rg++) {
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
      if (ASC_FEATURE_SIMD && (kind == KIND_U4K || kind == KIND_U5K)) v128.store(target, kTile1(kind, q, s, qat, dat, sat, numGroups));
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
  return kind == KIND_U4 ? 8 : kind == KIND_U5 ? 16 : kind == KIND_U6G16 ? 32 : 0;
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
 * splat_q8_i16's or 0 (then its tiles splat the compact i16 rows themselves: a few tokens, whose rows stay in L1).
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
  else if (kind == KIND_U5K) matmulU5K(out, wq, ws, wm, qa, da, sa, rows, cols, numTokens, zeroPoint, ps, quads, groupStart, groupEnd, tmp);
  else matmulG16Z(out, wq, ws, wm, qa, da, sa, rows, cols, numTokens, zeroPoint, ps, quads, groupStart, groupEnd, tmp);
}
