// Float matmul for F32 / F16 / BF16 weights (kept as f32 after load): out[t, r] = sum_c w[r, c] * x[t, c].
// Weight layout: w [rowsPadded (multiple of 4), colsPadded (multiple of 4)] f32, zero padded.
// Per row: 4 lane sums over the full 4-column chunks, reduced as (l0 + l2) + (l1 + l3), then the cols % 4 tail in
// order. The scalar twin runs the same sequence, so every build and every batch size gives the same bits.
import { reduce4f } from "./common";

function tailDot(w: usize, x: usize, from: i32, to: i32): f32 {
  let acc: f32 = 0;
  for (let c = from; c < to; c++) acc = acc + load<f32>(w + (<usize>c << 2)) * load<f32>(x + (<usize>c << 2));
  return acc;
}

/** out [numTokens, rows]; x [numTokens, cols]; row groups [groupStart, groupEnd) of 4 rows; tmp: 16 bytes scratch. */
export function matmul_f32(
  out: usize, w: usize, x: usize, rows: i32, cols: i32, numTokens: i32, groupStart: i32, groupEnd: i32, tmp: usize,
): void {
  const colsPadded = (cols + 3) & ~3;
  const rowBytes = <usize>(colsPadded << 2);
  const chunks = cols >> 2;
  const tailFrom = chunks << 2;
  for (let rg = groupStart; rg < groupEnd; rg++) {
    const w0 = w + <usize>(rg * 4) * rowBytes;
    const w1 = w0 + rowBytes;
    const w2 = w1 + rowBytes;
    const w3 = w2 + rowBytes;
    const rowBase = rg * 4;
    const full = rowBase + 4 <= rows;
    for (let t = 0; t < numTokens; t++) {
      const xt = x + (<usize>(t * cols) << 2);
      const dst = out + (<usize>(t * rows + rowBase) << 2);
      const target = full ? dst : tmp;
      if (ASC_FEATURE_SIMD) {
        let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
        for (let c = 0; c < chunks; c++) {
          const off = <usize>c << 4;
          const xv = v128.load(xt + off);
          a0 = f32x4.add(a0, f32x4.mul(v128.load(w0 + off), xv));
          a1 = f32x4.add(a1, f32x4.mul(v128.load(w1 + off), xv));
          a2 = f32x4.add(a2, f32x4.mul(v128.load(w2 + off), xv));
          a3 = f32x4.add(a3, f32x4.mul(v128.load(w3 + off), xv));
        }
        v128.store(target, reduce4f(a0, a1, a2, a3));
      } else {
        for (let r = 0; r < 4; r++) {
          const wr = w0 + <usize>r * rowBytes;
          let l0: f32 = 0, l1: f32 = 0, l2: f32 = 0, l3: f32 = 0;
          for (let c = 0; c < chunks; c++) {
            const off = <usize>c << 4;
            l0 = l0 + load<f32>(wr + off) * load<f32>(xt + off);
            l1 = l1 + load<f32>(wr + off + 4) * load<f32>(xt + off + 4);
            l2 = l2 + load<f32>(wr + off + 8) * load<f32>(xt + off + 8);
            l3 = l3 + load<f32>(wr + off + 12) * load<f32>(xt + off + 12);
          }
          store<f32>(target + (<usize>r << 2), (l0 + l2) + (l1 + l3));
        }
      }
      if (tailFrom < cols) {
        for (let r = 0; r < 4; r++) {
          const p = target + (<usize>r << 2);
          store<f32>(p, load<f32>(p) + tailDot(w0 + <usize>r * rowBytes, xt, tailFrom, cols));
        }
      }
      if (!full) {
        for (let r = 0; r < rows - rowBase; r++) store<f32>(dst + (<usize>r << 2), load<f32>(tmp + (<usize>r << 2)));
      }
    }
  }
}
