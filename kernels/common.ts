// Shared leaf helpers for the kernels. Every helper has a scalar twin that produces bit-identical results, so the
// scalar, SIMD and relaxed-SIMD builds agree exactly (tests compare them).

/** 2^112 as f32: rescales a half's exponent/mantissa bits shifted into f32 position (handles subnormals too). */
export const F16_MAGIC: f32 = reinterpret<f32>(0x77800000);

/** f16 bits -> f32 (inf/nan come out as huge finite values: the KV cache never holds them). */
// @ts-ignore: decorator
@inline export function f16ToF32(h: u32): f32 {
  const em = reinterpret<f32>((h & 0x7fff) << 13) * F16_MAGIC;
  return reinterpret<f32>(reinterpret<u32>(em) | ((h & 0x8000) << 16));
}

/** f32 -> f16 bits, round to nearest even (the scalar store path of the KV cache). */
export function f32ToF16(f: f32): u32 {
  const x = reinterpret<u32>(f);
  const sign = (x >> 16) & 0x8000;
  const e: i32 = <i32>((x >> 23) & 0xff) - 127 + 15;
  let m = x & 0x7fffff;
  if ((x & 0x7fffffff) >= 0x7f800000) return sign | 0x7c00 | (m != 0 ? 0x200 : 0);
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    m |= 0x800000;
    const shift = <u32>(14 - e);
    let r = m >> shift;
    const rem = m & ((<u32>1 << shift) - 1);
    const half = <u32>1 << (shift - 1);
    if (rem > half || (rem == half && (r & 1) != 0)) r++;
    return sign | r;
  }
  let r = (<u32>e << 10) | (m >> 13);
  const rem = m & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1) != 0)) r++;
  return sign | r;
}

/**
 * f32x4 -> 4 f16 bits in the low halves of i32 lanes, the same results as f32ToF16 (round to nearest even, subnormals,
 * inf, nan -> 0x7e00), branch-free: normals round by adding 0xfff plus the lowest kept bit; below 2^-14 adding 0.5 as a
 * float rounds to the f16 subnormal grid (2^-24), which the integer subtraction of 0.5's bits reads off.
 */
// @ts-ignore: decorator
@inline export function f32x4ToF16x4(x: v128): v128 {
  const sign = v128.and(x, i32x4.splat(0x80000000));
  const a = v128.xor(x, sign);
  const odd = v128.and(i32x4.shr_u(a, 13), i32x4.splat(1));
  const normal = i32x4.shr_u(i32x4.add(i32x4.add(a, i32x4.splat(((15 - 127) << 23) + 0xfff)), odd), 13);
  const half = i32x4.splat(126 << 23); // 0.5
  const subnormal = i32x4.sub(f32x4.add(a, half), half);
  const special = v128.bitselect(i32x4.splat(0x7e00), i32x4.splat(0x7c00), i32x4.gt_s(a, i32x4.splat(0x7f800000)));
  let h = v128.bitselect(subnormal, normal, i32x4.lt_s(a, i32x4.splat(113 << 23)));
  h = v128.bitselect(special, h, i32x4.ge_s(a, i32x4.splat(143 << 23)));
  return v128.or(h, i32x4.shr_u(sign, 16));
}

/**
 * 4 f16 at p -> f32x4, f16ToF32's bits in 4 ops: sign-extended and shifted by 13, a half's sign lands on bits 28-31
 * and its exponent and mantissa below; keeping bit 31 with them makes the multiply by 2^112 carry the sign
 * ((-x) * 2^112 = -(x * 2^112), exactly).
 */
// @ts-ignore: decorator
@inline export function f16x4ToF32x4(p: usize): v128 {
  const bits = v128.and(i32x4.shl(v128.load16x4_s(p), 13), i32x4.splat(0x8fffe000));
  return f32x4.mul(bits, f32x4.splat(F16_MAGIC));
}

/** [sum(v0), sum(v1), sum(v2), sum(v3)] of i32x4 vectors; each sum is (l0 + l2) + (l1 + l3). */
// @ts-ignore: decorator
@inline export function reduce4i(v0: v128, v1: v128, v2: v128, v3: v128): v128 {
  const a = i32x4.add(v128.shuffle<i32>(v0, v1, 0, 1, 4, 5), v128.shuffle<i32>(v0, v1, 2, 3, 6, 7));
  const b = i32x4.add(v128.shuffle<i32>(v2, v3, 0, 1, 4, 5), v128.shuffle<i32>(v2, v3, 2, 3, 6, 7));
  return i32x4.add(v128.shuffle<i32>(a, b, 0, 2, 4, 6), v128.shuffle<i32>(a, b, 1, 3, 5, 7));
}

/** The f32 twin of reduce4i: lane i = (vi.l0 + vi.l2) + (vi.l1 + vi.l3). */
// @ts-ignore: decorator
@inline export function reduce4f(v0: v128, v1: v128, v2: v128, v3: v128): v128 {
  const a = f32x4.add(v128.shuffle<f32>(v0, v1, 0, 1, 4, 5), v128.shuffle<f32>(v0, v1, 2, 3, 6, 7));
  const b = f32x4.add(v128.shuffle<f32>(v2, v3, 0, 1, 4, 5), v128.shuffle<f32>(v2, v3, 2, 3, 6, 7));
  return f32x4.add(v128.shuffle<f32>(a, b, 0, 2, 4, 6), v128.shuffle<f32>(a, b, 1, 3, 5, 7));
}

