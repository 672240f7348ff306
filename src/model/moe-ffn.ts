/**
 * The mixture-of-experts FFN of the batched forward, over the Backend seam (llama.cpp build_moe_ffn with
 * ggml_mul_mat_id underneath): for the rows x [numRows, dim] of one pass,
 *   router logits = x.Wrouter [numRows, expertCount] -> read back -> routeExperts (moe-routing.ts): k experts and
 *   weights per row ;
 *   per chosen expert e, its rows gathered (token order, as mul_mat_id's matrix_rows): y_e = down_e(silu(gate_e.x) *
 *   up_e.x), so each expert's weights are read once per pass and the experts nobody chose are never read ;
 *   y rows scattered to their (row, slot) places [numRows * k, dim] ; out = sum over slots of weight * y (slot order).
 * gpt-oss (oaiExperts): the router and each expert's gate / up / down add their biases (ggml_add_id), and the
 * activation is swiglu_oai (alpha 1.702, limit 7, as llama-graph.cpp build_moe_ffn's LLM_FFN_SWIGLU_OAI_MOE).
 * A row's result depends only on its own routing and the per-row matmuls: batch invariant.
 */
import type { Backend, DeviceBuffer, Weight, WeightSource } from "../backend/backend.ts";
import type { MoeConfig } from "./model-config.ts";
import { groupByExpert, routeExperts } from "./moe-routing.ts";
import { expertRows, type LayerWeights } from "./weights.ts";

/** gpt-oss's swiglu_oai constants (llama-graph.cpp build_moe_ffn) */
const OAI_ALPHA = 1.702;
const OAI_LIMIT = 7;

/** gpt-oss: the router's bias [expertCount] and each expert's gate / up [expertHiddenDim] and down [dim] biases at [e] */
export interface ExpertBiases {
  readonly router: Weight;
  readonly gate: readonly Weight[];
  readonly up: readonly Weight[];
  readonly down: readonly Weight[];
}

/** One layer's router and experts, loaded: gate / up / down of expert e at [e]. */
export interface ExpertHandles {
  readonly router: Weight;
  readonly gate: readonly Weight[];
  readonly up: readonly Weight[];
  readonly down: readonly Weight[];
  /** granitemoe (shared): the always-on expert */
  readonly shared: { readonly gate: Weight; readonly up: Weight; readonly down: Weight } | null;
  /** gpt-oss (oaiExperts): the biases; null: none */
  readonly biases: ExpertBiases | null;
}

/**
 * Loads a layer's router and each expert's rows as weights of their own (views of the stacked tensors; each expert's
 * rows are contiguous, so the backend repacks them as it does any matrix).
 */
export function loadExperts(moe: MoeConfig, layer: LayerWeights, load: (w: WeightSource) => Weight): ExpertHandles {
  const each = (w: WeightSource | null | undefined): Weight[] => Array.from({ length: moe.expertCount }, (_, e) => load(expertRows(w!, e, moe.expertCount)));
  const shared = layer.ffnGateShexp == null ? null : { gate: load(layer.ffnGateShexp), up: load(layer.ffnUpShexp!), down: load(layer.ffnDownShexp!) };
  const biases = layer.ffnGateInpBias == null ? null : {
    router: load(layer.ffnGateInpBias), gate: each(layer.ffnGateExpsBias), up: each(layer.ffnUpExpsBias), down: each(layer.ffnDownExpsBias),
  };
  return { router: load(layer.ffnGateInp!), gate: each(layer.ffnGateExps), up: each(layer.ffnUpExps), down: each(layer.ffnDownExps), shared, biases };
}

/** Activation buffers of the routed FFN for up to numTokens rows. */
export interface MoeScratch {
  readonly logits: DeviceBuffer; // [numTokens, expertCount]
  readonly xe: DeviceBuffer; // [numTokens, dim] one expert's gathered rows
  readonly gate: DeviceBuffer; // [numTokens, expertHiddenDim]
  readonly up: DeviceBuffer; // [numTokens, expertHiddenDim]
  readonly act: DeviceBuffer; // [numTokens, expertHiddenDim]
  readonly ye: DeviceBuffer; // [numTokens, dim] one expert's output rows
  readonly slots: DeviceBuffer; // [numTokens * k, dim] every (row, slot)'s expert output
  readonly sharedGate: DeviceBuffer; // [numTokens, sharedHiddenDim] (granitemoe shared expert; else 1 float)
  readonly sharedUp: DeviceBuffer; // [numTokens, sharedHiddenDim]
  /** a one-row pass (decode of one sequence): each slot's gate, up and activation [expertHiddenDim] */
  readonly slotGate: readonly DeviceBuffer[];
  readonly slotUp: readonly DeviceBuffer[];
  /** each slot's down projection [dim] */
  readonly slotDown: readonly DeviceBuffer[];
  /** a one-row pass's k slot outputs side by side [k, dim], apart from `slots`: a scatter keeps its destination's
   * other rows, so on a model split over wasm32 memories the first scatter in a layer's memory copies the whole
   * destination there (split-wasm-backend.ts readIn), k rows here against every row of the last prefill in `slots` */
  readonly slotRows: DeviceBuffer;
}

