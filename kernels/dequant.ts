// Dequantize one row of a repacked quantized weight (layout in matmul-quant.ts): the embedding lookup.
import { KIND_I8, groupBytes, groupSize, quantAt } from "./matmul-quant";

/** dst [cols] f32 = row `row` of the repacked weight: w = ws * q + wm per group, or ws * (q - zeroPoint). */
export function dequant_row(kind: i32, dst: usize, wq: usize, ws: usize, wm: usize, row: i32, cols: i32, zeroPoint: i32): void {
  const gs = groupSize(kind);
  const numGroups = cols / gs;
  const rg = row >> 2;
  const r = row & 3;
  for (let g = 0; g < numGroups; g++) {
    const idx = (rg * numGroups + g) * 4 + r;
    const q = wq + <usize>((rg * numGroups + g) * 4 * groupBytes(kind));
    const s = load<f32>(ws + (<usize>idx << 2));
    const m = kind == KIND_I8 || zeroPoint != 0 ? <f32>0 : load<f32>(wm + (<usize>idx << 2));
    for (let i = 0; i < gs; i++) {
      store<f32>(dst + (<usize>(g * gs + i) << 2), s * <f32>(quantAt(kind, q, r, i) - zeroPoint) + m);
    }
  }
}
