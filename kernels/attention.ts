// Paged attention over an f16 or 8-bit KV cache (GQA); the cache layout and its writers are kv-store.ts.
// One task = (tile of query rows, KV head, segment of up to SEGMENT_KEYS keys); tasks are split across threads, and rows
// with more than one segment merge them afterwards (attention_merge). Scores and widened rows live in per-thread scratch.
import { expF32, expNonPositiveF32, expNonPositiveF32x4, hsumf, reduce4f } from "./common";
import { widenKv } from "./kv-store";

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

/** x [n] = 0 (vector stores: memory.fill is a call into the runtime, once per query vector and segment) */
function zeroFloats(x: usize, n: i32): void {
  let d = 0;
  if (ASC_FEATURE_SIMD) for (; d + 4 <= n; d += 4) v128.store(x + (<usize>d << 2), i32x4.splat(0));
  for (; d < n; d++) store<f32>(x + (<usize>d << 2), 0);
}

/** max of x [n] (order-free, so the SIMD lanes give the scalar result). */
function maxOf(x: usize, n: i32): f32 {
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
function expInPlace(x: usize, n: i32, max: f32): f32 {
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

/** Keys per attention segment: longer rows split into segments that run as separate tasks, then merge (attention_merge). */
export const SEGMENT_KEYS: i32 = 256;

/** SEGMENT_KEYS for the host, which lays out the tasks. */
export function attention_segment_keys(): i32 {
  return SEGMENT_KEYS;
}

/**
 * Query rows per tile: a task scores the rows of one tile (consecutive rows of one sequence) against each K/V block
 * it widens, so a prefill widens each key once per tile instead of once per row (llama.cpp ggml_compute_forward_
 * flash_ext_f16 takes one query row per pass; the tile is FlashAttention's Q block). 32 rather than 16: half the
 * widening and per-task work per score (smollm2, 2,048 rows: 5-6% of the op); the scores, 32 x groupSize x 256 floats
 * (96 KiB for 3 heads a KV head), stay in L2.
 */
export const TILE_ROWS: i32 = 32;

/** TILE_ROWS for the host, which cuts the tiles. */
export function attention_tile_rows(): i32 {
  return TILE_ROWS;
}

/** Floats per query vector's scores in scratch: SEGMENT_KEYS and a pad, so the rows do not all map to the same L1 sets. */
const SCORE_STRIDE: i32 = SEGMENT_KEYS + 16;

/** Keys widened at a time (K, then V): 64 rows of headDim 64 are 16 KiB of f32, L1-resident. */
const KV_BLOCK_KEYS: i32 = 64;

/**
 * Floats of per-thread scratch the attention kernels use for `groupSize` query heads per KV head: the scores of a
 * tile's query vectors over a segment [TILE_ROWS * groupSize, SEGMENT_KEYS], their sums of exp, and one block of
 * widened K or V rows [KV_BLOCK_KEYS, headDim].
 */
export function attention_scratch_floats(groupSize: i32, headDim: i32): i32 {
  return TILE_ROWS * groupSize * (SCORE_STRIDE + 1) + KV_BLOCK_KEYS * headDim;
}

/** Floats of one task's partial result per query head: max score, sum of exp, then the unnormalized output [headDim]. */
// @ts-ignore: decorator
@inline function partialFloats(headDim: i32): i32 {
  return headDim + 2;
}

/**
 * dst[t] = (q . k_t) * scale for the m widened K rows at kRows [m, headDim]; every score is dotF32's sum (4 lanes over
 * the dims, then (l0 + l2) + (l1 + l3)), however the keys are grouped, so the bits never depend on the tiling.
 */
function scoreKeys(dst: usize, qv: usize, kRows: usize, m: i32, headDim: i32, scale: f32): void {
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
function scoreKeys2(dstA: usize, dstB: usize, qa: usize, qb: usize, kRows: usize, m: i32, headDim: i32, scale: f32): void {
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
function accumulateWeighted(o: usize, e: usize, vRows: usize, numKeys: i32, headDim: i32): void {
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
function accumulateWeighted2(oa: usize, ob: usize, ea: usize, eb: usize, vRows: usize, numKeys: i32, headDim: i32): void {
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
function accumulateTail(o: usize, e: usize, vRows: usize, numKeys: i32, headDim: i32, from: i32): void {
  for (let d = from; d < headDim; d++) {
    const od = o + (<usize>d << 2);
    let acc = load<f32>(od);
    for (let t = 0; t < numKeys; t++) acc = acc + load<f32>(e + (<usize>t << 2)) * load<f32>(vRows + (<usize>(t * headDim + d) << 2));
    store<f32>(od, acc);
  }
}

/**
 * out, q [rows, numHeads * headDim] f32. rowInfo i32 [numTaskRows, 4] = (row, numKeys, blockTable byte address, first
 * partial index or -1). tasks i32 [numTasks, 4] = (first rowInfo index, number of rows, KV head, segment): one task =
 * a tile of up to TILE_ROWS consecutive rows of one sequence, the numHeads / numKvHeads query heads sharing one KV head,
 * and one segment of SEGMENT_KEYS keys. Each K/V row of the segment is widened once per task and used by every query
 * vector of the tile (rows x heads); the causal cut applies only where a row's keys end inside the segment (the
 * diagonal). A row of one segment writes its output; a row of several writes, per segment and head, (max, sum of exp,
 * unnormalized output) at partials + (first partial + KV head * segments + segment) * groupSize * (headDim + 2)
 * floats, and attention_merge combines them. Every score, exp and sum is taken per query row in the same order
 * whatever the tile (see scoreKeys): the bits depend on neither the batch, the tiling nor the thread count.
 * window > 0 (a sliding-window layer, gemma3): a row with numKeys keys sees only keys numKeys - window .. numKeys - 1;
 * within a segment its keys start after keysBefore, which depends on the row alone (so the bits still do not depend on
 * the tile), K/V blocks before every row's window are not read, and the host leaves out the segments before a row's
 * window (its merge starts at its first segment).
 * firstKeys != 0 (a bidirectional window, gemma-embedding): i32 [numTaskRows], row r sees keys firstKeys[r] ..
 * numKeys - 1 instead (window is then 0).
 * Tasks [taskStart, taskEnd); scratch: attention_scratch_floats per thread.
 */
export function attention_f16(
  out: usize, q: usize, kLayer: usize, vLayer: usize, rowInfo: usize, tasks: usize, partials: usize,
  numHeads: i32, numKvHeads: i32, headDim: i32, blockSize: i32, scale: f32, window: i32, firstKeys: usize, scratch: usize, taskStart: i32, taskEnd: i32,
): void {
  attentionTiles(false, out, q, kLayer, vLayer, rowInfo, tasks, partials, numHeads, numKvHeads, headDim, blockSize, scale, window, firstKeys, scratch, taskStart, taskEnd);
}

/** attention_f16 over the 8-bit cache (kv_store_q8's layout): the same tasks, partials and order of sums. */
export function attention_q8(
  out: usize, q: usize, kLayer: usize, vLayer: usize, rowInfo: usize, tasks: usize, partials: usize,
  numHeads: i32, numKvHeads: i32, headDim: i32, blockSize: i32, scale: f32, window: i32, firstKeys: usize, scratch: usize, taskStart: i32, taskEnd: i32,
): void {
  attentionTiles(true, out, q, kLayer, vLayer, rowInfo, tasks, partials, numHeads, numKvHeads, headDim, blockSize, scale, window, firstKeys, scratch, taskStart, taskEnd);
}

/** Keys of segment `segment` that rowInfo entry `r` attends to (0 when its keys end before the segment). */
// @ts-ignore: decorator
@inline function keysIn(rowInfo: usize, r: i32, segment: i32): i32 {
  return max(0, min(SEGMENT_KEYS, load<i32>(rowInfo + (<usize>r << 4), 4) - segment * SEGMENT_KEYS));
}

/** Keys at the start of segment `segment` before rowInfo entry r's sliding window (0 without a window). */
// @ts-ignore: decorator
@inline function keysBefore(rowInfo: usize, r: i32, segment: i32, window: i32, firstKeys: usize): i32 {
  if (firstKeys != 0) return max(0, load<i32>(firstKeys + (<usize>r << 2)) - segment * SEGMENT_KEYS);
  if (window <= 0) return 0;
  return max(0, load<i32>(rowInfo + (<usize>r << 4), 4) - window - segment * SEGMENT_KEYS);
}

/** Where query head g of rowInfo entry r accumulates for this segment: its output row, or its partial after (max, sum). */
// @ts-ignore: decorator
@inline function tileOutput(out: usize, partials: usize, rowInfo: usize, r: i32, segment: i32, qDim: i32, kvHead: i32, groupSize: i32, g: i32, headDim: i32): usize {
  const info = rowInfo + (<usize>r << 4);
  const base = load<i32>(info, 12);
  if (base < 0) return out + (<usize>(load<i32>(info) * qDim + (kvHead * groupSize + g) * headDim) << 2);
  const segments = (load<i32>(info, 4) + SEGMENT_KEYS - 1) / SEGMENT_KEYS;
  const partial = base + kvHead * segments + segment;
  return partials + (<usize>((partial * groupSize + g) * partialFloats(headDim) + 2) << 2);
}

/** Query head g of tile row i's vector [headDim] in q. */
// @ts-ignore: decorator
@inline function queryVector(q: usize, rowInfo: usize, first: i32, i: i32, qDim: i32, kvHead: i32, groupSize: i32, g: i32, headDim: i32): usize {
  return q + (<usize>(load<i32>(rowInfo + (<usize>(first + i) << 4)) * qDim + (kvHead * groupSize + g) * headDim) << 2);
}

/** The attention tasks over either cache type (`q8` is a constant in each caller, so each gets its own loop). */
// @ts-ignore: decorator
@inline function attentionTiles(
  q8: bool, out: usize, q: usize, kLayer: usize, vLayer: usize, rowInfo: usize, tasks: usize, partials: usize,
  numHeads: i32, numKvHeads: i32, headDim: i32, blockSize: i32, scale: f32, window: i32, firstKeys: usize, scratch: usize, taskStart: i32, taskEnd: i32,
): void {
  const qDim = numHeads * headDim;
  const groupSize = numHeads / numKvHeads;
  const segBytes = <usize>(SCORE_STRIDE << 2);
  const sums = scratch + <usize>(TILE_ROWS * groupSize) * segBytes;
  const rows = sums + (<usize>(TILE_ROWS * groupSize) << 2);
  const rowBytes = <usize>(headDim << 2);
  for (let task = taskStart; task < taskEnd; task++) {
    const tk = tasks + (<usize>task << 4);
    const first = load<i32>(tk);
    const numTileRows = load<i32>(tk, 4);
    const kvHead = load<i32>(tk, 8);
    const segment = load<i32>(tk, 12);
    const k0 = segment * SEGMENT_KEYS;
    const numVec = numTileRows * groupSize;
    const blockTable = <usize>load<i32>(rowInfo + (<usize>first << 4), 8);
    // a row's keys in this segment are [lo, n): lo = keysBefore (its sliding window), n = keysIn (the causal cut)
    let nMax = 0;
    let loMin = SEGMENT_KEYS;
    for (let i = 0; i < numTileRows; i++) {
      const n = keysIn(rowInfo, first + i, segment);
      const lo = keysBefore(rowInfo, first + i, segment, window, firstKeys);
      if (lo >= n) continue;
      nMax = max(nMax, n);
      loMin = min(loMin, lo);
    }
    // scores of every query vector of the tile, one widened block of K rows at a time
    for (let kb = 0; kb < nMax; kb += KV_BLOCK_KEYS) {
      const nb = min(KV_BLOCK_KEYS, nMax - kb);
      if (kb + nb <= loMin) continue; // before every row's window
      for (let j = 0; j < nb; j++) {
        widenKv(q8, rows + <usize>j * rowBytes, kLayer, blockTable, k0 + kb + j, kvHead, numKvHeads, headDim, blockSize);
      }
      // the tile's query vectors (row-major: v = row * groupSize + head) two at a time, across rows too (an odd
      // groupSize would leave one head per row to the one-vector kernel); a pair shares the keys both see, and each
      // scores the keys only it sees alone (at most a few, on the diagonal or a window's edge)
      for (let v = 0; v < numVec; v += 2) {
        const i = v / groupSize;
        const m = min(nb, keysIn(rowInfo, first + i, segment) - kb);
        const a = max(0, keysBefore(rowInfo, first + i, segment, window, firstKeys) - kb);
        const qa = queryVector(q, rowInfo, first, i, qDim, kvHead, groupSize, v - i * groupSize, headDim);
        const sa = scratch + <usize>v * segBytes + (<usize>kb << 2);
        if (v + 1 == numVec) {
          if (m > a) scoreKeys(sa + (<usize>a << 2), qa, rows + <usize>a * rowBytes, m - a, headDim, scale);
          continue;
        }
        const i2 = (v + 1) / groupSize;
        const m2 = min(nb, keysIn(rowInfo, first + i2, segment) - kb);
        const a2 = max(0, keysBefore(rowInfo, first + i2, segment, window, firstKeys) - kb);
        const qb = queryVector(q, rowInfo, first, i2, qDim, kvHead, groupSize, v + 1 - i2 * groupSize, headDim);
        const sb = sa + segBytes;
        const c0 = max(a, a2), c1 = min(m, m2);
        if (c0 >= c1) {
          if (m > a) scoreKeys(sa + (<usize>a << 2), qa, rows + <usize>a * rowBytes, m - a, headDim, scale);
          if (m2 > a2) scoreKeys(sb + (<usize>a2 << 2), qb, rows + <usize>a2 * rowBytes, m2 - a2, headDim, scale);
          continue;
        }
        if (a < c0) scoreKeys(sa + (<usize>a << 2), qa, rows + <usize>a * rowBytes, c0 - a, headDim, scale);
        if (a2 < c0) scoreKeys(sb + (<usize>a2 << 2), qb, rows + <usize>a2 * rowBytes, c0 - a2, headDim, scale);
        scoreKeys2(sa + (<usize>c0 << 2), sb + (<usize>c0 << 2), qa, qb, rows + <usize>c0 * rowBytes, c1 - c0, headDim, scale);
        if (c1 < m) scoreKeys(sa + (<usize>c1 << 2), qa, rows + <usize>c1 * rowBytes, m - c1, headDim, scale);
        if (c1 < m2) scoreKeys(sb + (<usize>c1 << 2), qb, rows + <usize>c1 * rowBytes, m2 - c1, headDim, scale);
      }
    }
    // per query vector: exp(score - max) in place of the scores, its sum, and its zeroed output
    for (let i = 0; i < numTileRows; i++) {
      const n = keysIn(rowInfo, first + i, segment);
      const lo = keysBefore(rowInfo, first + i, segment, window, firstKeys);
      if (n <= lo) continue;
      const partial = load<i32>(rowInfo + (<usize>(first + i) << 4), 12) >= 0;
      for (let g = 0; g < groupSize; g++) {
        const sg = scratch + <usize>(i * groupSize + g) * segBytes + (<usize>lo << 2);
        const max = maxOf(sg, n - lo);
        const sum = expInPlace(sg, n - lo, max);
        const o = tileOutput(out, partials, rowInfo, first + i, segment, qDim, kvHead, groupSize, g, headDim);
        if (partial) {
          store<f32>(o - 8, max);
          store<f32>(o - 4, sum);
        } else {
          store<f32>(sums + (<usize>(i * groupSize + g) << 2), sum);
        }
        zeroFloats(o, headDim);
      }
    }
    // V one widened block at a time, added to every query vector's output in key order
    for (let kb = 0; kb < nMax; kb += KV_BLOCK_KEYS) {
      const nb = min(KV_BLOCK_KEYS, nMax - kb);
      if (kb + nb <= loMin) continue;
      for (let j = 0; j < nb; j++) {
        widenKv(q8, rows + <usize>j * rowBytes, vLayer, blockTable, k0 + kb + j, kvHead, numKvHeads, headDim, blockSize);
      }
      // query vectors in pairs as for the scores; a vector's keys go in key order (those before the pair's shared
      // ones, the shared ones, those after), so each output lane adds the same terms in the same order
      for (let v = 0; v < numVec; v += 2) {
        const i = v / groupSize;
        const m = min(nb, keysIn(rowInfo, first + i, segment) - kb);
        const a = max(0, keysBefore(rowInfo, first + i, segment, window, firstKeys) - kb);
        const oa = tileOutput(out, partials, rowInfo, first + i, segment, qDim, kvHead, groupSize, v - i * groupSize, headDim);
        const ea = scratch + <usize>v * segBytes + (<usize>kb << 2);
        if (v + 1 == numVec) {
          if (m > a) accumulateWeighted(oa, ea + (<usize>a << 2), rows + <usize>a * rowBytes, m - a, headDim);
          continue;
        }
        const i2 = (v + 1) / groupSize;
        const m2 = min(nb, keysIn(rowInfo, first + i2, segment) - kb);
        const a2 = max(0, keysBefore(rowInfo, first + i2, segment, window, firstKeys) - kb);
        const ob = tileOutput(out, partials, rowInfo, first + i2, segment, qDim, kvHead, groupSize, v + 1 - i2 * groupSize, headDim);
        const eb = ea + segBytes;
        const c0 = max(a, a2), c1 = min(m, m2);
        if (c0 >= c1) {
          if (m > a) accumulateWeighted(oa, ea + (<usize>a << 2), rows + <usize>a * rowBytes, m - a, headDim);
          if (m2 > a2) accumulateWeighted(ob, eb + (<usize>a2 << 2), rows + <usize>a2 * rowBytes, m2 - a2, headDim);
          continue;
        }
        if (a < c0) accumulateWeighted(oa, ea + (<usize>a << 2), rows + <usize>a * rowBytes, c0 - a, headDim);
        if (a2 < c0) accumulateWeighted(ob, eb + (<usize>a2 << 2), rows + <usize>a2 * rowBytes, c0 - a2, headDim);
        accumulateWeighted2(oa, ob, ea + (<usize>c0 << 2), eb + (<usize>c0 << 2), rows + <usize>c0 * rowBytes, c1 - c0, headDim);
        if (c1 < m) accumulateWeighted(oa, ea + (<usize>c1 << 2), rows + <usize>c1 * rowBytes, m - c1, headDim);
        if (c1 < m2) accumulateWeighted(ob, eb + (<usize>c1 << 2), rows + <usize>c1 * rowBytes, m2 - c1, headDim);
      }
    }
    for (let i = 0; i < numTileRows; i++) {
      if (keysIn(rowInfo, first + i, segment) <= keysBefore(rowInfo, first + i, segment, window, firstKeys) || load<i32>(rowInfo + (<usize>(first + i) << 4), 12) >= 0) continue;
      for (let g = 0; g < groupSize; g++) {
        const o = tileOutput(out, partials, rowInfo, first + i, segment, qDim, kvHead, groupSize, g, headDim);
        scaleInPlace(o, 1 / load<f32>(sums + (<usize>(i * groupSize + g) << 2)), headDim);
      }
    }
  }
}

/** x[d] *= s */
function scaleInPlace(x: usize, s: f32, n: i32): void {
  for (let d = 0; d < n; d++) store<f32>(x + (<usize>d << 2), load<f32>(x + (<usize>d << 2)) * s);
}

/**
 * Combines the segments of rows whose keys were split: merges i32 [numMerges, 4] = (row, KV head, first partial index,
 * number of segments); per query head out = sum_s w_s o_s / sum_s w_s l_s with w_s = exp(m_s - max_s m_s), segments in
 * order. Merges [taskStart, taskEnd).
 */
export function attention_merge(out: usize, partials: usize, merges: usize, numHeads: i32, numKvHeads: i32, headDim: i32, taskStart: i32, taskEnd: i32): void {
  const qDim = numHeads * headDim;
  const groupSize = numHeads / numKvHeads;
  const stride = partialFloats(headDim);
  for (let task = taskStart; task < taskEnd; task++) {
    const mg = merges + <usize>(task << 4);
    const row = load<i32>(mg);
    const kvHead = load<i32>(mg, 4);
    const first = load<i32>(mg, 8);
    const numSegments = load<i32>(mg, 12);
    for (let g = 0; g < groupSize; g++) {
      const o = out + (<usize>(row * qDim + (kvHead * groupSize + g) * headDim) << 2);
      let max: f32 = -Infinity;
      for (let s = 0; s < numSegments; s++) max = Mathf.max(max, load<f32>(partials + (<usize>(((first + s) * groupSize + g) * stride) << 2)));
      memory.fill(o, 0, <usize>(headDim << 2));
      let sum: f32 = 0;
      for (let s = 0; s < numSegments; s++) {
        const pg = partials + (<usize>(((first + s) * groupSize + g) * stride) << 2);
        const w = expF32(load<f32>(pg) - max);
        sum += w * load<f32>(pg, 4);
        axpy(o, pg + 8, w, headDim);
      }
      scaleInPlace(o, 1 / sum, headDim);
    }
  }
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