export function allocMoeScratch(b: Backend, moe: MoeConfig, dim: number, numTokens: number): MoeScratch {
  const h = moe.expertHiddenDim;
  return {
    logits: b.alloc(numTokens * moe.expertCount), xe: b.alloc(numTokens * dim), gate: b.alloc(numTokens * h), up: b.alloc(numTokens * h),
    act: b.alloc(numTokens * h), ye: b.alloc(numTokens * dim), slots: b.alloc(numTokens * moe.expertUsedCount * dim),
    sharedGate: b.alloc(Math.max(1, numTokens * (moe.sharedHiddenDim ?? 0))), sharedUp: b.alloc(Math.max(1, numTokens * (moe.sharedHiddenDim ?? 0))),
    slotGate: Array.from({ length: moe.expertUsedCount }, () => b.alloc(h)), slotUp: Array.from({ length: moe.expertUsedCount }, () => b.alloc(h)),
    slotDown: Array.from({ length: moe.expertUsedCount }, () => b.alloc(dim)), slotRows: b.alloc(moe.expertUsedCount * dim),
  };
}

export function freeMoeScratch(b: Backend, s: MoeScratch): void {
  for (const buffer of Object.values(s)) for (const one of Array.isArray(buffer) ? buffer : [buffer]) b.free(one);
}

/** Why a backend cannot run mixture-of-experts models (gpt-oss's experts: `oai`), or null when it can. */
export function moeUnsupported(b: Backend, oai = false): string | null {
  if (b.scatterRows === undefined || b.weightedRowSum === undefined) {
    return `the ${b.name} backend does not run mixture-of-experts models (no routed-expert ops); use the CPU (WASM) backend`;
  }
  return oai && b.swigluOai === undefined ? `the ${b.name} backend does not run gpt-oss's experts (no swiglu_oai op); use the CPU (WASM) backend` : null;
}

/**
 * out [numRows, dim] = the routed experts' FFN of x [numRows, dim].
 * @example await moeFfn(backend, moe, dim, layer.experts, scratch, s.xb2, s.xb, n);
 */
export async function moeFfn(b: Backend, moe: MoeConfig, dim: number, w: ExpertHandles, s: MoeScratch, out: DeviceBuffer, x: DeviceBuffer, numRows: number): Promise<void> {
  const k = moe.expertUsedCount;
  const h = moe.expertHiddenDim;
  b.matmul(s.logits, w.router, x, numRows);
  const bias = w.biases;
  if (bias !== null) b.addBias(s.logits, bias.router, numRows);
  const { ids, weights } = routeExperts(await b.read(s.logits, numRows * moe.expertCount), numRows, moe);
  const oneRow = numRows === 1 && b.matmulShared !== undefined;
  if (oneRow) oneRowExperts(b, moe, dim, w, s, x, ids);
  else if (b.matmulGrouped) groupedExperts(b, moe, dim, w, s, x, ids);
  else for (const group of groupByExpert(ids, k, moe.expertCount)) {
    const count = group.rows.length;
    b.gatherRows(s.xe, x, group.rows, dim);
    const gate = w.gate[group.expert]!;
    const up = w.up[group.expert]!;
    if (b.matmulShared) b.matmulShared([s.gate, s.up], [gate, up], s.xe, count);
    else {
      b.matmul(s.gate, gate, s.xe, count);
      b.matmul(s.up, up, s.xe, count);
    }
    if (bias !== null) {
      b.addBias(s.gate, bias.gate[group.expert]!, count);
      b.addBias(s.up, bias.up[group.expert]!, count);
      b.swigluOai!(s.act, s.gate, s.up, count * h, OAI_ALPHA, OAI_LIMIT);
    } else {
      b.siluMul(s.act, s.gate, s.up, count * h);
    }
    b.matmul(s.ye, w.down[group.expert]!, s.act, count);
    if (bias !== null) b.addBias(s.ye, bias.down[group.expert]!, count);
    b.scatterRows!(s.slots, s.ye, group.slots, dim);
  }
  b.weightedRowSum!(out, oneRow ? s.slotRows : s.slots, weights, numRows, k, dim);
  // granitemoe (shared): out += the shared expert's SwiGLU FFN of x (llama.cpp granite.cpp: moe_out + ffn_shexp)
  if (w.shared !== null) {
    const sh = moe.sharedHiddenDim!;
    b.matmul(s.sharedGate, w.shared.gate, x, numRows);
    b.matmul(s.sharedUp, w.shared.up, x, numRows);
    b.siluMul(s.sharedGate, s.sharedGate, s.sharedUp, numRows * sh);
    b.matmul(s.ye, w.shared.down, s.sharedGate, numRows);
    b.add(out, out, s.ye, numRows * dim);
  }
}

