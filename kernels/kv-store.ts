// Writing K and V into the paged cache and converting its rows (f32 <-> f16, f32 <-> int8 with a scale per token):
// the storing kernels (kv_store_f16, kv_store_q8) and the widening attention.ts reads keys and values through.
// Cache layout per layer and part (K or V):
//   f16: [numBlocks, numKvHeads, blockSize, headDim] f16; slot = block * blockSize + offset.
//   q8:  [numBlocks, (numKvHeads, blockSize, headDim) i8 then (blockSize) f32 scales]: each token's K (or V) row over
//        all KV heads is int8 with one scale, x = q * scale, scale = max|x| / 127 (llama.cpp's q8_0 rule, one block
//        of numKvHeads * headDim values instead of 32; fennec serves it as vLLM's fp8 / fp8_e4m3). Half the bytes
//        per key of f16 plus 4 per token; attention widens the int8 rows in place of the f16 ones.
// Head-major blocks: the keys one task reads (one KV head) lie in runs of blockSize * headDim contiguous halves, which
// the hardware prefetcher streams (key-major rows, headDim of every numKvHeads * headDim, ran at half the speed once
// the cache left L2).
import { f16ToF32, f16x4ToF32x4, f32ToF16, f32x4ToF16x4 } from "./common";

/** Store k, v [numRows, numKvHeads * headDim] f32 into the cache slots (i32 [numRows]) of one layer as f16. */
export function kv_store_f16(
  kLayer: usize, vLayer: usize, k: usize, v: usize, slots: usize, numRows: i32, numKvHeads: i32, headDim: i32, blockSize: i32,
): void {
  const kvDim = numKvHeads * headDim;
  for (let i = 0; i < numRows; i++) {
    const slot = load<i32>(slots + (<usize>i << 2));
    for (let h = 0; h < numKvHeads; h++) {
      const at = cacheOffset(slot / blockSize, slot % blockSize, h, numKvHeads, headDim, blockSize);
      const src = <usize>(i * kvDim + h * headDim) << 2;
      narrowRow(kLayer + at, k + src, headDim);
      narrowRow(vLayer + at, v + src, headDim);
    }
  }
}

/** Bytes of one block of one layer's K or V in the 8-bit cache: the int8 rows, then one f32 scale per token. */
// @ts-ignore: decorator
@inline export function q8BlockBytes(numKvHeads: i32, headDim: i32, blockSize: i32): usize {
  return <usize>(blockSize * numKvHeads * headDim + (blockSize << 2));
}

/**
 * Store k, v [numRows, numKvHeads * headDim] f32 into the cache slots (i32 [numRows]) of one layer as int8 with one
 * f32 scale per token and part: q = nearest(x * 127 / max|x|) (ties to even, as every build rounds).
 */
export function kv_store_q8(
  kLayer: usize, vLayer: usize, k: usize, v: usize, slots: usize, numRows: i32, numKvHeads: i32, headDim: i32, blockSize: i32,
): void {
  const kvDim = numKvHeads * headDim;
  const blockBytes = q8BlockBytes(numKvHeads, headDim, blockSize);
  for (let i = 0; i < numRows; i++) {
    const slot = load<i32>(slots + (<usize>i << 2));
    const block = <usize>(slot / blockSize);
    const offset = slot % blockSize;
    const src = <usize>(i * kvDim) << 2;
    quantizeToken(kLayer + block * blockBytes, k + src, offset, numKvHeads, headDim, blockSize);
    quantizeToken(vLayer + block * blockBytes, v + src, offset, numKvHeads, headDim, blockSize);
  }
}

/** One token's row of kvDim floats into a q8 block: its scale, then each KV head's int8 row. */
export function quantizeToken(base: usize, src: usize, offset: i32, numKvHeads: i32, headDim: i32, blockSize: i32): void {
  const kvDim = numKvHeads * headDim;
  const amax = maxAbs(src, kvDim);
  const scale: f32 = amax / 127;
  const inv: f32 = amax > 0 ? <f32>127 / amax : 0;
  store<f32>(base + <usize>(blockSize * kvDim + (offset << 2)), scale);
  for (let h = 0; h < numKvHeads; h++) {
    quantizeRow(base + <usize>((h * blockSize + offset) * headDim), src + (<usize>(h * headDim) << 2), inv, headDim);
  }
}

/** max |x| over n floats (order-free: the same in every build). */
export function maxAbs(x: usize, n: i32): f32 {
  let m: f32 = 0;
  let d = 0;
  if (ASC_FEATURE_SIMD) {
    let mv = f32x4.splat(0);
    for (; d + 4 <= n; d += 4) mv = f32x4.max(mv, f32x4.abs(v128.load(x + (<usize>d << 2))));
    m = Mathf.max(Mathf.max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)), Mathf.max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)));
  }
  for (; d < n; d++) m = Mathf.max(m, Mathf.abs(load<f32>(x + (<usize>d << 2))));
  return m;
}

