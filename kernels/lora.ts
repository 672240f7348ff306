// LoRA's low-rank update, each row of a batch with its own adapter or none (vLLM's punica kernels: bgmv_shrink,
// then bgmv_expand, one adapter index per token): out[r] += scale_s * B_s (A_s x[r]) for s = rowSlots[r] >= 0.
// A_s [rank, nIn] and Bt_s [rank, nOut] (B transposed) are f32, row-major, unpadded. slotTable holds 16 bytes per
// slot: A's address (0: this slot has no pair for this matrix, the row is left alone), Bt's address, rank (i32), scale (f32).
// Each dot: 4 lane sums over the full 4-element chunks, reduced as (l0 + l2) + (l1 + l3), then the tail in order;
// the scalar twin runs the same sequence, so every build gives the same bits, and a row's bits never depend on the
// other rows of the batch.

function dot(a: usize, b: usize, n: i32): f32 {
  const chunks = n >> 2;
  let sum: f32;
  if (ASC_FEATURE_SIMD) {
    let acc = f32x4.splat(0);
    for (let c = 0; c < chunks; c++) {
      const off = <usize>c << 4;
      acc = f32x4.add(acc, f32x4.mul(v128.load(a + off), v128.load(b + off)));
    }
    sum = (f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 2)) + (f32x4.extract_lane(acc, 1) + f32x4.extract_lane(acc, 3));
  } else {
    let l0: f32 = 0, l1: f32 = 0, l2: f32 = 0, l3: f32 = 0;
    for (let c = 0; c < chunks; c++) {
      const off = <usize>c << 4;
      l0 = l0 + load<f32>(a + off) * load<f32>(b + off);
      l1 = l1 + load<f32>(a + off + 4) * load<f32>(b + off + 4);
      l2 = l2 + load<f32>(a + off + 8) * load<f32>(b + off + 8);
      l3 = l3 + load<f32>(a + off + 12) * load<f32>(b + off + 12);
    }
    sum = (l0 + l2) + (l1 + l3);
  }
  for (let c = chunks << 2; c < n; c++) sum = sum + load<f32>(a + (<usize>c << 2)) * load<f32>(b + (<usize>c << 2));
  return sum;
}

/**
 * dot() of one row `a` with four rows x0..x3 at once, each with its own accumulator (four independent chains instead
 * of one), each in dot()'s order: out0..out3 get exactly dot(a, xj, n).
 */
function dot4(a: usize, x0: usize, x1: usize, x2: usize, x3: usize, n: i32, out: usize, stride: usize): void {
  const chunks = n >> 2;
  let s0: f32, s1: f32, s2: f32, s3: f32;
  if (ASC_FEATURE_SIMD) {
    let c0 = f32x4.splat(0), c1 = f32x4.splat(0), c2 = f32x4.splat(0), c3 = f32x4.splat(0);
    for (let c = 0; c < chunks; c++) {
      const off = <usize>c << 4;
      const av = v128.load(a + off);
      c0 = f32x4.add(c0, f32x4.mul(av, v128.load(x0 + off)));
      c1 = f32x4.add(c1, f32x4.mul(av, v128.load(x1 + off)));
      c2 = f32x4.add(c2, f32x4.mul(av, v128.load(x2 + off)));
      c3 = f32x4.add(c3, f32x4.mul(av, v128.load(x3 + off)));
    }
    s0 = (f32x4.extract_lane(c0, 0) + f32x4.extract_lane(c0, 2)) + (f32x4.extract_lane(c0, 1) + f32x4.extract_lane(c0, 3));
    s1 = (f32x4.extract_lane(c1, 0) + f32x4.extract_lane(c1, 2)) + (f32x4.extract_lane(c1, 1) + f32x4.extract_lane(c1, 3));
    s2 = (f32x4.extract_lane(c2, 0) + f32x4.extract_lane(c2, 2)) + (f32x4.extract_lane(c2, 1) + f32x4.extract_lane(c2, 3));
    s3 = (f32x4.extract_lane(c3, 0) + f32x4.extract_lane(c3, 2)) + (f32x4.extract_lane(c3, 1) + f32x4.extract_lane(c3, 3));
    for (let c = chunks << 2; c < n; c++) {
      const av = load<f32>(a + (<usize>c << 2));
      s0 = s0 + av * load<f32>(x0 + (<usize>c << 2));
      s1 = s1 + av * load<f32>(x1 + (<usize>c << 2));
      s2 = s2 + av * load<f32>(x2 + (<usize>c << 2));
      s3 = s3 + av * load<f32>(x3 + (<usize>c << 2));
    }
  } else {
    s0 = dot(a, x0, n);
    s1 = dot(a, x1, n);
    s2 = dot(a, x2, n);
    s3 = dot(a, x3, n);
  }
  store<f32>(out, s0);
  store<f32>(out + stride, s1);
  store<f32>(out + 2 * stride, s2);
  store<f32>(out + 3 * stride, s3);
}

