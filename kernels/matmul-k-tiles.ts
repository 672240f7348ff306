// The K-quant tiles (Q4_K, Q5_K, Q6_K: KIND_U4K, KIND_U5K, KIND_U6G16): 4 rows x 1 token (kTile1, u6Tile1) and
// 4 rows x 4 tokens (kTile4), on q8_K activations (quantize.ts quantize_q8k).
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
import { KIND_U4K, KIND_U6G16, groupBytes, halfChunks, superblockBytes, superblockShift } from "./block-layouts";
import { dot16, dotChunk16, groupSum, highBits, highHalfChunk, i16Chunks, lane4, laneChunk, lowHalfChunk, oneChunk, pairSumsBy, u6Chunk, u6Chunk3 } from "./matmul-chunks";
import { QUAD_CHUNK_BYTES, QUAD_SUMS_BYTES } from "./quantize";

/** A row quad's 4 i16 scales, lanes 4 * half .. 4 * half + 3 of sc16 (half constant), as pair weights [sc0, sc0, sc1, sc1, ..]. */
// @ts-ignore: decorator
@inline export function pairWeights16(sc16: v128, half: i32): v128 {
  if (half == 0) return v128.shuffle<i16>(sc16, sc16, 0, 0, 1, 1, 2, 2, 3, 3);
  return v128.shuffle<i16>(sc16, sc16, 4, 4, 5, 5, 6, 6, 7, 7);
}

/** KIND_U4K / KIND_U5K: group scales from scaleMinBytes' u16 [sc0..sc3, m0..m3] as pair weights [sc0, sc0, sc1, sc1, ..]. */
// @ts-ignore: decorator
@inline export function kScales16(scaleMin: v128): v128 {
  return pairWeights16(scaleMin, 0);
}

/** KIND_U6G16: a row quad's 4 i8 scales at p as pair weights [sc0, sc0, sc1, sc1, ..] (sign-extended to i16). */
// @ts-ignore: decorator
@inline export function u6Scales16(p: usize): v128 {
  return pairWeights16(i16x8.extend_low_i8x16_s(v128.load32_zero(p)), 0);
}

/** The f32 term of one superblock for one token (see above): (f32(isc) * d + f32(imin) * negDmin) * dy. */
// @ts-ignore: decorator
@inline export function kTerm(isc: v128, imin: v128, d: v128, negDmin: v128, dy: v128): v128 {
  return f32x4.mul(f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(isc), d), f32x4.mul(f32x4.convert_i32x4_s(imin), negDmin)), dy);
}

/** Q6_K's: (f32(isc) * d) * dy. */
// @ts-ignore: decorator
@inline export function u6Term(isc: v128, d: v128, dy: v128): v128 {
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
@inline export function u6Tile1(q: usize, s: usize, qa: usize, da: usize, pc: usize, numGroups: i32): v128 {
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
 * bsum per 32, quantize_q8k's bs32), then kTerm with the superblock's d and -dmin and the token's dy. ready (a
 * constant): the activations from splat_q8_one's ready vectors of the token at one (matmul-chunks.ts oneChunk), the
 * same sums.
 */
// @ts-ignore: decorator
@inline export function kTile1(kind: i32, q: usize, s: usize, qa: usize, da: usize, bs: usize, numGroups: i32, ready: bool = false, one: usize = 0): v128 {
  const gb = <usize>(groupBytes(kind) << 2);
  let acc = f32x4.splat(0);
  for (let b = 0; b < (numGroups >> 3); b++) {
    let isc = i32x4.splat(0), imin = isc;
    let p = s + 32;
    for (let j = 0; j < 8; j++) {
      const w16 = kScales16(v128.load8x8_u(p));
      if (kind == KIND_U4K) isc = i32x4.add(isc, u4kGroup8(q, ready ? i32x4.splat(0) : v128.load(qa), ready ? i32x4.splat(0) : v128.load(qa, 16), w16, ready, one));
      else isc = i32x4.add(isc, groupSum(kind, false, q, ready ? i32x4.splat(0) : v128.load(qa), ready ? i32x4.splat(0) : v128.load(qa, 16), i16x8.splat(0), w16, ready, one));
      q += gb;
      qa += 32;
      one += 128;
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
@inline export function u4kGroup8(q: usize, a0: v128, a1: v128, w16: v128, ready: bool = false, one: usize = 0): v128 {
  const lo = i8x16.splat(0x0f);
  const hiMask = i8x16.splat(<i8>0xf0);
  const z = i8x16.splat(0);
  const p0 = v128.load(q), p1 = v128.load(q, 16), p2 = v128.load(q, 32), p3 = v128.load(q, 48);
  let s = dot16(oneChunk(a0, 0, ready, one), v128.and(p0, lo));
  s = dotChunk16(oneChunk(a0, 1, ready, one), v128.and(p1, lo), s);
  s = dotChunk16(oneChunk(a0, 2, ready, one), v128.and(p2, lo), s);
  s = dotChunk16(oneChunk(a0, 3, ready, one), v128.and(p3, lo), s);
  let x = pairSumsBy(s, i16x8.mul(w16, i16x8.splat(8)));
  x = i32x4.add(x, pairSumsBy(dot16(oneChunk(a1, 4, ready, one), i8x16.avgr_u(v128.and(p0, hiMask), z)), w16));
  x = i32x4.add(x, pairSumsBy(dot16(oneChunk(a1, 5, ready, one), i8x16.avgr_u(v128.and(p1, hiMask), z)), w16));
  x = i32x4.add(x, pairSumsBy(dot16(oneChunk(a1, 6, ready, one), i8x16.avgr_u(v128.and(p2, hiMask), z)), w16));
  return i32x4.add(x, pairSumsBy(dot16(oneChunk(a1, 7, ready, one), i8x16.avgr_u(v128.and(p3, hiMask), z)), w16));
}

/** kTile1: imin += m * bsum of groups 2k and 2k + 1 (k constant; their factor bytes at p + 16k, the bsums i16 in bs16). */
// @ts-ignore: decorator
@inline export function kPairMins(p: usize, bs16: v128, k: i32, imin: v128): v128 {
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
@inline export function kTile4(kind: i32, q: usize, s: usize, quad: usize, sums: usize, ps: usize, pstride: usize, numGroups: i32, out: usize, outStride: usize): void {
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
