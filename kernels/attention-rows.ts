// The vector steps of one attention task on f32 rows in scratch (attention.ts attentionTiles): query . key scores,
// the softmax's max and exp, and the exp-weighted sums of value rows; each has a scalar loop with the SIMD path's bits.
import { expNonPositiveF32, expNonPositiveF32x4, hsumf, reduce4f } from "./common";

export function dotF32(a: usize, b: usize, n: i32): f32 {
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

/** x [n] = 0 (vector stores: memory.fill is a call into the runtime, once per query vector and segment) */
export function zeroFloats(x: usize, n: i32): void {
  let d = 0;
  if (ASC_FEATURE_SIMD) for (; d + 4 <= n; d += 4) v128.store(x + (<usize>d << 2), i32x4.splat(0));
  for (; d < n; d++) store<f32>(x + (<usize>d << 2), 0);
}

/** max of x [n] (order-free, so the SIMD lanes give the scalar result). */
export function maxOf(x: usize, n: i32): f32 {
  let max: f32 = -Infinity;
  let t = 0;
  if (ASC_FEATURE_SIMD) {
    // four independent maxima (max is order-free): one chain through f32x4.max, which JSC emits as ~6 dependent
    // instructions for its NaN and -0 rules, held this pass to a vector per chain latency
    let m = f32x4.splat(-Infinity), m1 = m, m2 = m, m3 = m;
    for (; t + 16 <= n; t += 16) {
      const p = x + (<usize>t << 2);
      m = f32x4.max(m, v128.load(p));
      m1 = f32x4.max(m1, v128.load(p, 16));
      m2 = f32x4.max(m2, v128.load(p, 32));
      m3 = f32x4.max(m3, v128.load(p, 48));
    }
    m = f32x4.max(f32x4.max(m, m1), f32x4.max(m2, m3));
    for (; t + 4 <= n; t += 4) m = f32x4.max(m, v128.load(x + (<usize>t << 2)));
    max = Mathf.max(Mathf.max(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)), Mathf.max(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)));
  }
  for (; t < n; t++) max = Mathf.max(max, load<f32>(x + (<usize>t << 2)));
  return max;
}

/**
 * x[t] = e^(x[t] - max) in place; returns their sum, taken as 4 lane sums over the whole quads of x,
 * (l0 + l2) + (l1 + l3), then the tail in order: the same in every build.
 */
export function expInPlace(x: usize, n: i32, max: f32): f32 {
  let t = 0;
  let sum: f32 = 0;
  if (ASC_FEATURE_SIMD) {
    let acc = f32x4.splat(0);
    const m = f32x4.splat(max);
    for (; t + 4 <= n; t += 4) {
      const p = x + (<usize>t << 2);
      const e = expNonPositiveF32x4(f32x4.sub(v128.load(p), m));
      v128.store(p, e);
      acc = f32x4.add(acc, e);
    }
    sum = hsumf(acc);
  } else {
    let l0: f32 = 0, l1: f32 = 0, l2: f32 = 0, l3: f32 = 0;
    for (; t + 4 <= n; t += 4) {
      const p = x + (<usize>t << 2);
      const e0 = expNonPositiveF32(load<f32>(p) - max), e1 = expNonPositiveF32(load<f32>(p, 4) - max);
      const e2 = expNonPositiveF32(load<f32>(p, 8) - max), e3 = expNonPositiveF32(load<f32>(p, 12) - max);
      store<f32>(p, e0);
      store<f32>(p, e1, 4);
      store<f32>(p, e2, 8);
      store<f32>(p, e3, 12);
      l0 += e0;
      l1 += e1;
      l2 += e2;
      l3 += e3;
    }
    sum = (l0 + l2) + (l1 + l3);
  }
  for (; t < n; t++) {
    const p = x + (<usize>t << 2);
    const e = expNonPositiveF32(load<f32>(p) - max);
    store<f32>(p, e);
    sum += e;
  }
  return sum;
}

/**
 * dst[t] = (q . k_t) * scale for the m widened K rows at kRows [m, headDim]; every score is dotF32's sum (4 lanes over
 * the dims, then (l0 + l2) + (l1 + l3)), however the keys are grouped, so the bits never depend on the tiling.
 */