/** Horizontal sum of one f32x4 in the same order as reduce4f. */
// @ts-ignore: decorator
@inline export function hsumf(v: v128): f32 {
  return (f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 2)) + (f32x4.extract_lane(v, 1) + f32x4.extract_lane(v, 3));
}

// exp for softmax and silu: Cephes' expf (range reduction by ln 2 in two parts, a degree-5 polynomial, 2^n through
// the exponent bits), about 2 ulp. Only IEEE-exact ops, in one fixed order, so expF32x4 and expF32 agree bit for bit;
// inputs are clamped to [-87, 88] (exp(-87) ~ 1.6e-38 stands in for anything smaller).
const EXP_MIN: f32 = -87.0;
const EXP_MAX: f32 = 88.0;
const EXP_LOG2E: f32 = 1.44269504088896341;
const EXP_LN2_HI: f32 = 0.693359375;
const EXP_LN2_LO: f32 = -2.12194440e-4;
const EXP_P0: f32 = 1.9875691500e-4;
const EXP_P1: f32 = 1.3981999507e-3;
const EXP_P2: f32 = 8.3334519073e-3;
const EXP_P3: f32 = 4.1665795894e-2;
const EXP_P4: f32 = 1.6666665459e-1;
const EXP_P5: f32 = 5.0000001201e-1;

/** e^x for one f32 (the scalar twin of expF32x4). */
// @ts-ignore: decorator
@inline export function expF32(x: f32): f32 {
  x = Mathf.min(Mathf.max(x, EXP_MIN), EXP_MAX);
  const n = nearest<f32>(x * EXP_LOG2E);
  const r = (x - n * EXP_LN2_HI) - n * EXP_LN2_LO;
  let y = EXP_P0 * r + EXP_P1;
  y = y * r + EXP_P2;
  y = y * r + EXP_P3;
  y = y * r + EXP_P4;
  y = y * r + EXP_P5;
  y = (y * (r * r) + r) + 1;
  return y * reinterpret<f32>((<i32>n + 127) << 23);
}

/** 1.5 * 2^23: v + this rounds v to an integer (ties to even, as nearest) for |v| < 2^22, held in the low mantissa bits. */
const EXP_ROUND: f32 = 12582912.0;

/**
 * e^x for x <= 88 (a softmax's x - max; expF32x4 after its upper clamp), the same bits as expF32 there, in fewer
 * instructions: no upper clamp, the lower one as pmax (one maxps; f32x4.max is ~6 in JSC), n = nearest(x log2 e) by
 * the 1.5 * 2^23 rounding add, and 2^n from that sum's low bits (the exponent field shifts out) instead of a saturating
 * conversion.
 */
// @ts-ignore: decorator
@inline export function expNonPositiveF32x4(x: v128): v128 {
  x = f32x4.pmax(x, f32x4.splat(EXP_MIN));
  const t = f32x4.add(f32x4.mul(x, f32x4.splat(EXP_LOG2E)), f32x4.splat(EXP_ROUND));
  const n = f32x4.sub(t, f32x4.splat(EXP_ROUND));
  const r = f32x4.sub(f32x4.sub(x, f32x4.mul(n, f32x4.splat(EXP_LN2_HI))), f32x4.mul(n, f32x4.splat(EXP_LN2_LO)));
  let y = f32x4.add(f32x4.mul(f32x4.splat(EXP_P0), r), f32x4.splat(EXP_P1));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(EXP_P2));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(EXP_P3));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(EXP_P4));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(EXP_P5));
  y = f32x4.add(f32x4.add(f32x4.mul(y, f32x4.mul(r, r)), r), f32x4.splat(1));
  return f32x4.mul(y, i32x4.shl(i32x4.add(t, i32x4.splat(127)), 23));
}

/** The scalar twin of expNonPositiveF32x4 (pmax(x, m) is x < m ? m : x). */
// @ts-ignore: decorator
@inline export function expNonPositiveF32(x: f32): f32 {
  x = x < EXP_MIN ? EXP_MIN : x;
  const t = x * EXP_LOG2E + EXP_ROUND;
  const n = t - EXP_ROUND;
  const r = (x - n * EXP_LN2_HI) - n * EXP_LN2_LO;
  let y = EXP_P0 * r + EXP_P1;
  y = y * r + EXP_P2;
  y = y * r + EXP_P3;
  y = y * r + EXP_P4;
  y = y * r + EXP_P5;
  y = (y * (r * r) + r) + 1;
  return y * reinterpret<f32>((reinterpret<i32>(t) + 127) << 23);
}

/**
 * e^x lane by lane, the same bits as expF32: the clamps as pmax / pmin (maxps, minps; f32x4.max and .min are ~6
 * instructions each in JSC for NaN and -0 rules the bounds never meet), then expNonPositiveF32x4's rounding add and
 * exponent bits, which hold up to the upper clamp (n <= 127; the i32 trunc_sat of nearest(n) is 8 instructions in JSC).
 */
// @ts-ignore: decorator
@inline export function expF32x4(x: v128): v128 {
  return expNonPositiveF32x4(f32x4.pmin(x, f32x4.splat(EXP_MAX)));
}
