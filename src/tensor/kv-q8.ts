/**
 * fennec's 8-bit KV cache rule, in plain TS (the reference backend's copy of kernels/attention.ts kv_store_q8): one
 * token's K (or V) row over all KV heads becomes int8 with one f32 scale, q = nearest(x * 127 / max|x|) with ties to
 * even, x' = q * scale, scale = max|x| / 127 (llama.cpp's q8_0 rule, one block per token row instead of per 32).
 * Served under vLLM's names fp8 / fp8_e4m3 (vLLM's CPU backend stores e4m3 with a scale of 1.0 without checkpoint
 * scales; int8 with a per-token scale keeps ~7 bits for any magnitude and widens in fewer WASM SIMD instructions).
 */

/** round half to even, as f32.nearest */
function nearestEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x - Math.trunc(x)) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** The row as the 8-bit cache gives it back: in place, f32 arithmetic step by step like the kernel. */
export function roundTripKvRowQ8(row: Float32Array): void {
  let amax = 0;
  for (let i = 0; i < row.length; i++) amax = Math.max(amax, Math.abs(row[i]!));
  amax = Math.fround(amax);
  const scale = Math.fround(amax / 127);
  const inv = amax > 0 ? Math.fround(127 / amax) : 0;
  for (let i = 0; i < row.length; i++) {
    let q = nearestEven(Math.fround(row[i]! * inv));
    if (Number.isNaN(q)) q = 0;
    q = Math.min(Math.max(q, -127), 127);
    row[i] = Math.fround(q * scale);
  }
}
