/**
 * WGSL for the ops that decode weights: matmul (matvec and batched) and embed, generated per weight layout (see
 * ../weight-layouts.ts for the unit_dot / unit_get contract).
 */
import { WGSL_BYTES, type GpuWeightLayout } from "../weight-layouts.ts";

export const WORKGROUP_SIZE = 64;

/** Input rows (r) per workgroup: a weight row is decoded once per tile and read from cache for the other rows. */
export const MATMUL_TILE_R = 8;

/** Output rows per workgroup for `lanes` threads per output row (64 threads per workgroup). */
export function matmulTileJ(lanes: number): number {
  return 64 / lanes;
}

/**
 * Matmul, params words: rows, cols, numRows, rowWords, unitsPerRow, outStride, outCol0, groupsX.
 * A workgroup owns a tile of (64 / lanes) output rows x 8 input rows.
 *  - lanes = 16 (GPUs): lane l of an output row sums units l, l + 16, ... for each input row of the tile, then a
 *    fixed 16-lane tree in workgroup memory (coalesced reads, parallel over a long row).
 *  - lanes = 1 (CPU adapters such as lavapipe, which run a workgroup's threads as SIMD lanes and pay for every
 *    barrier): each thread sums its output row's units in order, no workgroup memory, no barrier.
 * Either way out[r, j] is computed in the same order whichever tile r falls in, so it never depends on numRows.
 */
export function matmulWgsl(layout: GpuWeightLayout, lanes: 1 | 16): string {
  const head = /* wgsl */ `
struct Params { rows: u32, cols: u32, numRows: u32, rowWords: u32, unitsPerRow: u32, outStride: u32, outCol0: u32, groupsX: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
const TJ: u32 = ${matmulTileJ(lanes)}u;
const TR: u32 = ${MATMUL_TILE_R}u;
${WGSL_BYTES}
${layout.wgsl}`;
  if (lanes === 1) {
    return head + /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) t: u32) {
  let id = wg.x + wg.y * p.groupsX;
  let jTiles = (p.rows + TJ - 1u) / TJ;
  let r0 = (id / jTiles) * TR;
  let j = (id % jTiles) * TJ + t;
  if (r0 >= p.numRows || j >= p.rows) { return; }
  let nr = min(TR, p.numRows - r0);
  for (var rr = 0u; rr < nr; rr++) {
    var acc = 0.0;
    for (var u = 0u; u < p.unitsPerRow; u++) { acc += unit_dot(j, u, (r0 + rr) * p.cols + u * UNIT); }
    O[(r0 + rr) * p.outStride + p.outCol0 + j] = acc;
  }
}`;
  }
  return head + /* wgsl */ `
const LANES: u32 = 16u;
var<workgroup> part: array<f32, ${MATMUL_TILE_R * 64}>; // [TR, 64 threads]
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
