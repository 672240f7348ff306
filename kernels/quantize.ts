// Activation quantization, once per matmul input (llama.cpp's Q8_0 activations): per 32 values int8
// q = round(x * 127 / amax) and the scale d = amax / 127 rounded to f16, as ggml-cpu's x86 quantize_row_q8_0 stores it
// (y.d = GGML_CPU_FP32_TO_FP16(d), id = 127 / amax, _mm256_round_ps to nearest even) and every q8_0 dot reads it back. Also the per-16 and per-32 sums d * sum(q), which turn a weight
// offset ("min") into one multiply per group instead of one per weight, and the pair sums of q that an integer zero
// point needs (matmul-quant.ts starts a group's i16 sums from them).

/**
 * x [numTokens, cols] f32 -> qa [numTokens, cols] i8, da [numTokens, cols / 32] f32,
 * sa32 [numTokens, cols / 32] f32, sa16 [numTokens, cols / 16] f32 (d * sum(q), for float offsets),
 * ps32 [numTokens, cols / 32, 8] i16, ps16 [numTokens, cols / 16, 8] i16 (for integer zero points: per group the
 * negated pair sums of its chunks of 4 quants, p0 = -sum(q[4c] + q[4c + 1]), p1 = -sum(q[4c + 2] + q[4c + 3]),
 * repeated as [p0, p1, p0, p1, p0, p1, p0, p1] like a row quad's i16 pair sums; ps16 times 32, Q6_K's zero point).
 * cols is a multiple of 32.
 */
