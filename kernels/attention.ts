// Paged attention over an f16 KV cache (GQA). Cache layout per layer and part (K or V):
//   [numBlocks, blockSize, numKvHeads * headDim] f16; slot = block * blockSize + offset.
// One task = (query row, KV head); tasks are split across threads. Scores live in per-thread scratch.
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

/** f16 [n] -> f32 [n] (n a multiple of 4 on the SIMD path; same bits either way). */
function widenRow(dst: usize, src: usize, n: i32): void {
  let d = 0;
  if (ASC_FEATURE_SIMD) {
    for (; d + 4 <= n; d += 4) v128.store(dst + (<usize>d << 2), f16x4ToF32x4(src + (<usize>d << 1)));
  }
  for (; d < n; d++) store<f32>(dst + (<usize>d << 2), f16ToF32(load<u16>(src + (<usize>d << 1))));
}

function dotF32(a: usize, b: usize, n: i32): f32 {
  if ((n & 3) == 0) {
    if (ASC_FEATURE_SIMD) {
      let acc = f32x4.splat(0);
      for (let d = 0; d < n; d += 4) acc = f32x4.add(acc, f32x4.mul(v128.load(a + (<usize>d << 2)), v128.load(b + (<usize>d << 2))));
      return hsumf(acc);
    }
    let l0: f32 = 0, l1: f32 = 0, l2: f32 = 0, l3: f32 = 0;
    for (let d = 0; d < n; d += 4) {
      const ad = a + (<usize>d << 2);
      const bd = b + (<usize>d << 2);
      l0 = l0 + load<f32>(ad) * load<f32>(bd);
      l1 = l1 + load<f32>(ad, 4) * load<f32>(bd, 4);
      l2 = l2 + load<f32>(ad, 8) * load<f32>(bd, 8);
      l3 = l3 + load<f32>(ad, 12) * load<f32>(bd, 12);
    }
    return (l0 + l2) + (l1 + l3);
  }
  let acc: f32 = 0;
  for (let d = 0; d < n; d++) acc = acc + load<f32>(a + (<usize>d << 2)) * load<f32>(b + (<usize>d << 2));
  return acc;
}

/** o[d] += p * v[d] */
function axpy(o: usize, v: usize, p: f32, n: i32): void {
  let d = 0;
  if (ASC_FEATURE_SIMD) {
    const pv = f32x4.splat(p);
    for (; d + 4 <= n; d += 4) {
      const od = o + (<usize>d << 2);
      v128.store(od, f32x4.add(v128.load(od), f32x4.mul(pv, v128.load(v + (<usize>d << 2)))));
    }
  }
  for (; d < n; d++) {
    const od = o + (<usize>d << 2);
    store<f32>(od, load<f32>(od) + p * load<f32>(v + (<usize>d << 2)));
  }
}

/**
 * out, q [rows, numHeads * headDim] f32. rowInfo i32 [numTaskRows, 3] = (row, numKeys, blockTable byte address).
 * One task = (row, KV head): the group of numHeads / numKvHeads query heads that share it, so each cached K/V row is
 * widened from f16 once per group (GQA reuse). Tasks [taskStart, taskEnd) of numTaskRows * numKvHeads.
 * scratch (per thread): scores [groupSize, numKeys] f32, then one widened row [headDim] f32.
 */
export function attention_f16(
  out: usize, q: usize, kLayer: usize, vLayer: usize, rowInfo: usize,
  numHeads: i32, numKvHeads: i32, headDim: i32, blockSize: i32, scale: f32, scratch: usize, taskStart: i32, taskEnd: i32,
): void {
  const kvDim = numKvHeads * headDim;
  const qDim = numHeads * headDim;
  const groupSize = numHeads / numKvHeads;
  for (let task = taskStart; task < taskEnd; task++) {
    const info = rowInfo + <usize>((task / numKvHeads) * 12);
    const kvHead = task % numKvHeads;
    const row = load<i32>(info);
    const numKeys = load<i32>(info, 4);
    const blockTable = <usize>load<i32>(info, 8);
    const kvOff = <usize>(kvHead * headDim);
    const q0 = q + (<usize>(row * qDim + kvHead * groupSize * headDim) << 2);
    const o0 = out + (<usize>(row * qDim + kvHead * groupSize * headDim) << 2);
    const widened = scratch + (<usize>(groupSize * numKeys) << 2);
    for (let t = 0; t < numKeys; t++) {
      const slot = load<i32>(blockTable + (<usize>(t / blockSize) << 2)) * blockSize + (t % blockSize);
      widenRow(widened, kLayer + ((<usize>slot * <usize>kvDim + kvOff) << 1), headDim);
      for (let g = 0; g < groupSize; g++) {
        const s = dotF32(q0 + (<usize>(g * headDim) << 2), widened, headDim) * scale;
        store<f32>(scratch + (<usize>(g * numKeys + t) << 2), s);
      }
    }
    for (let g = 0; g < groupSize; g++) {
      const sg = scratch + (<usize>(g * numKeys) << 2);
      let max: f32 = -Infinity;
      for (let t = 0; t < numKeys; t++) max = Mathf.max(max, load<f32>(sg + (<usize>t << 2)));
      let sum: f32 = 0;
      for (let t = 0; t < numKeys; t++) {
        const p = sg + (<usize>t << 2);
        const e = Mathf.exp(load<f32>(p) - max);
        store<f32>(p, e);
        sum += e;
      }
      const inv: f32 = 1 / sum;
      for (let t = 0; t < numKeys; t++) store<f32>(sg + (<usize>t << 2), load<f32>(sg + (<usize>t << 2)) * inv);
    }
    memory.fill(o0, 0, <usize>((groupSize * headDim) << 2));
    for (let t = 0; t < numKeys; t++) {
      const slot = load<i32>(blockTable + (<usize>(t / blockSize) << 2)) * blockSize + (t % blockSize);
      widenRow(widened, vLayer + ((<usize>slot * <usize>kvDim + kvOff) << 1), headDim);
      for (let g = 0; g < groupSize; g++) {
        axpy(o0 + (<usize>(g * headDim) << 2), widened, load<f32>(scratch + (<usize>(g * numKeys + t) << 2)), headDim);
      }
    }
  }
}