export function scoreKeys(dst: usize, qv: usize, kRows: usize, m: i32, headDim: i32, scale: f32): void {
  let t = 0;
  if (ASC_FEATURE_SIMD && (headDim & 3) == 0) {
    const rowBytes = <usize>(headDim << 2);
    const sv = f32x4.splat(scale);
    for (; t + 4 <= m; t += 4) {
      const k = kRows + <usize>t * rowBytes;
      let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
      for (let d = 0; d < headDim; d += 4) {
        const qd = v128.load(qv + (<usize>d << 2));
        const r = k + (<usize>d << 2);
        a0 = f32x4.add(a0, f32x4.mul(qd, v128.load(r)));
        a1 = f32x4.add(a1, f32x4.mul(qd, v128.load(r + rowBytes)));
        a2 = f32x4.add(a2, f32x4.mul(qd, v128.load(r + 2 * rowBytes)));
        a3 = f32x4.add(a3, f32x4.mul(qd, v128.load(r + 3 * rowBytes)));
      }
      v128.store(dst + (<usize>t << 2), f32x4.mul(reduce4f(a0, a1, a2, a3), sv));
    }
  }
  for (; t < m; t++) store<f32>(dst + (<usize>t << 2), dotF32(qv, kRows + <usize>(t * headDim) * 4, headDim) * scale);
}

/**
 * scoreKeys for two query vectors at once (two heads of a row, or of two rows): each loaded K vector feeds both
 * (same bits as two scoreKeys calls).
 */
export function scoreKeys2(dstA: usize, dstB: usize, qa: usize, qb: usize, kRows: usize, m: i32, headDim: i32, scale: f32): void {
  let t = 0;
  if (ASC_FEATURE_SIMD && headDim == 64) {
    // headDim 64 (SmolLM2, Qwen2.5, Llama 3.2): every row and head offset a constant, folded into the loads' addressing
    // (JSC's OMG dump: 35 -> 24 instructions per 32 multiply-adds)
    const sv = f32x4.splat(scale);
    for (; t + 4 <= m; t += 4) {
      let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
      let b0 = a0, b1 = a0, b2 = a0, b3 = a0;
      let k = kRows + (<usize>t << 8);
      let qd = qa;
      let qe = qb;
      for (let d = 0; d < 16; d++) {
        const qA = v128.load(qd);
        const qB = v128.load(qe);
        const k0 = v128.load(k), k1 = v128.load(k, 256), k2 = v128.load(k, 512), k3 = v128.load(k, 768);
        a0 = f32x4.add(a0, f32x4.mul(qA, k0));
        b0 = f32x4.add(b0, f32x4.mul(qB, k0));
        a1 = f32x4.add(a1, f32x4.mul(qA, k1));
        b1 = f32x4.add(b1, f32x4.mul(qB, k1));
        a2 = f32x4.add(a2, f32x4.mul(qA, k2));
        b2 = f32x4.add(b2, f32x4.mul(qB, k2));
        a3 = f32x4.add(a3, f32x4.mul(qA, k3));
        b3 = f32x4.add(b3, f32x4.mul(qB, k3));
        k += 16;
        qd += 16;
        qe += 16;
      }
      v128.store(dstA + (<usize>t << 2), f32x4.mul(reduce4f(a0, a1, a2, a3), sv));
      v128.store(dstB + (<usize>t << 2), f32x4.mul(reduce4f(b0, b1, b2, b3), sv));
    }
  } else if (ASC_FEATURE_SIMD && (headDim & 3) == 0) {
    const rowBytes = <usize>(headDim << 2);
    const sv = f32x4.splat(scale);
    for (; t + 4 <= m; t += 4) {
      const k = kRows + <usize>t * rowBytes;
      let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
      let b0 = a0, b1 = a0, b2 = a0, b3 = a0;
      for (let d = 0; d < headDim; d += 4) {
        const qA = v128.load(qa + (<usize>d << 2));
        const qB = v128.load(qb + (<usize>d << 2));
        const r = k + (<usize>d << 2);
        const k0 = v128.load(r), k1 = v128.load(r + rowBytes), k2 = v128.load(r + 2 * rowBytes), k3 = v128.load(r + 3 * rowBytes);
        a0 = f32x4.add(a0, f32x4.mul(qA, k0));
        b0 = f32x4.add(b0, f32x4.mul(qB, k0));
        a1 = f32x4.add(a1, f32x4.mul(qA, k1));
        b1 = f32x4.add(b1, f32x4.mul(qB, k1));
        a2 = f32x4.add(a2, f32x4.mul(qA, k2));
        b2 = f32x4.add(b2, f32x4.mul(qB, k2));
        a3 = f32x4.add(a3, f32x4.mul(qA, k3));
        b3 = f32x4.add(b3, f32x4.mul(qB, k3));
      }
      v128.store(dstA + (<usize>t << 2), f32x4.mul(reduce4f(a0, a1, a2, a3), sv));
      v128.store(dstB + (<usize>t << 2), f32x4.mul(reduce4f(b0, b1, b2, b3), sv));
    }
  }
  if (t < m) {
    scoreKeys(dstA + (<usize>t << 2), qa, kRows + <usize>(t * headDim) * 4, m - t, headDim, scale);
    scoreKeys(dstB + (<usize>t << 2), qb, kRows + <usize>(t * headDim) * 4, m - t, headDim, scale);
  }
}

