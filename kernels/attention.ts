// Paged attention over an f16 or 8-bit KV cache (GQA); the cache layout and its writers are kv-store.ts.
// One task = (tile of query rows, KV head, segment of up to SEGMENT_KEYS keys); tasks are split across threads, and rows
// with more than one segment merge them afterwards (attention_merge). Scores and widened rows live in per-thread scratch
// (the vector steps on them: attention-rows.ts).
import { expF32, F16_MAGIC } from "./common";
import { accumulateWeighted, accumulateWeighted2, expInPlace, maxOf, scoreKeys, scoreKeys2, zeroFloats } from "./attention-rows";
import { cacheOffset, q8BlockBytes, widenRow, widenRowQ8 } from "./kv-store";

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
 * sinks != 0 (gpt-oss): f32 [numHeads], each query head's sink logit, which joins its softmax's max and denominator and
 * has no value row (ggml_soft_max_ext with sinks; flash_attn_ext adds it once, after the keys). A row of one segment adds
 * it here; a row of several leaves it to attention_merge, so it is counted once whatever the split.
 * Tasks [taskStart, taskEnd); scratch: attention_scratch_floats per thread.
 */
export function attention_f16(
  out: usize, q: usize, kLayer: usize, vLayer: usize, rowInfo: usize, tasks: usize, partials: usize,
  numHeads: i32, numKvHeads: i32, headDim: i32, blockSize: i32, scale: f32, window: i32, firstKeys: usize, sinks: usize, scratch: usize, taskStart: i32, taskEnd: i32,
): void {
  attentionTiles(false, out, q, kLayer, vLayer, rowInfo, tasks, partials, numHeads, numKvHeads, headDim, blockSize, scale, window, firstKeys, sinks, scratch, taskStart, taskEnd);
}

