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

/** 4 f16 at p -> f32x4, the same bit trick as f16ToF32. */
// @ts-ignore: decorator
@inline export function f16x4ToF32x4(p: usize): v128 {
  const h = v128.load16x4_u(p);
  const em = i32x4.shl(v128.and(h, i32x4.splat(0x7fff)), 13);
  const f = f32x4.mul(em, f32x4.splat(F16_MAGIC));
  return v128.or(f, i32x4.shl(v128.and(h, i32x4.splat(0x8000)), 16));
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