/**
 * o [headDim] += sum over keys t of e[t] * v_t, in key order, with the V rows widened at vRows [numKeys, headDim] f32.
 * SIMD: 16 dims at a time in 4 registers over all keys (no load/store of o per key); the same per-lane order as the
 * scalar loop, so the bits agree.
 */
export function accumulateWeighted(o: usize, e: usize, vRows: usize, numKeys: i32, headDim: i32): void {
  let d = 0;
  if (ASC_FEATURE_SIMD) {
    const rowBytes = <usize>(headDim << 2);
    for (; d + 16 <= headDim; d += 16) {
      const od = o + (<usize>d << 2);
      let a0 = v128.load(od), a1 = v128.load(od, 16), a2 = v128.load(od, 32), a3 = v128.load(od, 48);
      let v = vRows + (<usize>d << 2);
      for (let t = 0; t < numKeys; t++) {
        const p = v128.load32_splat(e + (<usize>t << 2));
        a0 = f32x4.add(a0, f32x4.mul(p, v128.load(v)));
        a1 = f32x4.add(a1, f32x4.mul(p, v128.load(v, 16)));
        a2 = f32x4.add(a2, f32x4.mul(p, v128.load(v, 32)));
        a3 = f32x4.add(a3, f32x4.mul(p, v128.load(v, 48)));
        v += rowBytes;
      }
      v128.store(od, a0);
      v128.store(od, a1, 16);
      v128.store(od, a2, 32);
      v128.store(od, a3, 48);
    }
  }
  accumulateTail(o, e, vRows, numKeys, headDim, d);
}

/** accumulateWeighted for two outputs over the same keys: each loaded V vector feeds both (same bits as two calls). */
export function accumulateWeighted2(oa: usize, ob: usize, ea: usize, eb: usize, vRows: usize, numKeys: i32, headDim: i32): void {
  let d = 0;
  if (ASC_FEATURE_SIMD) {
    const rowBytes = <usize>(headDim << 2);
    for (; d + 16 <= headDim; d += 16) {
      const da = oa + (<usize>d << 2);
      const db = ob + (<usize>d << 2);
      let a0 = v128.load(da), a1 = v128.load(da, 16), a2 = v128.load(da, 32), a3 = v128.load(da, 48);
      let b0 = v128.load(db), b1 = v128.load(db, 16), b2 = v128.load(db, 32), b3 = v128.load(db, 48);
      let v = vRows + (<usize>d << 2);
      for (let t = 0; t < numKeys; t++) {
        const pa = v128.load32_splat(ea + (<usize>t << 2));
        const pb = v128.load32_splat(eb + (<usize>t << 2));
        const v0 = v128.load(v);
        a0 = f32x4.add(a0, f32x4.mul(pa, v0));
        b0 = f32x4.add(b0, f32x4.mul(pb, v0));
        const v1 = v128.load(v, 16);
        a1 = f32x4.add(a1, f32x4.mul(pa, v1));
        b1 = f32x4.add(b1, f32x4.mul(pb, v1));
        const v2 = v128.load(v, 32);
        a2 = f32x4.add(a2, f32x4.mul(pa, v2));
        b2 = f32x4.add(b2, f32x4.mul(pb, v2));
        const v3 = v128.load(v, 48);
        a3 = f32x4.add(a3, f32x4.mul(pa, v3));
        b3 = f32x4.add(b3, f32x4.mul(pb, v3));
        v += rowBytes;
      }
      v128.store(da, a0);
      v128.store(da, a1, 16);
      v128.store(da, a2, 32);
      v128.store(da, a3, 48);
      v128.store(db, b0);
      v128.store(db, b1, 16);
      v128.store(db, b2, 32);
      v128.store(db, b3, 48);
    }
  }
  accumulateTail(oa, ea, vRows, numKeys, headDim, d);
  accumulateTail(ob, eb, vRows, numKeys, headDim, d);
}

/** accumulateWeighted's scalar loop over dims [from, headDim). */
export function accumulateTail(o: usize, e: usize, vRows: usize, numKeys: i32, headDim: i32, from: i32): void {
  for (let d = from; d < headDim; d++) {
    const od = o + (<usize>d << 2);
    let acc = load<f32>(od);
    for (let t = 0; t < numKeys; t++) acc = acc + load<f32>(e + (<usize>t << 2)) * load<f32>(vRows + (<usize>(t * headDim + d) << 2));
    store<f32>(od, acc);
  }
}