/** attention_f16 over the 8-bit cache (kv_store_q8's layout): the same tasks, partials and order of sums. */
export function attention_q8(
  out: usize, q: usize, kLayer: usize, vLayer: usize, rowInfo: usize, tasks: usize, partials: usize,
  numHeads: i32, numKvHeads: i32, headDim: i32, blockSize: i32, scale: f32, window: i32, firstKeys: usize, sinks: usize, scratch: usize, taskStart: i32, taskEnd: i32,
): void {
  attentionTiles(true, out, q, kLayer, vLayer, rowInfo, tasks, partials, numHeads, numKvHeads, headDim, blockSize, scale, window, firstKeys, sinks, scratch, taskStart, taskEnd);
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
  numHeads: i32, numKvHeads: i32, headDim: i32, blockSize: i32, scale: f32, window: i32, firstKeys: usize, sinks: usize, scratch: usize, taskStart: i32, taskEnd: i32,
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
      widenKeys(q8, rows, kLayer, blockTable, k0 + kb, nb, kvHead, numKvHeads, headDim, blockSize);
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
        let max = maxOf(sg, n - lo);
        // a sink joins the max and, after the keys' exps, the sum (as ggml_compute_forward_soft_max_f32); rows of
        // several segments take it in attention_merge instead
        const sink = sinks != 0 && !partial;
        if (sink) max = Mathf.max(max, load<f32>(sinks + (<usize>(kvHead * groupSize + g) << 2)));
        let sum = expInPlace(sg, n - lo, max);
        if (sink) sum += expF32(load<f32>(sinks + (<usize>(kvHead * groupSize + g) << 2)) - max);
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
      widenKeys(q8, rows, vLayer, blockTable, k0 + kb, nb, kvHead, numKvHeads, headDim, blockSize);
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

/**
 * Widens keys pos .. pos + n - 1 of one KV head of one layer's K or V into f32 [n, headDim] at dst, a cache block at a
 * time: one block-table lookup and one division per block instead of per key (kv-store.ts widenKv), and in the f16
 * cache one run of contiguous halves per block (a KV head's rows of a block are adjacent). Same values as widenKv.
 */
// @ts-ignore: decorator
@inline function widenKeys(q8: bool, dst: usize, part: usize, blockTable: usize, pos: i32, n: i32, kvHead: i32, numKvHeads: i32, headDim: i32, blockSize: i32): void {
  let b = pos / blockSize;
  let offset = pos - b * blockSize;
  let out = dst;
  const rowBytes = <usize>(headDim << 2);
  while (n > 0) {
    const count = min(n, blockSize - offset);
    const block = load<i32>(blockTable + (<usize>b << 2));
    if (q8) {
      const base = part + <usize>block * q8BlockBytes(numKvHeads, headDim, blockSize);
      const scales = base + <usize>(blockSize * numKvHeads * headDim);
      let src = base + <usize>((kvHead * blockSize + offset) * headDim);
      for (let j = 0; j < count; j++) {
        widenRowQ8(out, src, load<f32>(scales + (<usize>(offset + j) << 2)), headDim);
        out += rowBytes;
        src += <usize>headDim;
      }
    } else {
      widenHalves(out, part + cacheOffset(block, offset, kvHead, numKvHeads, headDim, blockSize), count * headDim);
      out += <usize>count * rowBytes;
    }
    n -= count;
    offset = 0;
    b++;
  }
}

/**
 * f16 [n] -> f32 [n], the bits of kv-store.ts widenRow: 8 halves a load (one v128 load, two extends) with the mask
 * and the exponent factor held in registers over the run.
 */
function widenHalves(dst: usize, src: usize, n: i32): void {
  let d = 0;
  if (ASC_FEATURE_SIMD) {
    const mask = i32x4.splat(0x8fffe000);
    const magic = f32x4.splat(F16_MAGIC);
    for (; d + 8 <= n; d += 8) {
      const h = v128.load(src + (<usize>d << 1));
      const o = dst + (<usize>d << 2);
      v128.store(o, f32x4.mul(v128.and(i32x4.shl(i32x4.extend_low_i16x8_s(h), 13), mask), magic));
      v128.store(o, f32x4.mul(v128.and(i32x4.shl(i32x4.extend_high_i16x8_s(h), 13), mask), magic), 16);
    }
  }
  if (d < n) widenRow(dst + (<usize>d << 2), src + (<usize>d << 1), n - d);
}

/** x[d] *= s */
function scaleInPlace(x: usize, s: f32, n: i32): void {
  for (let d = 0; d < n; d++) store<f32>(x + (<usize>d << 2), load<f32>(x + (<usize>d << 2)) * s);
}

/**
 * Combines the segments of rows whose keys were split: merges i32 [numMerges, 4] = (row, KV head, first partial index,
 * number of segments); per query head out = sum_s w_s o_s / sum_s w_s l_s with w_s = exp(m_s - max_s m_s), segments in
 * order. sinks != 0: f32 [numHeads], each query head's sink logit joins max and, after the segments, the denominator
 * (as attention_f16 does for a row of one segment). Merges [taskStart, taskEnd).
 */
export function attention_merge(out: usize, partials: usize, merges: usize, numHeads: i32, numKvHeads: i32, headDim: i32, sinks: usize, taskStart: i32, taskEnd: i32): void {
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
      const sink: f32 = sinks != 0 ? load<f32>(sinks + (<usize>(kvHead * groupSize + g) << 2)) : 0;
      if (sinks != 0) max = Mathf.max(max, sink);
      memory.fill(o, 0, <usize>(headDim << 2));
      let sum: f32 = 0;
      for (let s = 0; s < numSegments; s++) {
        const pg = partials + (<usize>(((first + s) * groupSize + g) * stride) << 2);
        const w = expF32(load<f32>(pg) - max);
        sum += w * load<f32>(pg, 4);
        axpy(o, pg + 8, w, headDim);
      }
      if (sinks != 0) sum += expF32(sink - max);
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
