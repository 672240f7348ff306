/**
 * Causal attention over the paged KV cache (f32 K and V, per layer [numSlots, kvDim], slot = block * blockSize + offset).
 * One 64-thread workgroup per (query row, head): keys are scored 64 at a time (thread t scores key c0 + t), then an
 * online softmax folds the chunk into the running max / sum and the output accumulator, which threads own by dimension
 * (d = t, t + 64, ... up to headDim 256). Every row is computed the same way whatever the batch (batch invariance).
 *
 * E (the step's index data): [numEntries x (row, numKeys, blockTableWord, firstKey)] then the block tables; row attends
 * to keys firstKey .. numKeys - 1, the host's backend.ts attentionKeys (causal, a sliding window, bidirectional).
 * params words: numHeads, headDim, kvDim, qDim, blockSize, groupSize, numEntries, groupsX, scale (f32 bits), 0
 */
export const MAX_HEAD_DIM = 256;

export const ATTENTION_WGSL = /* wgsl */ `
struct Params { numHeads: u32, headDim: u32, kvDim: u32, qDim: u32, blockSize: u32, groupSize: u32, numEntries: u32, groupsX: u32, scale: f32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> E: array<u32>;
@group(0) @binding(2) var<storage, read> Q: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
@group(0) @binding(4) var<storage, read> K: array<f32>;
@group(0) @binding(5) var<storage, read> V: array<f32>;
var<workgroup> qs: array<f32, ${MAX_HEAD_DIM}>;
var<workgroup> sc: array<f32, 64>;
const NEG_BIG: f32 = -3.0e38;

fn slot_of(bt: u32, k: u32) -> u32 { return E[bt + k / p.blockSize] * p.blockSize + k % p.blockSize; }

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) t: u32) {
  let id = wg.x + wg.y * p.groupsX;
  if (id >= p.numEntries * p.numHeads) { return; }
  let e = id / p.numHeads;
  let h = id % p.numHeads;
  let row = E[4u * e];
  let numKeys = E[4u * e + 1u];
  let firstKey = E[4u * e + 3u];
  let bt = E[4u * e + 2u];
  let kvOff = (h / p.groupSize) * p.headDim;
  let qBase = row * p.qDim + h * p.headDim;
  for (var d = t; d < p.headDim; d += 64u) { qs[d] = Q[qBase + d]; }
  workgroupBarrier();
  var m = NEG_BIG;
  var s = 0.0;
  var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0); // dims t, t + 64, t + 128, t + 192
  for (var c0 = firstKey; c0 < numKeys; c0 += 64u) {
    let k = c0 + t;
    var score = NEG_BIG;
    if (k < numKeys) {
      let kb = slot_of(bt, k) * p.kvDim + kvOff;
      var dotv = 0.0;
      for (var d = 0u; d < p.headDim; d++) { dotv += qs[d] * K[kb + d]; }
      score = dotv * p.scale;
    }
    sc[t] = score;
    workgroupBarrier();
    let n = min(64u, numKeys - c0);
    var cmax = NEG_BIG;
    for (var j = 0u; j < n; j++) { cmax = max(cmax, sc[j]); }
    let mNew = max(m, cmax);
    let corr = exp(m - mNew);
    s *= corr;
    for (var q = 0u; q < 4u; q++) { acc[q] *= corr; }
    for (var j = 0u; j < n; j++) {
      let pj = exp(sc[j] - mNew);
      s += pj;
      let vb = slot_of(bt, c0 + j) * p.kvDim + kvOff;
      for (var q = 0u; q < 4u; q++) {
        let d = t + 64u * q;
        if (d < p.headDim) { acc[q] += pj * V[vb + d]; }
      }
    }
    m = mNew;
    workgroupBarrier();
  }
  for (var q = 0u; q < 4u; q++) {
    let d = t + 64u * q;
    if (d < p.headDim) { O[qBase + d] = acc[q] / s; }
  }
}`;
