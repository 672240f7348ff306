// Activation quantization, once per matmul input (llama.cpp's Q8_0 activations): per 32 values one f32 scale
// d = amax / 127 and int8 q = round(x / d). Also the per-16 and per-32 sums d * sum(q), which turn a weight
// offset ("min") into one multiply per group instead of one per weight.

/**
 * x [numTokens, cols] f32 -> qa [numTokens, cols] i8, da [numTokens, cols / 32] f32,
 * sa32 [numTokens, cols / 32] f32, sa16 [numTokens, cols / 16] f32 (d * sum(q), for float offsets),
 * qs32 [numTokens, cols / 32] i32, qs16 [numTokens, cols / 16] i32 (sum(q), for integer zero points).
 * cols is a multiple of 32.
 */
export function quantize_q8(x: usize, numTokens: i32, cols: i32, qa: usize, da: usize, sa32: usize, sa16: usize, qs32: usize, qs16: usize): void {
  const numBlocks = cols >> 5;
  const total = numTokens * numBlocks;
  for (let blk = 0; blk < total; blk++) {
    const src = x + (<usize>blk << 7);
    let amax: f32 = 0;
    for (let i = 0; i < 32; i++) {
      const a = Mathf.abs(load<f32>(src + (<usize>i << 2)));
      if (a > amax) amax = a;
    }
    const d: f32 = amax / 127;
    const id: f32 = d > 0 ? 1 / d : 0;
    const dst = qa + (<usize>blk << 5);
    let sumLo: i32 = 0;
    let sumHi: i32 = 0;
    for (let i = 0; i < 32; i++) {
      let q = <i32>nearest(load<f32>(src + (<usize>i << 2)) * id);
      if (q > 127) q = 127;
      if (q < -127) q = -127;
      store<i8>(dst + i, <i8>q);
      if (i < 16) sumLo += q; else sumHi += q;
    }
    store<f32>(da + (<usize>blk << 2), d);
    store<f32>(sa32 + (<usize>blk << 2), d * <f32>(sumLo + sumHi));
    store<f32>(sa16 + (<usize>blk << 3), d * <f32>sumLo);
    store<f32>(sa16 + (<usize>blk << 3) + 4, d * <f32>sumHi);
    store<i32>(qs32 + (<usize>blk << 2), sumLo + sumHi);
    store<i32>(qs16 + (<usize>blk << 3), sumLo);
    store<i32>(qs16 + (<usize>blk << 3) + 4, sumHi);
  }
}