export function quantize_q8(x: usize, numTokens: i32, cols: i32, qa: usize, da: usize, sa32: usize, sa16: usize, ps32: usize, ps16: usize): void {
  const numBlocks = cols >> 5;
  const total = numTokens * numBlocks;
  for (let blk = 0; blk < total; blk++) {
    const src = x + (<usize>blk << 7);
    const dst = qa + (<usize>blk << 5);
    // pair sums of the low and high 16 quants: lanes 0-1 and 2-3 of each chunk of 4
    let lo0: i32 = 0, lo1: i32 = 0, hi0: i32 = 0, hi1: i32 = 0;
    let d: f32;
    if (ASC_FEATURE_SIMD) {
      // the same values as the scalar loop for finite inputs. amax as the i32 max of the |x| bit patterns (the same
      // order as the floats for non-negative values; f32x4.max is 8 instructions in JSC for its NaN rules)
      const absMask = i32x4.splat(0x7fffffff);
      let m = i32x4.max_s(v128.and(v128.load(src), absMask), v128.and(v128.load(src, 16), absMask));
      m = i32x4.max_s(m, i32x4.max_s(v128.and(v128.load(src, 32), absMask), v128.and(v128.load(src, 48), absMask)));
      m = i32x4.max_s(m, i32x4.max_s(v128.and(v128.load(src, 64), absMask), v128.and(v128.load(src, 80), absMask)));
      m = i32x4.max_s(m, i32x4.max_s(v128.and(v128.load(src, 96), absMask), v128.and(v128.load(src, 112), absMask)));
      m = i32x4.max_s(m, v128.shuffle<i32>(m, m, 2, 3, 0, 1));
      m = i32x4.max_s(m, v128.shuffle<i32>(m, m, 1, 0, 3, 2));
      const amax = reinterpret<f32>(i32x4.extract_lane(m, 0));
      d = amax / 127;
      const ids: f32 = amax > 0 ? 127 / amax : 0;
      const id = f32x4.splat(ids);
      let q0: v128, q1: v128, q2: v128, q3: v128, q4: v128, q5: v128, q6: v128, q7: v128;
      if (amax < Infinity && ids < Infinity) {
        // |x * id| <= 127 + a few ulps: adding 1.5 * 2^23 rounds to the nearest integer, ties to even, as nearest()
        // does, and leaves it in the low mantissa bits (the i32 trunc_sat is 8 instructions in JSC)
        q0 = roundToI32(f32x4.mul(v128.load(src), id));
        q1 = roundToI32(f32x4.mul(v128.load(src, 16), id));
        q2 = roundToI32(f32x4.mul(v128.load(src, 32), id));
        q3 = roundToI32(f32x4.mul(v128.load(src, 48), id));
        q4 = roundToI32(f32x4.mul(v128.load(src, 64), id));
        q5 = roundToI32(f32x4.mul(v128.load(src, 80), id));
        q6 = roundToI32(f32x4.mul(v128.load(src, 96), id));
        q7 = roundToI32(f32x4.mul(v128.load(src, 112), id));
      } else {
        // infinities, NaN, or an id that overflowed (amax below ~3.7e-37): nearest and trunc_sat's own rules
        q0 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(src), id)));
        q1 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(src, 16), id)));
        q2 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(src, 32), id)));
        q3 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(src, 48), id)));
        q4 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(src, 64), id)));
        q5 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(src, 80), id)));
        q6 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(src, 96), id)));
        q7 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(src, 112), id)));
      }
      const lim = i32x4.splat(127);
      const neg = i32x4.splat(-127);
      q0 = i32x4.min_s(i32x4.max_s(q0, neg), lim);
      q1 = i32x4.min_s(i32x4.max_s(q1, neg), lim);
      q2 = i32x4.min_s(i32x4.max_s(q2, neg), lim);
      q3 = i32x4.min_s(i32x4.max_s(q3, neg), lim);
      q4 = i32x4.min_s(i32x4.max_s(q4, neg), lim);
      q5 = i32x4.min_s(i32x4.max_s(q5, neg), lim);
      q6 = i32x4.min_s(i32x4.max_s(q6, neg), lim);
      q7 = i32x4.min_s(i32x4.max_s(q7, neg), lim);
      const lo = i32x4.add(i32x4.add(q0, q1), i32x4.add(q2, q3));
      const hi = i32x4.add(i32x4.add(q4, q5), i32x4.add(q6, q7));
      lo0 = i32x4.extract_lane(lo, 0) + i32x4.extract_lane(lo, 1);
      lo1 = i32x4.extract_lane(lo, 2) + i32x4.extract_lane(lo, 3);
      hi0 = i32x4.extract_lane(hi, 0) + i32x4.extract_lane(hi, 1);
      hi1 = i32x4.extract_lane(hi, 2) + i32x4.extract_lane(hi, 3);
      v128.store(dst, i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(q0, q1), i16x8.narrow_i32x4_s(q2, q3)));
      v128.store(dst, i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(q4, q5), i16x8.narrow_i32x4_s(q6, q7)), 16);
    } else {
      let amax: f32 = 0;
      for (let i = 0; i < 32; i++) {
        const a = Mathf.abs(load<f32>(src + (<usize>i << 2)));
        if (a > amax) amax = a;
      }
      d = amax / 127;
      const id: f32 = amax > 0 ? 127 / amax : 0;
      for (let i = 0; i < 32; i++) {
        let q = <i32>nearest(load<f32>(src + (<usize>i << 2)) * id);
        if (q > 127) q = 127;
        if (q < -127) q = -127;
        store<i8>(dst + i, <i8>q);
        if (i < 16) {
          if ((i & 2) == 0) lo0 += q; else lo1 += q;
        } else if ((i & 2) == 0) hi0 += q;
        else hi1 += q;
      }
    }
    const sumLo = lo0 + lo1;
    const sumHi = hi0 + hi1;
    // the f16 scale (q8_0's d), and d * sum(q) rounded to f16 as q8_1's s (quantize_row_q8_1, for Q4_1 / Q5_1's mins)
    store<f32>(da + (<usize>blk << 2), roundToF16(d));
    store<f32>(sa32 + (<usize>blk << 2), roundToF16(d * <f32>(sumLo + sumHi)));
    store<f32>(sa16 + (<usize>blk << 3), d * <f32>sumLo);
    store<f32>(sa16 + (<usize>blk << 3) + 4, d * <f32>sumHi);
    storePairs(ps32 + (<usize>blk << 4), -(lo0 + hi0), -(lo1 + hi1));
    storePairs(ps16 + (<usize>blk << 5), -32 * lo0, -32 * lo1);
    storePairs(ps16 + (<usize>blk << 5) + 16, -32 * hi0, -32 * hi1);
  }
}

