/**
 * WGSL for the ops that decode weights: matmul (matvec and batched) and embed, generated per weight layout (see
 * ../weight-layouts.ts for the unit_dot / unit_get contract).
 */
import { WGSL_BYTES, type GpuWeightLayout } from "../weight-layouts.ts";

export const WORKGROUP_SIZE = 64;

/** Output rows (j) and input rows (r) per workgroup; 16 lanes share one output row. */
export const MATMUL_TILE_J = 4;
export const MATMUL_TILE_R = 8;

/**
 * A workgroup owns a tile of 4 output rows x 8 input rows: lane l of an output row's 16 sums units l, l + 16, ...
 * for each input row of the tile (the weight unit is decoded once per tile row, then read from cache), then a fixed
 * 16-lane tree. out[r, j] is computed in the same order whichever tile r falls in, so it never depends on numRows.
 * params words: rows, cols, numRows, rowWords, unitsPerRow, outStride, outCol0, groupsX
 */
export function matmulWgsl(layout: GpuWeightLayout): string {
  return /* wgsl */ `
struct Params { rows: u32, cols: u32, numRows: u32, rowWords: u32, unitsPerRow: u32, outStride: u32, outCol0: u32, groupsX: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
const TJ: u32 = ${MATMUL_TILE_J}u;
const TR: u32 = ${MATMUL_TILE_R}u;
const LANES: u32 = 16u;
var<workgroup> part: array<f32, ${MATMUL_TILE_R * 64}>; // [TR, 64 threads]
${WGSL_BYTES}
${layout.wgsl}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) t: u32) {
  let id = wg.x + wg.y * p.groupsX;
  let jTiles = (p.rows + TJ - 1u) / TJ;
  let r0 = (id / jTiles) * TR;
  if (r0 >= p.numRows) { return; }
  let nr = min(TR, p.numRows - r0);
  let j = (id % jTiles) * TJ + t / LANES;
  let lane = t % LANES;
  // the partial sums live in workgroup memory (each thread its own slots): a dynamically indexed private array is
  // lowered to select chains by some compilers (lavapipe: minutes of LLVM time)
  for (var rr = 0u; rr < TR; rr++) { part[rr * 64u + t] = 0.0; }
  if (j < p.rows) {
    for (var u = lane; u < p.unitsPerRow; u += LANES) {
      for (var rr = 0u; rr < nr; rr++) { part[rr * 64u + t] += unit_dot(j, u, (r0 + rr) * p.cols + u * UNIT); }
    }
  }
  workgroupBarrier();
  for (var s = LANES / 2u; s > 0u; s >>= 1u) {
    if (lane < s) {
      for (var rr = 0u; rr < nr; rr++) { part[rr * 64u + t] += part[rr * 64u + t + s]; }
    }
    workgroupBarrier();
  }
  if (lane == 0u && j < p.rows) {
    for (var rr = 0u; rr < nr; rr++) { O[(r0 + rr) * p.outStride + p.outCol0 + j] = part[rr * 64u + t]; }
  }
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
