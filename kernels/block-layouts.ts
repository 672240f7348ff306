// The repacked quantized weight layouts, as every kernel that reads them (matmul-*.ts, dequant.ts) sees them; the
// repacker that writes them at load is src/backend/wasm/repack.ts, whose src/backend/wasm/block-layouts.ts mirrors
// these numbers in one table (a change here is a change there).
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
//   KIND_MXFP4 MXFP4's 4-bit codes as KIND_U4's nibbles, looked up as values plus 12 (mxfp4.ts; always zero point
//              12), and its E8M0 scale per group as the upper half of the f32: ws [numRows / 4, numGroups, 4 rows] u16

import { mxfp4Value } from "./mxfp4";

export const KIND_I8: i32 = 0;
export const KIND_U5: i32 = 1;
export const KIND_U4: i32 = 2;
export const KIND_U6G16: i32 = 3;
export const KIND_U4K: i32 = 4;
export const KIND_U5K: i32 = 5;
export const KIND_MXFP4: i32 = 6;

/** The quant layout of a kind: KIND_U4K / KIND_U5K store their quants as KIND_U4 / KIND_U5 (only the scales differ),
 * KIND_MXFP4 its codes as KIND_U4's nibbles. */
// @ts-ignore: decorator
@inline export function quantKind(kind: i32): i32 {
  return kind == KIND_U4K || kind == KIND_MXFP4 ? KIND_U4 : kind == KIND_U5K ? KIND_U5 : kind;
}

/** Bytes of one group's scales of a row group (4 rows): f32 each, or KIND_MXFP4's upper halves of f32. */
// @ts-ignore: decorator
@inline export function groupScaleBytes(kind: i32): i32 {
  return kind == KIND_MXFP4 ? 8 : 16;
}

/** Bytes of one row group's scales (ws) over numGroups groups. */
// @ts-ignore: decorator
@inline export function scaleStride(kind: i32, numGroups: i32): usize {
  return <usize>(superblockScales(kind) ? (numGroups >> superblockShift(kind)) * superblockBytes(kind) : numGroups * groupScaleBytes(kind));
}

/** Kinds whose scales are ggml's K-quant factors per 256-weight superblock (see the header). */
// @ts-ignore: decorator
@inline export function superblockScales(kind: i32): bool {
  return kind == KIND_U4K || kind == KIND_U5K || kind == KIND_U6G16;
}

/** log2 of the groups per superblock: 16 groups of 16 (Q6_K), 8 of 32 (Q4_K, Q5_K). */
// @ts-ignore: decorator
@inline export function superblockShift(kind: i32): i32 {
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
  if (k == KIND_MXFP4) return mxfp4Value(nibble);
  if (kind == KIND_U4) return nibble;
  return nibble | (((<i32>load<u8>(q + <usize>((half << 4) + lane)) >> (c < 4 ? 4 + c : 7 - c)) & 1) << 4);
}

/** Chunks per packed half of a nibble kind's group: chunk c and chunk c + half share 16 bytes. */
// @ts-ignore: decorator
@inline export function halfChunks(kind: i32): i32 {
  return groupSize(kind) >> 3;
}

// ---- SIMD ----

/** Row r's scale of group g (groupScales' lane r). */
// @ts-ignore: decorator
@inline export function scaleAt(kind: i32, s: usize, g: i32, r: i32): f32 {
  if (kind == KIND_MXFP4) return reinterpret<f32>(<u32>load<u16>(s + <usize>((g * 4 + r) << 1)) << 16);
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