/**
 * The K-quant weights' activations (Q4_K, Q5_K, Q6_K), llama.cpp's q8_K (ggml-quants.c quantize_row_q8_K_ref, which
 * ggml-cpu's x86 quantize_row_q8_K calls): per 256 values the value of largest magnitude (the first one, signed) max,
 * iscale = -127 / max, q = min(127, nearest(iscale * x)) (nearest_int rounds half to even, as nearest() does), d =
 * 1 / iscale (negative where max is positive); all zeros give d = 0. The same quants and d as llama.cpp, so the K-quant
 * kernels' integer sums are llama.cpp's. Outputs, in quantize_q8's shapes so splat_q8 / quad_sums read them alike:
 * qa [numTokens, cols] i8, da [numTokens, cols / 32] f32 (the superblock's d, repeated for each of its 8 blocks of
 * 32), bs32 [numTokens, cols / 32] i32 (sum(q) per 32: Q4_K / Q5_K's mins), ps16 [numTokens, cols / 16, 8] i16 (as
 * quantize_q8's: Q6_K's zero point, for the 4-token tiles) and pc16 [numTokens, cols / 16] i32, the same pair per 16
 * once (i16 p0 | p1 << 16: a single token's Q6_K tile loads 4 groups' at a time and spreads each, so its activations
 * stay in L1 at 14,336 columns: ps16 doubled them, and that matvec ran at 0.65x). cols is a multiple of 256. The SIMD
 * and scalar paths give the same bits.
 */
export function quantize_q8k(x: usize, numTokens: i32, cols: i32, qa: usize, da: usize, bs32: usize, ps16: usize, pc16: usize): void {
  const numSuper = numTokens * (cols >> 8);
  for (let sb = 0; sb < numSuper; sb++) {
    const src = x + (<usize>sb << 10);
    // amax, then the first value with |x| == amax (the scalar reference keeps the first strictly larger one: the same)
    let amax: f32 = 0;
    if (ASC_FEATURE_SIMD) {
      let m = f32x4.abs(v128.load(src));
      for (let i = 16; i < 1024; i += 16) m = f32x4.max(m, f32x4.abs(v128.load(src + <usize>i)));
      amax = Mathf.max(Mathf.max(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)), Mathf.max(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)));
    } else {
      for (let i = 0; i < 256; i++) {
        const a = Mathf.abs(load<f32>(src + (<usize>i << 2)));
        if (a > amax) amax = a;
      }
    }
    let iscale: f32 = 0;
    let d: f32 = 0;
    if (amax > 0) {
      let i = 0;
      while (Mathf.abs(load<f32>(src + (<usize>i << 2))) != amax) i++;
      iscale = <f32>-127 / load<f32>(src + (<usize>i << 2));
      d = 1 / iscale;
    }
    for (let blk = 0; blk < 8; blk++) {
      const b = (sb << 3) + blk; // block of 32 in the whole input
      const bx = src + (<usize>blk << 7);
      const dst = qa + (<usize>b << 5);
      let lo0: i32 = 0, lo1: i32 = 0, hi0: i32 = 0, hi1: i32 = 0;
      if (ASC_FEATURE_SIMD) {
        const is = f32x4.splat(iscale);
        const lim = i32x4.splat(127);
        const q0 = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(is, v128.load(bx)))), lim);
        const q1 = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(is, v128.load(bx, 16)))), lim);
        const q2 = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(is, v128.load(bx, 32)))), lim);
        const q3 = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(is, v128.load(bx, 48)))), lim);
        const q4 = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(is, v128.load(bx, 64)))), lim);
        const q5 = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(is, v128.load(bx, 80)))), lim);
        const q6 = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(is, v128.load(bx, 96)))), lim);
        const q7 = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(is, v128.load(bx, 112)))), lim);
        const lo = i32x4.add(i32x4.add(q0, q1), i32x4.add(q2, q3));
        const hi = i32x4.add(i32x4.add(q4, q5), i32x4.add(q6, q7));
        lo0 = i32x4.extract_lane(lo, 0) + i32x4.extract_lane(lo, 1);
        lo1 = i32x4.extract_lane(lo, 2) + i32x4.extract_lane(lo, 3);
        hi0 = i32x4.extract_lane(hi, 0) + i32x4.extract_lane(hi, 1);
        hi1 = i32x4.extract_lane(hi, 2) + i32x4.extract_lane(hi, 3);
        // |q| <= 127 (|iscale * x| <= 127 up to rounding): the saturating narrows keep every value
        v128.store(dst, i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(q0, q1), i16x8.narrow_i32x4_s(q2, q3)));
        v128.store(dst, i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(q4, q5), i16x8.narrow_i32x4_s(q6, q7)), 16);
      } else {
        for (let i = 0; i < 32; i++) {
          let q = <i32>nearest(iscale * load<f32>(bx + (<usize>i << 2)));
          if (q > 127) q = 127;
          store<i8>(dst + i, <i8>q);
          if (i < 16) {
            if ((i & 2) == 0) lo0 += q; else lo1 += q;
          } else if ((i & 2) == 0) hi0 += q;
          else hi1 += q;
        }
      }
      store<f32>(da + (<usize>b << 2), d);
      store<i32>(bs32 + (<usize>b << 2), lo0 + lo1 + hi0 + hi1);
      storePairs(ps16 + (<usize>b << 5), -32 * lo0, -32 * lo1);
      storePairs(ps16 + (<usize>b << 5) + 16, -32 * hi0, -32 * hi1);
      store<i32>(pc16 + (<usize>b << 3), pairBits(-32 * lo0, -32 * lo1));
      store<i32>(pc16 + (<usize>b << 3), pairBits(-32 * hi0, -32 * hi1), 4);
    }
  }
}

