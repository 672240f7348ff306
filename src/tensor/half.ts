/**
 * 16-bit floats as ggml stores them: IEEE binary16 (`ggml_half`, round-to-nearest-even) and bfloat16 (the top half
 * of an f32, rounded to nearest even; NaN kept quiet), little-endian. f16 itself needs no helper: Bun's DataView
 * has getFloat16/setFloat16 (round to nearest even), and Float16Array reads aligned data.
 */

/** The bf16 bit pattern of `value` (ggml_compute_fp32_to_bf16: round to nearest even, NaN -> quiet NaN). */
export function f32ToBf16(value: number, scratch: DataView): number {
  scratch.setFloat32(0, value, true);
  const u = scratch.getUint32(0, true);
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 64) & 0xffff; // NaN: force quiet
  return ((u + (0x7fff + ((u >>> 16) & 1))) >>> 16) & 0xffff;
}

/** A DataView over `bytes` (any byteOffset), for block decoding. */
export function viewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A 4-byte scratch view for f32ToBf16 (one per caller, never shared module state). */
export function newScratch(): DataView {
  return new DataView(new ArrayBuffer(4));
}
