// Dequantize one row of a repacked quantized weight (layout in matmul-quant.ts): the embedding lookup.
import { KIND_I8, KIND_U4, KIND_U8G16 } from "./matmul-quant";

/** dst [cols] f32 = row `row` of the repacked weight: w = ws * q + wm per group, or ws * (q - zeroPoint). */
export function dequant_row(kind: i32, dst: usize, wq: usize, ws: usize, wm: usize, row: i32, cols: i32, zeroPoint: i32): void {
  const gs = kind == KIND_U8G16 ? 16 : 32;
  const gb = kind == KIND_U4 || kind == KIND_U8G16 ? 16 : 32;
  const numGroups = cols / gs;
  const rg = row >> 2;
  const r = row & 3;
  for (let g = 0; g < numGroups; g++) {
    const idx = (rg * numGroups + g) * 4 + r;
    const q = wq + <usize>(idx * gb);
    const s = load<f32>(ws + (<usize>idx << 2));
    const m = kind == KIND_I8 || zeroPoint != 0 ? <f32>0 : load<f32>(wm + (<usize>idx << 2));
    for (let i = 0; i < gs; i++) {
      let v: i32;
      if (kind == KIND_I8) v = <i32>load<i8>(q + i);
      else if (kind == KIND_U4) v = i < 16 ? <i32>(load<u8>(q + i) & 15) : <i32>(load<u8>(q + i - 16) >> 4);
      else v = <i32>load<u8>(q + i);
      store<f32>(dst + (<usize>(g * gs + i) << 2), s * <f32>(v - zeroPoint) + m);
    }
  }
}