/**
 * out rows 0..3 ([4, nOut] from `out`) += scale * sums, sums[j][o] = sum over k in order of ax[j, k] * Bt[k, o]: four
 * rows' sums kept in registers for each 4-column chunk (SIMD builds only; the scalar twin is the loop in lora_delta).
 */
function expand4(out: usize, bt: usize, ax: usize, rank: i32, nOut: i32, scale: f32): void {
  const chunks = nOut >> 2;
  const rowBytes = <usize>nOut << 2;
  const sv = f32x4.splat(scale);
  for (let c = 0; c < chunks; c++) {
    const off = <usize>c << 4;
    let c0 = f32x4.splat(0), c1 = f32x4.splat(0), c2 = f32x4.splat(0), c3 = f32x4.splat(0);
    for (let k = 0; k < rank; k++) {
      const bv = v128.load(bt + <usize>k * rowBytes + off);
      const t = ax + (<usize>k << 2);
      const rk = <usize>rank << 2;
      c0 = f32x4.add(c0, f32x4.mul(f32x4.splat(load<f32>(t)), bv));
      c1 = f32x4.add(c1, f32x4.mul(f32x4.splat(load<f32>(t + rk)), bv));
      c2 = f32x4.add(c2, f32x4.mul(f32x4.splat(load<f32>(t + 2 * rk)), bv));
      c3 = f32x4.add(c3, f32x4.mul(f32x4.splat(load<f32>(t + 3 * rk)), bv));
    }
    const o0 = out + off;
    v128.store(o0, f32x4.add(v128.load(o0), f32x4.mul(sv, c0)));
    v128.store(o0 + rowBytes, f32x4.add(v128.load(o0 + rowBytes), f32x4.mul(sv, c1)));
    v128.store(o0 + 2 * rowBytes, f32x4.add(v128.load(o0 + 2 * rowBytes), f32x4.mul(sv, c2)));
    v128.store(o0 + 3 * rowBytes, f32x4.add(v128.load(o0 + 3 * rowBytes), f32x4.mul(sv, c3)));
  }
  for (let o = chunks << 2; o < nOut; o++) {
    for (let j = 0; j < 4; j++) {
      let acc: f32 = 0;
      for (let k = 0; k < rank; k++) acc = acc + load<f32>(ax + (<usize>(j * rank + k) << 2)) * load<f32>(bt + <usize>k * rowBytes + (<usize>o << 2));
      const p = out + <usize>j * rowBytes + (<usize>o << 2);
      store<f32>(p, load<f32>(p) + scale * acc);
    }
  }
}

/** Rows that share a slot are done together, up to this many: each row of A and of Bt is then read once per group. */
const GROUP: i32 = 4;

/**
 * Rows [rowStart, rowEnd) of out [numRows, nOut] gain their slot's update from x [numRows, nIn]; rowSlots i32
 * [numRows]; tmp: f32 [GROUP * (largest rank + nOut)] (each grouped row's A x, then its expand's sums). B is stored
 * transposed, Bt [rank, nOut], so the expand streams Bt's rows: sums[o] = sum over k in order of (A x)[k] * Bt[k, o],
 * then out += scale * sums. Up to GROUP consecutive rows of one slot go together (A's row k, then Bt's row k, stay in
 * L1 while each of them uses it); every row's arithmetic is the same whatever its group, so its bits are too.
 */
