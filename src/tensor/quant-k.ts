/**
 * ggml's 256-weight "K" super-block types (ggml-common.h, ggml-quants.c): Q4_K, Q5_K, Q6_K.
 * Dequantizers are line-for-line ports of `dequantize_row_q{4,5,6}_K`. Quantizers follow `quantize_row_*_ref`'s
 * structure and final rounding pass, but pick each sub-block's scale and min by plain min/max instead of ggml's
 * iterative search (valid blocks, somewhat larger error, ~20x faster: used for random test models).
 *   q4_K [d f16][dmin f16][scales 12][qs 128]                 w = d*sc_j*q4 - dmin*m_j   (8 sub-blocks of 32)
 *   q5_K [d f16][dmin f16][scales 12][qh 32][qs 128]          w = d*sc_j*q5 - dmin*m_j
 *   q6_K [ql 128][qh 64][scales i8 16][d f16]                 w = d*sc_j*(q6 - 32)       (16 sub-blocks of 16)
 */
import { viewOf } from "./half.ts";
import { nearestInt } from "./rounding.ts";

const QK_K = 256;

/** ggml `get_scale_min_k4`: the 6-bit scale and min of sub-block j from the 12 packed bytes at `at`. */
function scaleMinK4(j: number, bytes: Uint8Array, at: number): [number, number] {
  if (j < 4) return [bytes[at + j]! & 63, bytes[at + j + 4]! & 63];
  const sc = (bytes[at + j + 4]! & 0xf) | ((bytes[at + j - 4]! >> 6) << 4);
  const m = (bytes[at + j + 4]! >> 4) | ((bytes[at + j]! >> 6) << 4);
  return [sc, m];
}

/** Per-call work space of the Q4_K/Q5_K quantizers (allocated once per quantize call, not per block). */
interface ScratchK4 {
  readonly view: DataView;
  readonly scales: Float32Array; // [8] per sub-block
  readonly mins: Float32Array; // [8] per sub-block, stored negated as in ggml (w = scale*q - min)
  readonly levels: Uint8Array; // [256] quantized values 0..nmax
}
const newScratchK4 = (dst: Uint8Array): ScratchK4 => ({
  view: viewOf(dst), scales: new Float32Array(8), mins: new Float32Array(8), levels: new Uint8Array(QK_K),
});

/**
 * Chooses the 8 sub-block (scale, min) pairs of one super-block for `nmax` levels, packs them into 12 bytes at
 * `dst[b + 4]`, writes d and dmin at `dst[b]`, and returns the quantized levels (256) rounded against the packed values.
 */
