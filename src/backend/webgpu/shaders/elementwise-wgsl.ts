/**
 * WGSL of the small ops: RMSNorm (one workgroup per row, fixed tree reduction), RoPE (cos/sin from a table the
 * backend fills in f64 on the CPU, so positions far from 0 lose no precision), SiLU-gate, add, add-bias, KV store and
 * row gather (one thread per element). Inputs are read-only bindings and the output `O` read_write; Dawn rejects a
 * buffer bound both ways in one dispatch, so an op whose output aliases an input runs `inPlaceVariant` instead.
 * Each op names its params words in order; `groupsX` folds large 1-D grids into 2-D (65535 groups per dimension).
 */

/** `code` writing its output into input `into` (for out === into): O's binding goes, `into` becomes read_write. */
export function inPlaceVariant(code: string, into: string): string {
  return code
    .replace(/^.*var<storage, read_write> O: array<f32>;\n/m, "")
    .replace(`var<storage, read> ${into}:`, `var<storage, read_write> ${into}:`)
    .replaceAll("O[", `${into}[`);
}

const GLOBAL_ID = /* wgsl */ `
fn flat_id(wg: vec3u, t: u32) -> u32 { return (wg.x + wg.y * p.groupsX) * 64u + t; }`;

/** A one-thread-per-element op: the params struct, bindings 1.. ("read> X: array<f32>", after the params at 0), and `body` run for every
 * element index `i` below the `n` param. */
function perElementShader(params: string, bindings: readonly string[], body: string): string {
  const decls = bindings.map((b, k) => `@group(0) @binding(${k + 1}) var<storage, ${b};`).join("\n");
  return /* wgsl */ `
struct Params { ${params} }
@group(0) @binding(0) var<uniform> p: Params;
${decls}
${GLOBAL_ID}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) t: u32) {
  let i = flat_id(wg, t);
  if (i >= p.n) { return; }
${body}
}`;
}

/** params: dim, numRows, eps (f32) */
export const RMS_NORM_WGSL = /* wgsl */ `
struct Params { dim: u32, numRows: u32, eps: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> Wt: array<f32>;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
var<workgroup> part: array<f32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) t: u32) {
  let r = wg.x + wg.y * 65535u;
  if (r >= p.numRows) { return; }
  let base = r * p.dim;
  var acc = 0.0;
  for (var i = t; i < p.dim; i += 64u) { let v = X[base + i]; acc += v * v; }
  part[t] = acc;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (t < s) { part[t] += part[t + s]; }
    workgroupBarrier();
  }
  let scale = 1.0 / sqrt(part[0] / f32(p.dim) + p.eps);
  for (var i = t; i < p.dim; i += 64u) { O[base + i] = X[base + i] * scale * Wt[i]; }
}`;

/** params: numHeads, headDim, half (= ropeDim / 2), neox, total (= rows * numHeads * half), groupsX */
export const ROPE_WGSL = /* wgsl */ `
struct Params { numHeads: u32, headDim: u32, half: u32, neox: u32, total: u32, groupsX: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> pos: array<u32>;
@group(0) @binding(2) var<storage, read> cs: array<vec2f>; // [maxPos, half] (cos, sin)
@group(0) @binding(3) var<storage, read_write> X: array<f32>;
${GLOBAL_ID}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) t: u32) {
  let idx = flat_id(wg, t);
  if (idx >= p.total) { return; }
  let i = idx % p.half;
  let rh = idx / p.half; // row * numHeads + head
  let r = rh / p.numHeads;
  let c = cs[pos[r] * p.half + i];
  let base = rh * p.headDim;
  var a = base + 2u * i; var b = a + 1u;
  if (p.neox != 0u) { a = base + i; b = a + p.half; }
  let x0 = X[a]; let x1 = X[b];
  X[a] = x0 * c.x - x1 * c.y;
  X[b] = x0 * c.y + x1 * c.x;
}`;

/** params: n, groupsX */
export const SILU_MUL_WGSL = perElementShader("n: u32, groupsX: u32",
  ["read> G: array<f32>", "read> U: array<f32>", "read_write> O: array<f32>"], `
  let g = G[i];
  O[i] = g / (1.0 + exp(-g)) * U[i];`);

