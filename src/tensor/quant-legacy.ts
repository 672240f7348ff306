/**
 * ggml's 32-weight block types (ggml-common.h, ggml-quants.c): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
 * Dequantizers are line-for-line ports of `dequantize_row_*`; quantizers port `quantize_row_*_ref` (round to nearest,
 * no importance matrix). All fields little-endian, packed:
 *   q4_0 [d f16][qs 16]            w = d * (nibble - 8)
 *   q4_1 [d f16][m f16][qs 16]     w = d * nibble + m
 *   q5_0 [d f16][qh u32][qs 16]    w = d * (q5 - 16)
 *   q5_1 [d f16][m f16][qh u32][qs 16]   w = d * q5 + m
 *   q8_0 [d f16][qs i8 x 32]       w = d * q
 * Nibble layout: byte j holds weight j (low nibble) and weight j + 16 (high nibble); qh bit j is weight j's 5th bit.
 */
import { viewOf } from "./half.ts";
import { roundAway } from "./rounding.ts";

const QK = 32;

/** The (signed) value of largest magnitude, first one on ties: ggml's `max` for the symmetric types. */
function signedAbsMax(src: Float32Array, start: number): number {
  let amax = 0;
  let max = 0;
  for (let j = 0; j < QK; j++) {
    const v = src[start + j]!;
    if (amax < Math.abs(v)) {
      amax = Math.abs(v);
      max = v;
    }
  }
  return max;
}

