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

/** The byte at bits 16-23 of e8m0Half's f32 for e = 0, 1, and (from 2) for e even and odd: 0x20 and 0x40 (the
 * denormals), then bit 23 of (e - 1) << 23. */
const E8M0_BYTE2: usize = memory.data<u8>([0x20, 0x40, 0x80, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 16);

/**
 * e8m0Half4 of a row group's numGroups groups of scales at s into out [numGroups, 4 rows] f32, the same bits: a
 * single token's matvec converts them here, apart from its group loop, 16 at a time by byte operations: byte 3 of the
 * f32 is (e - 1) >> 1 from e = 2 (0 below: a saturating subtract and a rounding average), byte 2 a table lookup by
 * min(e, 2 + (e & 1)), bytes 0-1 zero (interleaves). In the group loop the conversion took a third of the time.
 */
export function e8m0HalfRow(s: usize, numGroups: i32, out: usize): void {
  const zero = i8x16.splat(0);
  const table = v128.load(E8M0_BYTE2);
  let g = 0;
  for (; g + 4 <= numGroups; g += 4) {
    const e = v128.load(s + (<usize>g << 2));
    const b3 = i8x16.avgr_u(i8x16.sub_sat_u(e, i8x16.splat(2)), zero);
    const b2 = i8x16.swizzle(table, i8x16.min_u(e, i8x16.add(v128.and(e, i8x16.splat(1)), i8x16.splat(2))));
    const lo = v128.shuffle<u8>(b2, b3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const hi = v128.shuffle<u8>(b2, b3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const o = out + (<usize>g << 4);
    v128.store(o, v128.shuffle<u16>(zero, lo, 0, 8, 1, 9, 2, 10, 3, 11));
    v128.store(o, v128.shuffle<u16>(zero, lo, 4, 12, 5, 13, 6, 14, 7, 15), 16);
    v128.store(o, v128.shuffle<u16>(zero, hi, 0, 8, 1, 9, 2, 10, 3, 11), 32);
    v128.store(o, v128.shuffle<u16>(zero, hi, 4, 12, 5, 13, 6, 14, 7, 15), 48);
  }
  for (; g < numGroups; g++) v128.store(out + (<usize>g << 4), e8m0Half4(s + (<usize>g << 2)));
}