/** int8 [n] = clamp(nearest(x * inv), -127, 127), 16 at a time on the SIMD path (same bits). */
export function quantizeRow(dst: usize, src: usize, inv: f32, n: i32): void {
  let d = 0;
  if (ASC_FEATURE_SIMD) {
    const iv = f32x4.splat(inv);
    const lo = i32x4.splat(-127);
    const hi = i32x4.splat(127);
    for (; d + 16 <= n; d += 16) {
      const s = src + (<usize>d << 2);
      const q0 = i32x4.min_s(i32x4.max_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(s), iv))), lo), hi);
      const q1 = i32x4.min_s(i32x4.max_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(s, 16), iv))), lo), hi);
      const q2 = i32x4.min_s(i32x4.max_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(s, 32), iv))), lo), hi);
      const q3 = i32x4.min_s(i32x4.max_s(i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(s, 48), iv))), lo), hi);
      v128.store(dst + <usize>d, i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(q0, q1), i16x8.narrow_i32x4_s(q2, q3)));
    }
  }
  for (; d < n; d++) {
    // clamp as a float first (NaN -> 0, as the SIMD path's saturating conversion gives), then convert exactly
    let f: f32 = nearest<f32>(load<f32>(src + (<usize>d << 2)) * inv);
    if (f != f) f = 0;
    f = Mathf.min(Mathf.max(f, -127), 127);
    store<i8>(dst + <usize>d, <i8><i32>f);
  }
}

/** int8 [n] * scale -> f32 [n] (exact conversion, one rounding in the product: the same bits in every build). */
export function widenRowQ8(dst: usize, src: usize, scale: f32, n: i32): void {
  let d = 0;
  if (ASC_FEATURE_SIMD) {
    const sv = f32x4.splat(scale);
    for (; d + 16 <= n; d += 16) {
      const b = v128.load(src + <usize>d);
      const l = i16x8.extend_low_i8x16_s(b);
      const h = i16x8.extend_high_i8x16_s(b);
      const o = dst + (<usize>d << 2);
      v128.store(o, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(l)), sv));
      v128.store(o, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(l)), sv), 16);
      v128.store(o, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(h)), sv), 32);
      v128.store(o, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(h)), sv), 48);
    }
    for (; d + 4 <= n; d += 4) {
      const b = v128.load32_zero(src + <usize>d);
      v128.store(dst + (<usize>d << 2), f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(b))), sv));
    }
  }
  for (; d < n; d++) store<f32>(dst + (<usize>d << 2), <f32>load<i8>(src + <usize>d) * scale);
}

/** Widens key `pos`'s row for one KV head of one layer's K or V into f32 [headDim] at dst, from either cache type. */
// @ts-ignore: decorator
@inline export function widenKv(q8: bool, dst: usize, part: usize, blockTable: usize, pos: i32, kvHead: i32, numKvHeads: i32, headDim: i32, blockSize: i32): void {
  const block = load<i32>(blockTable + (<usize>(pos / blockSize) << 2));
  const offset = pos % blockSize;
  if (q8) {
    const base = part + <usize>block * q8BlockBytes(numKvHeads, headDim, blockSize);
    const scale = load<f32>(base + <usize>(blockSize * numKvHeads * headDim + (offset << 2)));
    widenRowQ8(dst, base + <usize>((kvHead * blockSize + offset) * headDim), scale, headDim);
  } else {
    widenRow(dst, part + cacheOffset(block, offset, kvHead, numKvHeads, headDim, blockSize), headDim);
  }
}

/** Byte offset of (block, offset in block, KV head)'s row of headDim halves in one layer's K or V. */
// @ts-ignore: decorator
@inline export function cacheOffset(block: i32, offset: i32, kvHead: i32, numKvHeads: i32, headDim: i32, blockSize: i32): usize {
  return (<usize>((block * numKvHeads + kvHead) * blockSize + offset) * <usize>headDim) << 1;
}

/** f32 [n] -> f16 [n], round to nearest even: f32ToF16 on every element, 8 at a time on the SIMD path. */
export function narrowRow(dst: usize, src: usize, n: i32): void {
  let d = 0;
  if (ASC_FEATURE_SIMD) {
    for (; d + 8 <= n; d += 8) {
      const s = src + (<usize>d << 2);
      v128.store(dst + (<usize>d << 1), i16x8.narrow_i32x4_u(f32x4ToF16x4(v128.load(s)), f32x4ToF16x4(v128.load(s, 16))));
    }
  }
  for (; d < n; d++) store<u16>(dst + (<usize>d << 1), <u16>f32ToF16(load<f32>(src + (<usize>d << 2))));
}

/** f16 [n] -> f32 [n] (n a multiple of 4 on the SIMD path; same bits either way). */
export function widenRow(dst: usize, src: usize, n: i32): void {
  let d = 0;
  if (ASC_FEATURE_SIMD) {
    for (; d + 4 <= n; d += 4) v128.store(dst + (<usize>d << 2), f16x4ToF32x4(src + (<usize>d << 1)));
  }
  for (; d < n; d++) store<f32>(dst + (<usize>d << 2), f16ToF32(load<u16>(src + (<usize>d << 1))));
}