/** The nearest integer of each lane of v (|v| < 2^22), ties to even, as i32: v + 1.5 * 2^23 rounds it into the low
 * mantissa bits, exactly nearest()'s value, and subtracting the sum's own bit pattern at 0 leaves it (two instructions). */
// @ts-ignore: decorator
@inline function roundToI32(v: v128): v128 {
  return i32x4.sub(f32x4.add(v, f32x4.splat(12582912.0)), i32x4.splat(0x4b400000));
}

/**
 * x rounded to the nearest f16 value (ties to even, as F16C's vcvtps2ph), kept as f32: to 11 significant bits from
 * f16's smallest normal 2^-14, below it to a multiple of 2^-24 (f16's denormals: adding 0.5 leaves x's bits at f32's
 * 2^-24 ulp there), and beyond f16's largest, 65504, the infinity f16 gives. NaN stays NaN.
 */
// @ts-ignore: decorator
@inline function roundToF16(x: f32): f32 {
  const bits = reinterpret<u32>(x);
  const sign = bits & 0x80000000;
  const a = reinterpret<f32>(bits ^ sign);
  if (a < 6.103515625e-5) return reinterpret<f32>(reinterpret<u32>((a + 0.5) - 0.5) | sign);
  if (a >= 65520) return a == a ? reinterpret<f32>(0x7f800000 | sign) : x; // 65520 and up round past 65504
  return reinterpret<f32>((bits + 0xfff + ((bits >> 13) & 1)) & ~(<u32>0x1fff));
}

/** [p0, p1] as two i16 in one i32 (little-endian: p0 first). */
// @ts-ignore: decorator
@inline function pairBits(p0: i32, p1: i32): i32 {
  return (p0 & 0xffff) | (p1 << 16);
}

/** 16 bytes at p = [p0, p1] as i16, 4 times (ps16's |p0|, |p1| <= 32 * 8 * 127 < 2^15, ps32's <= 16 * 127). */
// @ts-ignore: decorator
@inline function storePairs(p: usize, p0: i32, p1: i32): void {
  const v = pairBits(p0, p1);
  store<i32>(p, v);
  store<i32>(p, v, 4);
  store<i32>(p, v, 8);
  store<i32>(p, v, 12);
}

