// The routed experts of a prefill chunk in one pool op, as ggml-cpu.c ggml_compute_forward_mul_mat_id runs every
// chosen expert's rows in one op: a table of entries, one per (expert weight, the rows routed to it), whose row
// groups of 4 are the op's work units, one entry after another. A unit range runs matmul_quant on the part of each
// entry it covers, with that entry's own token count and quantized rows, so every entry's bits are matmul's on its
// rows alone. The table lives in the kernels' memory (more entries than the pool's control block holds: gate and up
// of up to 128 experts), so the kernel reads it, not the threads' JS.
import { matmul_quant } from "./matmul-quant";

/** i32 per entry: matmul_quant's arguments in the pool's GROUP_ROW order (pool-ops.ts), then the entry's tokens and
 * its bias (f32 [rows], 0: none; gpt-oss's experts, ggml_add_id) */
const ENTRY_INTS: i32 = 15;
const KIND = 0, OUT = 1, WQ = 2, WS = 3, WM = 4, ROWS = 5, ZERO_POINT = 6, ACTS = 7, SA = 8, QS = 9, QUADS = 10, FIRST_UNIT = 11, DA = 12, TOKENS = 13, BIAS = 14;

// @ts-ignore: decorator
@inline function field(entry: usize, i: i32): i32 {
  return load<i32>(entry + (<usize>i << 2));
}

/** Work units [start, end) of the entries at table (numEntries x ENTRY_INTS i32, firstUnit ascending), cols shared. */
export function matmul_experts(table: usize, numEntries: i32, cols: i32, start: i32, end: i32, tmp: usize): void {
  for (let i = 0; i < numEntries; i++) {
    const e = table + <usize>(i * ENTRY_INTS * 4);
    const first = field(e, FIRST_UNIT);
    if (first >= end) return;
    const rows = field(e, ROWS);
    const from = max(start, first);
    const to = min(end, first + ((rows + 3) >> 2));
    if (from >= to) continue;
    const out = field(e, OUT);
    const numTokens = field(e, TOKENS);
    matmul_quant(field(e, KIND), out, field(e, WQ), field(e, WS), field(e, WM), field(e, ACTS), field(e, DA), field(e, SA),
      rows, cols, numTokens, field(e, ZERO_POINT), field(e, QS), field(e, QUADS), from - first, to - first, tmp);
    const bias = <usize>field(e, BIAS);
    if (bias == 0) continue;
    // then these rows' bias, as the separate add_bias after the matmul adds it (one f32 add per value)
    const r0 = (from - first) << 2;
    const r1 = min(rows, (to - first) << 2);
    for (let t = 0; t < numTokens; t++) {
      const o = <usize>out + (<usize>(t * rows) << 2);
      for (let r = r0; r < r1; r++) store<f32>(o + (<usize>r << 2), load<f32>(o + (<usize>r << 2)) + load<f32>(bias + (<usize>r << 2)));
    }
  }
}

/**
 * out [numRows, cols] = sum over slots s < k of weights[r * k + s] * src [numRows * k, cols] row r * k + s, in slot
 * order from 0, each product and each sum rounded to f32 (llama-graph.cpp build_moe_ffn: ggml_mul by the weights, then
 * ggml_add of each slot's view in turn): the same bits four lanes at a time as one by one.
 */
export function weighted_row_sum(out: usize, src: usize, weights: usize, numRows: i32, k: i32, cols: i32): void {
  const rowBytes = <usize>cols << 2;
  const vecCols = ASC_FEATURE_SIMD ? cols & ~3 : 0;
  for (let r = 0; r < numRows; r++) {
    const o = out + <usize>r * rowBytes;
    const s0 = src + <usize>(r * k) * rowBytes;
    const w0 = weights + (<usize>(r * k) << 2);
    if (ASC_FEATURE_SIMD) {
      for (let c = 0; c < vecCols; c += 4) {
        let sum = f32x4.splat(0);
        for (let j = 0; j < k; j++) sum = f32x4.add(sum, f32x4.mul(f32x4.splat(load<f32>(w0 + (<usize>j << 2))), v128.load(s0 + <usize>j * rowBytes + (<usize>c << 2))));
        v128.store(o + (<usize>c << 2), sum);
      }
    }
    for (let c = vecCols; c < cols; c++) {
      let sum: f32 = 0;
      for (let j = 0; j < k; j++) sum += load<f32>(w0 + (<usize>j << 2)) * load<f32>(s0 + <usize>j * rowBytes + (<usize>c << 2));
      store<f32>(o + (<usize>c << 2), sum);
    }
  }
}