export function lora_delta(out: usize, x: usize, rowSlots: usize, rowStart: i32, rowEnd: i32, slotTable: usize, nIn: i32, nOut: i32, tmp: usize): void {
  const chunks = nOut >> 2;
  let r = rowStart;
  while (r < rowEnd) {
    const slot = load<i32>(rowSlots + (<usize>r << 2));
    if (slot < 0) { r++; continue; }
    const entry = slotTable + (<usize>slot << 4);
    const a = <usize>load<u32>(entry);
    if (a == 0) { r++; continue; }
    let g = 1;
    while (g < GROUP && r + g < rowEnd && load<i32>(rowSlots + (<usize>(r + g) << 2)) == slot) g++;
    const bt = <usize>load<u32>(entry, 4);
    const rank = load<i32>(entry, 8);
    const scale = load<f32>(entry, 12);
    const ax = tmp; // [g, rank]
    const sums = tmp + (<usize>(GROUP * rank) << 2); // [g, nOut]
    for (let k = 0; k < rank; k++) {
      const ak = a + (<usize>(k * nIn) << 2);
      if (g == GROUP) {
        const xr = x + (<usize>(r * nIn) << 2);
        const xs = <usize>nIn << 2;
        dot4(ak, xr, xr + xs, xr + 2 * xs, xr + 3 * xs, nIn, ax + (<usize>k << 2), <usize>rank << 2);
      } else {
        for (let j = 0; j < g; j++) store<f32>(ax + (<usize>(j * rank + k) << 2), dot(ak, x + (<usize>((r + j) * nIn) << 2), nIn));
      }
    }
    if (ASC_FEATURE_SIMD && g == GROUP) {
      // four rows' sums in registers, column chunk by column chunk: the same order per output as the loop below
      expand4(out + (<usize>(r * nOut) << 2), bt, ax, rank, nOut, scale);
      r += g;
      continue;
    }
    memory.fill(sums, 0, <usize>(g * nOut) << 2);
    for (let k = 0; k < rank; k++) {
      const row = bt + (<usize>(k * nOut) << 2);
      for (let j = 0; j < g; j++) {
        const t = load<f32>(ax + (<usize>(j * rank + k) << 2));
        const sj = sums + (<usize>(j * nOut) << 2);
        if (ASC_FEATURE_SIMD) {
          const tv = f32x4.splat(t);
          for (let c = 0; c < chunks; c++) {
            const off = <usize>c << 4;
            v128.store(sj + off, f32x4.add(v128.load(sj + off), f32x4.mul(tv, v128.load(row + off))));
          }
        } else {
          for (let o = 0; o < chunks << 2; o++) store<f32>(sj + (<usize>o << 2), load<f32>(sj + (<usize>o << 2)) + t * load<f32>(row + (<usize>o << 2)));
        }
        for (let o = chunks << 2; o < nOut; o++) store<f32>(sj + (<usize>o << 2), load<f32>(sj + (<usize>o << 2)) + t * load<f32>(row + (<usize>o << 2)));
      }
    }
    for (let j = 0; j < g; j++) {
      const or = out + (<usize>((r + j) * nOut) << 2);
      const sj = sums + (<usize>(j * nOut) << 2);
      if (ASC_FEATURE_SIMD) {
        const sv = f32x4.splat(scale);
        for (let c = 0; c < chunks; c++) {
          const off = <usize>c << 4;
          v128.store(or + off, f32x4.add(v128.load(or + off), f32x4.mul(sv, v128.load(sj + off))));
        }
      } else {
        for (let o = 0; o < chunks << 2; o++) store<f32>(or + (<usize>o << 2), load<f32>(or + (<usize>o << 2)) + scale * load<f32>(sj + (<usize>o << 2)));
      }
      for (let o = chunks << 2; o < nOut; o++) store<f32>(or + (<usize>o << 2), load<f32>(or + (<usize>o << 2)) + scale * load<f32>(sj + (<usize>o << 2)));
    }
    r += g;
  }
}

/** rows a group of lora_delta takes (its tmp holds that many rows' A x and sums) */
export function lora_group_rows(): i32 {
  return GROUP;
}