/** Bytes of one chunk of splat_q8's layout: the 16-byte vectors of a quad of tokens. */
export const QUAD_CHUNK_BYTES: usize = 64;

/**
 * The nibble kinds' 4-token tiles' activations: qa [numTokens, cols] i8 (quantize_q8) -> out [numTokens / 4,
 * cols / 4 chunks, 4 tokens, 16 bytes] for the whole quads of tokens, every chunk of 4 quants repeated into a ready
 * 16-byte vector. A tile then reads its 4 tokens' vectors for a chunk with plain loads at constant offsets from one
 * pointer: JSC emits a splat load as three instructions, a plain load with an offset as one (prefill q4_0 12-16%
 * faster). Single tokens keep the compact row (16 bytes per chunk would push a decode step's activations out of L1),
 * and so does Q8_0 in a batched decode (ready i16 vectors at twice these bytes ran 5-8% slower; splat_q8_i16's are 4x).
 */
export function splat_q8(qa: usize, numTokens: i32, cols: i32, out: usize): void {
  const numChunks = cols >> 2;
  const numFull = numTokens & ~3;
  for (let t = 0; t < numFull; t++) {
    const src = qa + <usize>(t * cols);
    let dst = out + <usize>(t >> 2) * <usize>numChunks * QUAD_CHUNK_BYTES + (<usize>(t & 3) << 4);
    for (let c = 0; c < numChunks; c++) {
      const p = src + (<usize>c << 2);
      if (ASC_FEATURE_SIMD) v128.store(dst, v128.load32_splat(p));
      else for (let k = 0; k < 16; k++) store<i8>(dst + k, load<i8>(p + (k & 3)));
      dst += QUAD_CHUNK_BYTES;
    }
  }
}

/** Bytes of one quad_sums block: a quad of tokens' da and sa32 for 32 columns (see quad_sums). */
export const QUAD_SUMS_BYTES: usize = 32;

/**
 * The 4-token tiles' per-group scales of the whole quads of tokens, side by side: quantize_q8's da and sa32
 * ([numTokens, cols / 32] each) -> out [numTokens / 4, cols / 32, 32 bytes]: da [4 tokens] f32 | sa32 [4] f32. A tile
 * loads one vector for its 4 tokens and spreads lane k to token k (one shuffle) instead of a splat load per token with
 * its own address (JSC: 3-5 instructions each). Stored after the quad's activation vectors (splat_q8 / splat_q8_i16).
 */
export function quad_sums(da: usize, sa32: usize, numTokens: i32, cols: i32, out: usize): void {
  const numBlocks = cols >> 5;
  const numFull = numTokens & ~3;
  for (let t = 0; t < numFull; t++) {
    let dst = out + <usize>(t >> 2) * <usize>numBlocks * QUAD_SUMS_BYTES + (<usize>(t & 3) << 2);
    for (let b = 0; b < numBlocks; b++) {
      const i = <usize>(t * numBlocks + b) << 2;
      store<f32>(dst, load<f32>(da + i));
      store<f32>(dst, load<f32>(sa32 + i), 16);
      dst += QUAD_SUMS_BYTES;
    }
  }
}

/** Bytes of one chunk of splat_q8_i16's layout: a quad of tokens' two 16-byte vectors each. */
export const QUAD_CHUNK_BYTES_I16: usize = 128;

/**
 * Q8_0's 4-token tiles' activations in a prefill: qa [numTokens, cols] i8 -> out [numTokens / 4, cols / 4 chunks,
 * 2 halves, 4 tokens, 16 bytes] for the whole quads of tokens: half h of a chunk holds its quants 2h, 2h + 1 widened to
 * i16 and repeated 4 times (the operand of i32x4.dot_i16x8_s against that half of a widened weight chunk, whose lane r
 * is row r; matmul-quant.ts), so a tile reads them with plain loads at constant offsets.
 */
