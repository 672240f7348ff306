// MXFP4 (GGUF type 39) in the kernels' layout, KIND_MXFP4 (block-layouts.ts): the 4-bit E2M1 codes stay packed as
// nibbles (KIND_U4's K-quad layout, 16 bytes per group and row) and one E8M0 byte per group and row (ws [rowGroups,
// numGroups, 4 rows] u8): 4.25 bits per weight, as ggml's block_mxfp4 holds them.
//
// A code becomes its value by a byte table lookup (i8x16.swizzle, pshufb), as ggml_vec_dot_mxfp4_q8_0 (ggml-cpu
// arch/x86/quants.c) looks up kvalues_mxfp4. Its values (E2M1 doubled, -12..12) are stored here plus 12, so they are
// unsigned 0..24 and take the i7 side of the relaxed dot product; the 12 comes back off as an integer zero point on
// the exact sums (matmul-quant.ts's header), so sum(qa * (u - 12)) = sum(qa * kvalues_mxfp4[code]) exactly. The
// zero point's i16 sums stay within 8 chunks * 2 * 127 * 12 = 24384 over a whole group.

/** The zero point of KIND_MXFP4's values. */
export const MXFP4_ZERO_POINT: i32 = 12;

/** kvalues_mxfp4 (ggml-common.h) + 12, by the 4-bit code (bit 3 the sign). */
export const MXFP4_VALUES: usize = memory.data<u8>([12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0], 16);

/** The value (plus the zero point) of a 4-bit code. */
// @ts-ignore: decorator
@inline export function mxfp4Value(code: i32): i32 {
  return <i32>load<u8>(MXFP4_VALUES + <usize>code);
}

/** 16 codes (each byte 0..15) to their values plus 12: a byte shuffle of the table (indices in range, so the relaxed
 * swizzle, one pshufb, gives the same bytes as the exact one). */
// @ts-ignore: decorator
@inline export function mxfp4Lookup(codes: v128): v128 {
  const table = v128.load(MXFP4_VALUES);
  if (ASC_FEATURE_RELAXED_SIMD) return i8x16.relaxed_swizzle(table, codes);
  return i8x16.swizzle(table, codes);
}

/**
 * ggml_e8m0_to_fp32_half (ggml-impl.h): 2^(e - 128) as f32 bits, (e - 1) << 23 from e = 2, and the denormals 2^-128
 * and 2^-127 (0x00200000 << e) for e = 0 and 1. Exact for every byte (e = 255 gives 2^127, as ggml's).
 */
// @ts-ignore: decorator
@inline export function e8m0Half(e: i32): f32 {
  return reinterpret<f32>(e < 2 ? 0x00200000 << e : (e - 1) << 23);
}

/** e8m0Half of the 4 bytes at p (the 4 rows' scales of a group), as f32x4: the same bits lane by lane. The shifts are
 * multiplies (e <= 255: no overflow), one pmulld each where JSC emits a constant shift as 4 instructions. */
// @ts-ignore: decorator
@inline export function e8m0Half4(p: usize): v128 {
  const e = i32x4.extend_low_i16x8_u(i16x8.extend_low_i8x16_u(v128.load32_zero(p)));
  const normal = i32x4.sub(i32x4.mul(e, i32x4.splat(1 << 23)), i32x4.splat(1 << 23)); // (e - 1) << 23
  const denormal = i32x4.add(i32x4.mul(e, i32x4.splat(1 << 21)), i32x4.splat(1 << 21)); // 0x00200000 << e for e < 2: (e + 1) << 21
  return v128.bitselect(denormal, normal, i32x4.lt_s(e, i32x4.splat(2)));
}
