// Paged attention over an f16 KV cache (GQA). Cache layout per layer and part (K or V):
//   [numBlocks, blockSize, numKvHeads * headDim] f16; slot = block * blockSize + offset.
// One task = (query row, head); tasks are split across threads. Scores live in per-thread scratch.
import { f16ToF32, f16x4ToF32x4, f32ToF16, hsumf } from "./common";

/** Store k, v [numRows, kvDim] f32 into the cache slots (i32 [numRows]) of one layer as f16. */
export function kv_store_f16(kLayer: usize, vLayer: usize, k: usize, v: usize, slots: usize, numRows: i32, kvDim: i32): void {
  for (let i = 0; i < numRows; i++) {
    const slot = load<i32>(slots + (<usize>i << 2));
    const kd = kLayer + (<usize>slot * <usize>kvDim << 1);
    const vd = vLayer + (<usize>slot * <usize>kvDim << 1);
    const ks = k + (<usize>(i * kvDim) << 2);
    const vs = v + (<usize>(i * kvDim) << 2);
    for (let d = 0; d < kvDim; d++) {
      store<u16>(kd + (<usize>d << 1), <u16>f32ToF16(load<f32>(ks + (<usize>d << 2))));
      store<u16>(vd + (<usize>d << 1), <u16>f32ToF16(load<f32>(vs + (<usize>d << 2))));
    }
  }
}

function dotQK(q: usize, k: usize, headDim: i32): f32 {
  if (ASC_FEATURE_SIMD && (headDim & 3) == 0) {
    let acc = f32x4.splat(0);
    for (let d = 0; d < headDim; d += 4) {
      acc = f32x4.add(acc, f32x4.mul(v128.load(q + (<usize>d << 2)), f16x4ToF32x4(k + (<usize>d << 1))));
    }
    return hsumf(acc);
  }
  if ((headDim & 3) == 0) {
    let l0: f32 = 0, l1: f32 = 0, l2: f32 = 0, l3: f32 = 0;
    for (let d = 0; d < headDim; d += 4) {
      const qd = q + (<usize>d << 2);
      const kd = k + (<usize>d << 1);
      l0 = l0 + load<f32>(qd) * f16ToF32(load<u16>(kd));
      l1 = l1 + load<f32>(qd, 4) * f16ToF32(load<u16>(kd, 2));
      l2 = l2 + load<f32>(qd, 8) * f16ToF32(load<u16>(kd, 4));
      l3 = l3 + load<f32>(qd, 12) * f16ToF32(load<u16>(kd, 6));
    }
    return (l0 + l2) + (l1 + l3);
  }
  let acc: f32 = 0;
  for (let d = 0; d < headDim; d++) acc = acc + load<f32>(q + (<usize>d << 2)) * f16ToF32(load<u16>(k + (<usize>d << 1)));
  return acc;
}

function accumulateV(o: usize, v: usize, p: f32, headDim: i32): void {
  if (ASC_FEATURE_SIMD && (headDim & 3) == 0) {
    const pv = f32x4.splat(p);
    for (let d = 0; d < headDim; d += 4) {
      const od = o + (<usize>d << 2);
      v128.store(od, f32x4.add(v128.load(od), f32x4.mul(pv, f16x4ToF32x4(v + (<usize>d << 1)))));
    }
    return;
  }
  for (let d = 0; d < headDim; d++) {
    const od = o + (<usize>d << 2);
    store<f32>(od, load<f32>(od) + p * f16ToF32(load<u16>(v + (<usize>d << 1))));
  }
}

/**
 * out, q [rows, numHeads * headDim] f32. rowInfo i32 [numTaskRows, 3] = (row, numKeys, blockTable byte address).
 * Tasks [taskStart, taskEnd) of numTaskRows * numHeads; scratch: numKeys f32 for this thread.
 */
export function attention_f16(
  out: usize, q: usize, kLayer: usize, vLayer: usize, rowInfo: usize,
  numHeads: i32, numKvHeads: i32, headDim: i32, blockSize: i32, scale: f32, scratch: usize, taskStart: i32, taskEnd: i32,
): void {
  const kvDim = numKvHeads * headDim;
  const qDim = numHeads * headDim;
  const groupSize = numHeads / numKvHeads;
  for (let task = taskStart; task < taskEnd; task++) {
    const info = rowInfo + <usize>((task / numHeads) * 12);
    const h = task % numHeads;
    const row = load<i32>(info);
    const numKeys = load<i32>(info, 4);
    const blockTable = <usize>load<i32>(info, 8);
    const kvOff = <usize>((h / groupSize) * headDim);
    const qh = q + (<usize>(row * qDim + h * headDim) << 2);
    let max: f32 = -Infinity;
    for (let t = 0; t < numKeys; t++) {
      const slot = load<i32>(blockTable + (<usize>(t / blockSize) << 2)) * blockSize + (t % blockSize);
      const s = dotQK(qh, kLayer + ((<usize>slot * <usize>kvDim + kvOff) << 1), headDim) * scale;
      store<f32>(scratch + (<usize>t << 2), s);
      if (s > max) max = s;
    }
    let sum: f32 = 0;
    for (let t = 0; t < numKeys; t++) {
      const p = scratch + (<usize>t << 2);
      const e = Mathf.exp(load<f32>(p) - max);
      store<f32>(p, e);
      sum += e;
    }
    const inv: f32 = 1 / sum;
    const oh = out + (<usize>(row * qDim + h * headDim) << 2);
    memory.fill(oh, 0, <usize>(headDim << 2));
    for (let t = 0; t < numKeys; t++) {
      const slot = load<i32>(blockTable + (<usize>(t / blockSize) << 2)) * blockSize + (t % blockSize);
      accumulateV(oh, vLayer + ((<usize>slot * <usize>kvDim + kvOff) << 1), load<f32>(scratch + (<usize>t << 2)) * inv, headDim);
    }
  }
}