export function splat_q8_i16(qa: usize, numTokens: i32, cols: i32, out: usize): void {
  const numChunks = cols >> 2;
  const numFull = numTokens & ~3;
  for (let t = 0; t < numFull; t++) {
    const src = qa + <usize>(t * cols);
    let dst = out + <usize>(t >> 2) * <usize>numChunks * QUAD_CHUNK_BYTES_I16 + (<usize>(t & 3) << 4);
    for (let c = 0; c < numChunks; c++) {
      const p = src + (<usize>c << 2);
      if (ASC_FEATURE_SIMD) {
        const v = i16x8.extend_low_i8x16_s(v128.load32_zero(p));
        v128.store(dst, v128.shuffle<i32>(v, v, 0, 0, 0, 0));
        v128.store(dst, v128.shuffle<i32>(v, v, 1, 1, 1, 1), 64);
      } else {
        for (let k = 0; k < 8; k++) {
          store<i16>(dst + (<usize>k << 1), <i16>load<i8>(p + (k & 1)));
          store<i16>(dst + 64 + (<usize>k << 1), <i16>load<i8>(p + 2 + (k & 1)));
        }
      }
      dst += QUAD_CHUNK_BYTES_I16;
    }
  }
}

/**
 * Q8_0's single-token matvec (decode) on a short input: qa [cols] i8 -> out [cols / 4 chunks, 16 bytes] in KIND_I8's
 * chunk order (quants 0-1 of the chunk repeated 4 times, then quants 2-3), then [cols / 32] i32x4: each group's sum of
 * max(-q, 0) in all 4 lanes. matmul-group-tiles.ts i8Tile1One reads them in every row group: 4.5 bytes per column
 * (quantized-activations.ts MAX_READY_ONE_BYTES).
 */
export function splat_q8_signed_one(qa: usize, cols: i32, out: usize): void {
  const numChunks = cols >> 2;
  for (let c = 0; c < numChunks; c++) {
    const p = qa + (<usize>c << 2);
    if (ASC_FEATURE_SIMD) {
      const v = v128.load32_splat(p);
      v128.store(out, v128.shuffle<u8>(v, v, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3));
    } else {
      for (let k = 0; k < 16; k++) store<i8>(out + <usize>k, load<i8>(p + <usize>((k >> 3 << 1) + (k & 1))));
    }
    out += 16;
  }
  const numGroups = cols >> 5;
  for (let g = 0; g < numGroups; g++) {
    let sum = 0;
    for (let j = 0; j < 32; j++) sum += max(-<i32>load<i8>(qa + <usize>j), 0);
    store<i32>(out, sum);
    store<i32>(out, sum, 4);
    store<i32>(out, sum, 8);
    store<i32>(out, sum, 12);
    qa += 32;
    out += 16;
  }
}

/**
 * The single-token matvec (decode) on a short input: qa [cols] i8 -> out [cols / 4 chunks, 16 bytes], chunk c's 4
 * quants repeated 4 times (splat_q8's vectors of one token, packed), read by matmul-group-tiles.ts nibbleTile1One,
 * mxfp4Tile1One and matmul-k-tiles.ts kTile1 in every row group instead of a shuffle per chunk; 4 bytes per column
 * (quantized-activations.ts MAX_READY_ONE_BYTES).
 */
export function splat_q8_one(qa: usize, cols: i32, out: usize): void {
  const numChunks = cols >> 2;
  for (let c = 0; c < numChunks; c++) {
    const p = qa + (<usize>c << 2);
    if (ASC_FEATURE_SIMD) v128.store(out, v128.load32_splat(p));
    else for (let k = 0; k < 16; k++) store<i8>(out + <usize>k, load<i8>(p + <usize>(k & 3)));
    out += 16;
  }
}

/** qa [n] i8 (from quantize_q8) -> out [n] i16: Q8_0's activations for i32x4.dot_i16x8_s (matmul-quant.ts says why). */
export function widen_q8(qa: usize, n: i32, out: usize): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 16 <= n; i += 16) {
      const a = v128.load(qa + <usize>i);
      v128.store(out + (<usize>i << 1), i16x8.extend_low_i8x16_s(a));
      v128.store(out + (<usize>i << 1), i16x8.extend_high_i8x16_s(a), 16);
    }
  }
  for (; i < n; i++) store<i16>(out + (<usize>i << 1), <i16>load<i8>(qa + <usize>i));
}
