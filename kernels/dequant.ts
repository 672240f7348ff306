// Dequantize one row of a repacked quantized weight (layout in block-layouts.ts): the embedding lookup.
import { KIND_I8, groupBytes, groupSize, offsetAt, quantAt, scaleAt, scaleStride } from "./block-layouts";

/** dst [cols] f32 = row `row` of the repacked weight: w = scale * q + offset per group, or scale * (q - zeroPoint). */
export function dequant_row(kind: i32, dst: usize, wq: usize, ws: usize, wm: usize, row: i32, cols: i32, zeroPoint: i32): void {
  const gs = groupSize(kind);
  const numGroups = cols / gs;
  const rg = row >> 2;
  const r = row & 3;
  // this row group's scales (and offsets): per group [numGroups, 4 rows] (f32; KIND_MXFP4 the f32s' upper halves, u16), or the K-quant superblocks
  const sStride = scaleStride(kind, numGroups);
  const s = ws + <usize>rg * sStride;
  const m = wm + <usize>rg * sStride;
  for (let g = 0; g < numGroups; g++) {
    const q = wq + <usize>((rg * numGroups + g) * 4 * groupBytes(kind));
    const sc = scaleAt(kind, s, g, r);
    const mn = kind == KIND_I8 || zeroPoint != 0 ? <f32>0 : offsetAt(kind, s, m, g, r);
    for (let i = 0; i < gs; i++) {
      store<f32>(dst + (<usize>(g * gs + i) << 2), sc * <f32>(quantAt(kind, q, r, i) - zeroPoint) + mn);
    }
  }
}
