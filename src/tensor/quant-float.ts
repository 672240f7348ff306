/**
 * The unquantized weight types: f32, f16, bf16 (blockSize 1). Bytes are little-endian and may start at any offset,
 * so the slow-but-general DataView path is used when a typed view would be misaligned.
 */
import { f32ToBf16, newScratch, viewOf } from "./half.ts";

export function dequantizeF32(src: Uint8Array, dst: Float32Array, n: number): void {
  if (src.byteOffset % 4 === 0) {
    dst.set(new Float32Array(src.buffer, src.byteOffset, n));
    return;
  }
  const view = viewOf(src);
  for (let i = 0; i < n; i++) dst[i] = view.getFloat32(4 * i, true);
}

export function quantizeF32(src: Float32Array, dst: Uint8Array, n: number): void {
  dst.set(new Uint8Array(src.buffer, src.byteOffset, 4 * n));
}

export function dequantizeF16(src: Uint8Array, dst: Float32Array, n: number): void {
  if (src.byteOffset % 2 === 0) {
    const half = new Float16Array(src.buffer, src.byteOffset, n);
    for (let i = 0; i < n; i++) dst[i] = half[i]!;
    return;
  }
  const view = viewOf(src);
  for (let i = 0; i < n; i++) dst[i] = view.getFloat16(2 * i, true);
}

export function quantizeF16(src: Float32Array, dst: Uint8Array, n: number): void {
  const view = viewOf(dst);
  for (let i = 0; i < n; i++) view.setFloat16(2 * i, src[i]!, true);
}

export function dequantizeBf16(src: Uint8Array, dst: Float32Array, n: number): void {
  // bf16 is the top half of an f32: write the bits straight into dst's memory
  const bits = new Uint32Array(dst.buffer, dst.byteOffset, n); // [n] aliases dst
  const view = viewOf(src);
  for (let i = 0; i < n; i++) bits[i] = view.getUint16(2 * i, true) << 16;
}

export function quantizeBf16(src: Float32Array, dst: Uint8Array, n: number): void {
  const view = viewOf(dst);
  const scratch = newScratch();
  for (let i = 0; i < n; i++) view.setUint16(2 * i, f32ToBf16(src[i]!, scratch), true);
}