/** params: n, groupsX. GeGLU with GELU's tanh approximation, as x * sigmoid(2u) (the WASM kernel's form). */
export const GELU_MUL_WGSL = perElementShader("n: u32, groupsX: u32",
  ["read> G: array<f32>", "read> U: array<f32>", "read_write> O: array<f32>"], `
  let g = G[i];
  let u2 = 1.5957691216057308 * g * (1.0 + 0.044715 * g * g);
  O[i] = g / (1.0 + exp(-u2)) * U[i];`);

/** params: n, groupsX, s (f32): X[i] *= s in place */
export const SCALE_WGSL = perElementShader("n: u32, groupsX: u32, s: f32",
  ["read_write> X: array<f32>"], `
  X[i] *= p.s;`);

/** params: n, groupsX */
export const ADD_WGSL = perElementShader("n: u32, groupsX: u32",
  ["read> A: array<f32>", "read> B: array<f32>", "read_write> O: array<f32>"], `
  O[i] = A[i] + B[i];`);

/** params: n (= numRows * cols), cols, groupsX */
export const ADD_BIAS_WGSL = perElementShader("n: u32, cols: u32, groupsX: u32",
  ["read> Bias: array<f32>", "read_write> X: array<f32>"], `
  X[i] += Bias[i % p.cols];`);

/** params: n (= numSlots * kvDim), kvDim, groupsX */
export const KV_STORE_WGSL = perElementShader("n: u32, kvDim: u32, groupsX: u32",
  ["read> slots: array<u32>", "read> k: array<f32>", "read> v: array<f32>", "read_write> K: array<f32>", "read_write> V: array<f32>"], `
  let dst = slots[i / p.kvDim] * p.kvDim + i % p.kvDim;
  K[dst] = k[i];
  V[dst] = v[i];`);

/** params: n (= numRows * cols), cols, groupsX. dst must not alias src (the backend gathers through a temporary). */
export const GATHER_ROWS_WGSL = perElementShader("n: u32, cols: u32, groupsX: u32",
  ["read> rowIds: array<u32>", "read> S: array<f32>", "read_write> D: array<f32>"], `
  D[i] = S[rowIds[i / p.cols] * p.cols + i % p.cols];`);

/**
 * Top-k of each row, one workgroup per row: k rounds of a parallel argmax, each over the values strictly after the
 * previous pick in (value descending, id ascending) order, so nothing is stored per pick. Writes (id, value bits)
 * pairs; a round that finds nothing above -3e38 writes id 0xffffffff (and so do the rounds after it).
 * params: cols, k, numRows
 */
export const TOP_K_WGSL = /* wgsl */ `
struct Params { cols: u32, k: u32, numRows: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> S: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<u32>; // [numRows, k, (id, value bits)]
var<workgroup> bestV: array<f32, 64>;
var<workgroup> bestI: array<u32, 64>;
const NONE: u32 = 0xffffffffu;
const NEG_BIG: f32 = -3.0e38;
fn before(v: f32, i: u32, w: f32, j: u32) -> bool { return v > w || (v == w && i < j); }
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) t: u32) {
  let r = wg.x + wg.y * 65535u;
  if (r >= p.numRows) { return; }
  var prevV = 0.0;
  var prevI = NONE;
  for (var n = 0u; n < p.k; n++) {
    var v = NEG_BIG;
    var i = NONE;
    for (var c = t; c < p.cols; c += 64u) {
      let x = S[r * p.cols + c];
      let eligible = n == 0u || before(prevV, prevI, x, c);
      if (eligible && x > NEG_BIG && (i == NONE || before(x, c, v, i))) { v = x; i = c; }
    }
    bestV[t] = v; bestI[t] = i;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
      if (t < s && bestI[t + s] != NONE && (bestI[t] == NONE || before(bestV[t + s], bestI[t + s], bestV[t], bestI[t]))) {
        bestV[t] = bestV[t + s]; bestI[t] = bestI[t + s];
      }
      workgroupBarrier();
    }
    prevV = bestV[0]; prevI = bestI[0];
    workgroupBarrier();
    if (t == 0u) {
      O[(r * p.k + n) * 2u] = prevI;
      O[(r * p.k + n) * 2u + 1u] = bitcast<u32>(prevV);
    }
  }
}`;