function minMax(src: Float32Array, start: number): [number, number] {
  let min = Infinity;
  let max = -Infinity;
  for (let j = 0; j < QK; j++) {
    const v = src[start + j]!;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return [min, max];
}

// ---- Q4_0 (18 bytes) ----

export function dequantizeQ4_0(src: Uint8Array, dst: Float32Array, n: number): void {
  const view = viewOf(src);
  for (let b = 0, o = 0; o < n; b += 18, o += QK) {
    const d = view.getFloat16(b, true);
    for (let j = 0; j < 16; j++) {
      const q = src[b + 2 + j]!;
      dst[o + j] = ((q & 15) - 8) * d;
      dst[o + j + 16] = ((q >> 4) - 8) * d;
    }
  }
}

export function quantizeQ4_0(src: Float32Array, dst: Uint8Array, n: number): void {
  const view = viewOf(dst);
  for (let b = 0, o = 0; o < n; b += 18, o += QK) {
    const d = Math.fround(signedAbsMax(src, o) / -8);
    const id = d ? 1 / d : 0;
    view.setFloat16(b, d, true);
    for (let j = 0; j < 16; j++) {
      const lo = Math.min(15, Math.trunc(src[o + j]! * id + 8.5));
      const hi = Math.min(15, Math.trunc(src[o + j + 16]! * id + 8.5));
      dst[b + 2 + j] = lo | (hi << 4);
    }
  }
}

// ---- Q4_1 (20 bytes) ----

export function dequantizeQ4_1(src: Uint8Array, dst: Float32Array, n: number): void {
  const view = viewOf(src);
  for (let b = 0, o = 0; o < n; b += 20, o += QK) {
    const d = view.getFloat16(b, true);
    const m = view.getFloat16(b + 2, true);
    for (let j = 0; j < 16; j++) {
      const q = src[b + 4 + j]!;
      dst[o + j] = (q & 15) * d + m;
      dst[o + j + 16] = (q >> 4) * d + m;
    }
  }
}

export function quantizeQ4_1(src: Float32Array, dst: Uint8Array, n: number): void {
  const view = viewOf(dst);
  for (let b = 0, o = 0; o < n; b += 20, o += QK) {
    const [min, max] = minMax(src, o);
    const d = Math.fround((max - min) / 15);
    const id = d ? 1 / d : 0;
    view.setFloat16(b, d, true);
    view.setFloat16(b + 2, min, true);
    for (let j = 0; j < 16; j++) {
      const lo = Math.min(15, Math.trunc((src[o + j]! - min) * id + 0.5));
      const hi = Math.min(15, Math.trunc((src[o + j + 16]! - min) * id + 0.5));
      dst[b + 4 + j] = lo | (hi << 4);
    }
  }
}

// ---- Q5_0 (22 bytes) ----

export function dequantizeQ5_0(src: Uint8Array, dst: Float32Array, n: number): void {
  const view = viewOf(src);
  for (let b = 0, o = 0; o < n; b += 22, o += QK) {
    const d = view.getFloat16(b, true);
    const qh = view.getUint32(b + 2, true);
    for (let j = 0; j < 16; j++) {
      const q = src[b + 6 + j]!;
      const h0 = ((qh >>> j) << 4) & 0x10;
      const h1 = (qh >>> (j + 12)) & 0x10;
      dst[o + j] = (((q & 15) | h0) - 16) * d;
      dst[o + j + 16] = (((q >> 4) | h1) - 16) * d;
    }
  }
}

export function quantizeQ5_0(src: Float32Array, dst: Uint8Array, n: number): void {
  const view = viewOf(dst);
  for (let b = 0, o = 0; o < n; b += 22, o += QK) {
    const d = Math.fround(signedAbsMax(src, o) / -16);
    const id = d ? 1 / d : 0;
    view.setFloat16(b, d, true);
    let qh = 0;
    for (let j = 0; j < 16; j++) {
      const lo = Math.min(31, Math.trunc(src[o + j]! * id + 16.5));
      const hi = Math.min(31, Math.trunc(src[o + j + 16]! * id + 16.5));
      dst[b + 6 + j] = (lo & 15) | ((hi & 15) << 4);
      qh |= ((lo & 0x10) >> 4) << j;
      qh |= ((hi & 0x10) >> 4) << (j + 16);
    }
    view.setUint32(b + 2, qh >>> 0, true);
  }
}

// ---- Q5_1 (24 bytes) ----

export function dequantizeQ5_1(src: Uint8Array, dst: Float32Array, n: number): void {
  const view = viewOf(src);
  for (let b = 0, o = 0; o < n; b += 24, o += QK) {
    const d = view.getFloat16(b, true);
    const m = view.getFloat16(b + 2, true);
    const qh = view.getUint32(b + 4, true);
    for (let j = 0; j < 16; j++) {
      const q = src[b + 8 + j]!;
      const h0 = ((qh >>> j) << 4) & 0x10;
      const h1 = (qh >>> (j + 12)) & 0x10;
      dst[o + j] = ((q & 15) | h0) * d + m;
      dst[o + j + 16] = ((q >> 4) | h1) * d + m;
    }
  }
}

export function quantizeQ5_1(src: Float32Array, dst: Uint8Array, n: number): void {
  const view = viewOf(dst);
  for (let b = 0, o = 0; o < n; b += 24, o += QK) {
    const [min, max] = minMax(src, o);
    const d = Math.fround((max - min) / 31);
    const id = d ? 1 / d : 0;
    view.setFloat16(b, d, true);
    view.setFloat16(b + 2, min, true);
    let qh = 0;
    for (let j = 0; j < 16; j++) {
      const lo = Math.min(31, Math.trunc((src[o + j]! - min) * id + 0.5));
      const hi = Math.min(31, Math.trunc((src[o + j + 16]! - min) * id + 0.5));
      dst[b + 8 + j] = (lo & 15) | ((hi & 15) << 4);
      qh |= ((lo & 0x10) >> 4) << j;
      qh |= ((hi & 0x10) >> 4) << (j + 16);
    }
    view.setUint32(b + 4, qh >>> 0, true);
  }
}

// ---- Q8_0 (34 bytes) ----

export function dequantizeQ8_0(src: Uint8Array, dst: Float32Array, n: number): void {
  const view = viewOf(src);
  for (let b = 0, o = 0; o < n; b += 34, o += QK) {
    const d = view.getFloat16(b, true);
    for (let j = 0; j < QK; j++) dst[o + j] = view.getInt8(b + 2 + j) * d;
  }
}

export function quantizeQ8_0(src: Float32Array, dst: Uint8Array, n: number): void {
  const view = viewOf(dst);
  for (let b = 0, o = 0; o < n; b += 34, o += QK) {
    let amax = 0;
    for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(src[o + j]!));
    const d = Math.fround(amax / 127);
    const id = d ? 1 / d : 0;
    view.setFloat16(b, d, true);
    for (let j = 0; j < QK; j++) dst[b + 2 + j] = roundAway(src[o + j]! * id) & 0xff; // int8 two's complement
  }
}
