// MXFP4 (GGUF type 39) in the kernels' layout, KIND_MXFP4 (block-layouts.ts): the 4-bit E2M1 codes stay packed as
// nibbles (KIND_U4's K-quad layout, 16 bytes per group and row) and each group's scale as the upper half of its f32
// (ws [rowGroups, numGroups, 4 rows] u16): 4.5 bits per weight, where ggml's block_mxfp4 holds 4.25 (an E8M0 byte).
// The 6% more bytes buy a decode matvec 8-9%: converting E8M0 bytes to f32 took a tenth of its time, widening the
// halves takes one shuffle, and at 2 threads it is bound by its instructions, not by memory (docs/performance.md).
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

/** The 4 rows' scales of a group at p (ws' u16 upper halves, repack.ts: ggml_e8m0_to_fp32_half's 2^(e - 128) for
 * every E8M0 byte, denormals and 2^127 too) as f32x4: each half under a zero half, one shuffle. */
// @ts-ignore: decorator
@inline export function mxfp4Scales4(p: usize): v128 {
  return v128.shuffle<u16>(i32x4.splat(0), v128.load64_zero(p), 0, 8, 1, 9, 2, 10, 3, 11);
}

/** Byte indices spreading 4 u16 halves (bytes 0-7 of a vector, or 8-15) under zero halves (0x80: a zero byte, in the
 * relaxed swizzle too). */
const SCALES_LOW: usize = memory.data<u8>([0x80, 0x80, 0, 1, 0x80, 0x80, 2, 3, 0x80, 0x80, 4, 5, 0x80, 0x80, 6, 7], 16);
const SCALES_HIGH: usize = memory.data<u8>([0x80, 0x80, 8, 9, 0x80, 0x80, 10, 11, 0x80, 0x80, 12, 13, 0x80, 0x80, 14, 15], 16);

/** mxfp4Scales4 of the group (k 0) or the next (k 1) from both groups' 16 bytes: one byte shuffle (JSC emits the
 * two-vector shuffle as seven instructions). */
// @ts-ignore: decorator
@inline export function mxfp4Scales8(halves: v128, k: i32): v128 {
  const indices = v128.load(k == 0 ? SCALES_LOW : SCALES_HIGH);
  if (ASC_FEATURE_RELAXED_SIMD) return i8x16.relaxed_swizzle(halves, indices);
  return i8x16.swizzle(halves, indices);
}