function quantizeScalesK4(src: Float32Array, o: number, nmax: number, dst: Uint8Array, b: number, scratch: ScratchK4): Uint8Array {
  const view = scratch.view;
  const { scales, mins, levels } = scratch;
  levels.fill(0);
  for (let j = 0; j < 8; j++) {
    let min = src[o + 32 * j]!;
    let max = min;
    for (let l = 1; l < 32; l++) {
      const v = src[o + 32 * j + l]!;
      if (v < min) min = v;
      if (v > max) max = v;
    }
    if (min > 0) min = 0;
    scales[j] = max === min ? 0 : (max - min) / nmax;
    mins[j] = -min;
  }
  let maxScale = 0;
  let maxMin = 0;
  for (let j = 0; j < 8; j++) {
    maxScale = Math.max(maxScale, scales[j]!);
    maxMin = Math.max(maxMin, mins[j]!);
  }
  const invScale = maxScale > 0 ? 63 / maxScale : 0;
  const invMin = maxMin > 0 ? 63 / maxMin : 0;
  dst.fill(0, b + 4, b + 16);
  for (let j = 0; j < 8; j++) {
    const ls = Math.min(63, nearestInt(invScale * scales[j]!));
    const lm = Math.min(63, nearestInt(invMin * mins[j]!));
    if (j < 4) {
      dst[b + 4 + j] = ls;
      dst[b + 4 + j + 4] = lm;
    } else {
      dst[b + 4 + j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
      dst[b + 4 + j - 4]! |= (ls >> 4) << 6;
      dst[b + 4 + j]! |= (lm >> 4) << 6;
    }
  }
  view.setFloat16(b, maxScale / 63, true);
  view.setFloat16(b + 2, maxMin / 63, true);
  const d = view.getFloat16(b, true);
  const dmin = view.getFloat16(b + 2, true);
  for (let j = 0; j < 8; j++) {
    const [sc, m] = scaleMinK4(j, dst, b + 4);
    const dj = d * sc;
    if (!dj) continue;
    const dm = dmin * m;
    for (let l = 0; l < 32; l++) {
      levels[32 * j + l] = Math.max(0, Math.min(nmax, nearestInt((src[o + 32 * j + l]! + dm) / dj)));
    }
  }
  return levels;
}

// ---- Q4_K (144 bytes) ----

export function dequantizeQ4_K(src: Uint8Array, dst: Float32Array, n: number): void {
  const view = viewOf(src);
  for (let b = 0, o = 0; o < n; b += 144, o += QK_K) {
    const d = view.getFloat16(b, true);
    const min = view.getFloat16(b + 2, true);
    let q = b + 16;
    let y = o;
    for (let is = 0; is < 8; is += 2) {
      const [sc1, m1] = scaleMinK4(is, src, b + 4);
      const [sc2, m2] = scaleMinK4(is + 1, src, b + 4);
      const d1 = d * sc1, dm1 = min * m1;
      const d2 = d * sc2, dm2 = min * m2;
      for (let l = 0; l < 32; l++) dst[y++] = d1 * (src[q + l]! & 0xf) - dm1;
      for (let l = 0; l < 32; l++) dst[y++] = d2 * (src[q + l]! >> 4) - dm2;
      q += 32;
    }
  }
}

export function quantizeQ4_K(src: Float32Array, dst: Uint8Array, n: number): void {
  const scratch = newScratchK4(dst);
  for (let b = 0, o = 0; o < n; b += 144, o += QK_K) {
    const levels = quantizeScalesK4(src, o, 15, dst, b, scratch);
    let q = b + 16;
    for (let j = 0; j < QK_K; j += 64) {
      for (let l = 0; l < 32; l++) dst[q + l] = levels[j + l]! | (levels[j + l + 32]! << 4);
      q += 32;
    }
  }
}

// ---- Q5_K (176 bytes) ----

export function dequantizeQ5_K(src: Uint8Array, dst: Float32Array, n: number): void {
  const view = viewOf(src);
  for (let b = 0, o = 0; o < n; b += 176, o += QK_K) {
    const d = view.getFloat16(b, true);
    const min = view.getFloat16(b + 2, true);
    const qh = b + 16;
    let ql = b + 48;
    let y = o;
    let u1 = 1, u2 = 2;
    for (let is = 0; is < 8; is += 2) {
      const [sc1, m1] = scaleMinK4(is, src, b + 4);
      const [sc2, m2] = scaleMinK4(is + 1, src, b + 4);
      const d1 = d * sc1, dm1 = min * m1;
      const d2 = d * sc2, dm2 = min * m2;
      for (let l = 0; l < 32; l++) dst[y++] = d1 * ((src[ql + l]! & 0xf) + (src[qh + l]! & u1 ? 16 : 0)) - dm1;
      for (let l = 0; l < 32; l++) dst[y++] = d2 * ((src[ql + l]! >> 4) + (src[qh + l]! & u2 ? 16 : 0)) - dm2;
      ql += 32;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}

export function quantizeQ5_K(src: Float32Array, dst: Uint8Array, n: number): void {
  const scratch = newScratchK4(dst);
  for (let b = 0, o = 0; o < n; b += 176, o += QK_K) {
    const levels = quantizeScalesK4(src, o, 31, dst, b, scratch);
    const qh = b + 16;
    let ql = b + 48;
    dst.fill(0, qh, qh + 32);
    let m1 = 1, m2 = 2;
    for (let j = 0; j < QK_K; j += 64) {
      for (let l = 0; l < 32; l++) {
        let l1 = levels[j + l]!;
        let l2 = levels[j + l + 32]!;
        if (l1 > 15) { l1 -= 16; dst[qh + l]! |= m1; }
        if (l2 > 15) { l2 -= 16; dst[qh + l]! |= m2; }
        dst[ql + l] = l1 | (l2 << 4);
      }
      m1 <<= 2;
      m2 <<= 2;
      ql += 32;
    }
  }
}

// ---- Q6_K (210 bytes) ----

export function dequantizeQ6_K(src: Uint8Array, dst: Float32Array, n: number): void {
  const view = viewOf(src);
  for (let b = 0, o = 0; o < n; b += 210, o += QK_K) {
    const d = view.getFloat16(b + 208, true);
    let ql = b, qh = b + 128, sc = b + 192, y = o;
    for (let half = 0; half < 2; half++) {
      for (let l = 0; l < 32; l++) {
        const is = l >> 4;
        const h = src[qh + l]!;
        const q1 = ((src[ql + l]! & 0xf) | (((h >> 0) & 3) << 4)) - 32;
        const q2 = ((src[ql + l + 32]! & 0xf) | (((h >> 2) & 3) << 4)) - 32;
        const q3 = ((src[ql + l]! >> 4) | (((h >> 4) & 3) << 4)) - 32;
        const q4 = ((src[ql + l + 32]! >> 4) | (((h >> 6) & 3) << 4)) - 32;
        dst[y + l] = Math.fround(d * view.getInt8(sc + is)) * q1;
        dst[y + l + 32] = Math.fround(d * view.getInt8(sc + is + 2)) * q2;
        dst[y + l + 64] = Math.fround(d * view.getInt8(sc + is + 4)) * q3;
        dst[y + l + 96] = Math.fround(d * view.getInt8(sc + is + 6)) * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

export function quantizeQ6_K(src: Float32Array, dst: Uint8Array, n: number): void {
  const view = viewOf(dst);
  const scales = new Float32Array(16); // [sub-block of 16]
  const levels = new Uint8Array(QK_K); // [256] values 0..63
  for (let b = 0, o = 0; o < n; b += 210, o += QK_K) {
    // per sub-block: ggml make_qx_quants(16, 32, x, L, rmse_type 0): scale = max / -32 for the signed abs-max
    let maxScale = 0;
    let maxAbsScale = 0;
    for (let ib = 0; ib < 16; ib++) {
      let amax = 0, max = 0;
      for (let l = 0; l < 16; l++) {
        const v = src[o + 16 * ib + l]!;
        if (Math.abs(v) > amax) { amax = Math.abs(v); max = v; }
      }
      const scale = amax < 1e-15 ? 0 : max / -32;
      scales[ib] = scale;
      if (Math.abs(scale) > maxAbsScale) { maxAbsScale = Math.abs(scale); maxScale = scale; }
    }
    dst.fill(0, b, b + 210);
    if (maxAbsScale < 1e-15) continue; // all zero: an all-zero block (d = 0)
    const iscale = -128 / maxScale;
    view.setFloat16(b + 208, 1 / iscale, true);
    const d = view.getFloat16(b + 208, true);
    levels.fill(32);
    for (let j = 0; j < 16; j++) {
      const sc = Math.min(127, nearestInt(iscale * scales[j]!));
      dst[b + 192 + j] = sc & 0xff; // int8 two's complement
      const dj = d * sc;
      if (!dj) continue;
      for (let l = 0; l < 16; l++) {
        levels[16 * j + l] = Math.max(-32, Math.min(31, nearestInt(src[o + 16 * j + l]! / dj))) + 32;
      }
    }
    let ql = b, qh = b + 128;
    for (let j = 0; j < QK_K; j += 128) {
      for (let l = 0; l < 32; l++) {
        const L1 = levels[j + l]!, L2 = levels[j + l + 32]!, L3 = levels[j + l + 64]!, L4 = levels[j + l + 96]!;
        dst[ql + l] = (L1 & 0xf) | ((L3 & 0xf) << 4);
        dst[ql + l + 32] = (L2 & 0xf) | ((L4 & 0xf) << 4);
        dst[qh + l] = (L1 >> 4) | ((L2 >> 4) << 2) | ((L3 >> 4) << 4) | ((L4 >> 4) << 6);
      }
      ql += 64;
      qh += 32;
    }
  }
}
