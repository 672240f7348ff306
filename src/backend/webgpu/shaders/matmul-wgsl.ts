/**
 * WGSL for the ops that decode weights: matmul (matvec and batched) and embed, generated per weight layout (see
 * ../weight-layouts.ts for the unit_dot / unit_get contract).
 * Matmul: one 64-thread workgroup per (output row j, input row r); thread t sums units t, t + 64, ... then a fixed tree
 * reduction, so out row r never depends on numRows (batch invariance) nor on what else was dispatched.
 */
import { WGSL_BYTES, type GpuWeightLayout } from "../weight-layouts.ts";

export const WORKGROUP_SIZE = 64;

/** params words: rows, cols, numRows, rowWords, unitsPerRow, outStride, outCol0, groupsX */
export function matmulWgsl(layout: GpuWeightLayout): string {
  return /* wgsl */ `
struct Params { rows: u32, cols: u32, numRows: u32, rowWords: u32, unitsPerRow: u32, outStride: u32, outCol0: u32, groupsX: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
var<workgroup> part: array<f32, 64>;
${WGSL_BYTES}
${layout.wgsl}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) t: u32) {
  let id = wg.x + wg.y * p.groupsX;
  let j = id % p.rows;
  let r = id / p.rows;
  if (r >= p.numRows) { return; }
  var acc = 0.0;
  for (var u = t; u < p.unitsPerRow; u += 64u) { acc += unit_dot(j, u, r * p.cols + u * UNIT); }
  part[t] = acc;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (t < s) { part[t] += part[t + s]; }
    workgroupBarrier();
  }
  if (t == 0u) { O[r * p.outStride + p.outCol0 + j] = part[0]; }
}`;
}

/** params words: cols, rowWords, numTokens, row0, chunkRows, groupsX. One workgroup per token; ids outside the chunk skip. */
export function embedWgsl(layout: GpuWeightLayout): string {
  return /* wgsl */ `
struct Params { cols: u32, rowWords: u32, numTokens: u32, row0: u32, chunkRows: u32, groupsX: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
// unit_dot reads X; embed never calls it, so this binding is not part of the pipeline's layout
@group(1) @binding(0) var<storage, read> X: array<f32>;
${WGSL_BYTES}
${layout.wgsl}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) t: u32) {
  let i = wg.x + wg.y * p.groupsX;
  if (i >= p.numTokens) { return; }
  let id = ids[i];
  if (id < p.row0 || id >= p.row0 + p.chunkRows) { return; }
  let row = id - p.row0;
  for (var e = t; e < p.cols; e += 64u) { O[i * p.cols + e] = unit_get(row, e / UNIT, e % UNIT); }
}`;
}