/**
 * Several rows (a prefill chunk, a batch of decodes): the rows routed to each expert gathered one expert after
 * another, as many experts at a time as the scratch's rows hold (a chunk's N rows x k slots take about k batches), and
 * each batch's gate and up as one grouped matmul (every expert's rows quantized once for both, all their row groups
 * in one dispatch: ggml's mul_mat_id over the chosen experts), one activation over all the rows, the downs as one
 * grouped matmul, the rows scattered to their (row, slot) places; gpt-oss's biases are added inside the grouped ops.
 * Each expert's bits are those of the per-expert path.
 */
function groupedExperts(b: Backend, moe: MoeConfig, dim: number, w: ExpertHandles, s: MoeScratch, x: DeviceBuffer, ids: Int32Array): void {
  const h = moe.expertHiddenDim;
  const bias = w.biases;
  const capacity = Math.floor(s.xe.length / dim);
  const groups = groupByExpert(ids, moe.expertUsedCount, moe.expertCount);
  for (let i = 0; i < groups.length;) {
    let end = i;
    let rows = 0;
    while (end < groups.length && rows + groups[end]!.rows.length <= capacity) rows += groups[end++]!.rows.length;
    const batch = groups.slice(i, end);
    i = end;
    const offsets = new Int32Array(batch.length + 1);
    const rowIds = new Int32Array(rows);
    const slotIds = new Int32Array(rows);
    batch.forEach((g, j) => {
      rowIds.set(g.rows, offsets[j]!);
      slotIds.set(g.slots, offsets[j]!);
      offsets[j + 1] = offsets[j]! + g.rows.length;
    });
    const of = (ws: readonly Weight[]) => batch.map((g) => ws[g.expert]!);
    b.gatherRows(s.xe, x, rowIds, dim);
    b.matmulGrouped!([s.gate, s.up], [of(w.gate), of(w.up)], s.xe, offsets, bias === null ? null : [of(bias.gate), of(bias.up)]);
    if (bias === null) b.siluMul(s.act, s.gate, s.up, rows * h);
    else b.swigluOai!(s.act, s.gate, s.up, rows * h, OAI_ALPHA, OAI_LIMIT);
    b.matmulGrouped!([s.ye], [of(w.down)], s.act, offsets, bias === null ? null : [of(bias.down)]);
    b.scatterRows!(s.slots, s.ye, slotIds, dim);
  }
}

/**
 * A one-row pass (decode of one sequence): every routed expert reads the same row, so the k experts' gate and up go to
 * the backend as one shared-input matmul (the row quantized once, all 2k weights' row groups split over the threads
 * in one dispatch, as ggml's mul_mat_id shares src1's conversion), then every slot's activation, then the k downs as
 * one dispatch of k inputs (matmulEach). Each matmul's bits are those of the per-expert path.
 */
function oneRowExperts(b: Backend, moe: MoeConfig, dim: number, w: ExpertHandles, s: MoeScratch, x: DeviceBuffer, ids: Int32Array): void {
  const k = moe.expertUsedCount;
  const h = moe.expertHiddenDim;
  const bias = w.biases;
  const outs: DeviceBuffer[] = [];
  const ws: Weight[] = [];
  for (let slot = 0; slot < k; slot++) {
    outs.push(s.slotGate[slot]!, s.slotUp[slot]!);
    ws.push(w.gate[ids[slot]!]!, w.up[ids[slot]!]!);
  }
  b.matmulShared!(outs, ws, x, 1);
  // each slot's activation over its gate buffer (read element by element before it is written)
  for (let slot = 0; slot < k; slot++) {
    const e = ids[slot]!;
    const gate = s.slotGate[slot]!;
    const up = s.slotUp[slot]!;
    if (bias !== null) {
      b.addBias(gate, bias.gate[e]!, 1);
      b.addBias(up, bias.up[e]!, 1);
      b.swigluOai!(gate, gate, up, h, OAI_ALPHA, OAI_LIMIT);
    } else {
      b.siluMul(gate, gate, up, h);
    }
  }
  const downs = Array.from(ids.subarray(0, k), (e) => w.down[e]!);
  if (b.matmulEach) b.matmulEach(s.slotDown, downs, s.slotGate, 1);
  else downs.forEach((down, slot) => b.matmul(s.slotDown[slot]!, down, s.slotGate[slot]!, 1));
  for (let slot = 0; slot < k; slot++) {
    if (bias !== null) b.addBias(s.slotDown[slot]!, bias.down[ids[slot]!]!, 1);
    b.scatterRows!(s.slotRows, s.slotDown[slot]!, Int32Array.of(slot), dim);
  }
}
