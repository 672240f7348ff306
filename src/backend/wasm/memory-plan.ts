/**
 * Where a model goes when it does not fit in one wasm32 memory (4 GiB): a contiguous range of layers per memory, each
 * memory holding those layers' weights and KV blocks plus its own activations; token_embd with the first layer, the
 * output head with the last. A model whose weights, KV pool and activations fit in one memory gets one memory (and
 * runs exactly as before). Pure: sizes in, plan out, so the split is tested without allocating gigabytes.
 * The ranges minimize the fullest memory (the linear partition, by bisection on the capacity with a greedy fill).
 * @example const plan = planMemories({ tensors, numLayers: 32, kvBytesPerLayer: 32 << 20, reserveBytes: 256 << 20 });
 */
import type { GgmlType } from "../../tensor/dtypes.ts";
import { err, ok, type Result } from "../../util/result.ts";
import { MAX_MEMORIES } from "./pool-ops.ts";
import { weightHeapBytes } from "./wasm-weight.ts";

/** wasm32: 65536 pages of 64 KiB */
export const WASM32_MEMORY_BYTES = 2 ** 32;
/** what a memory keeps free besides the plan's figures: the kernels' static data, the pool's control block, the
 * allocator's alignment and free lists */
export const MEMORY_SLACK_BYTES = 16 * 2 ** 20;

export interface PlannedWeight {
  readonly name: string;
  readonly type: GgmlType;
  readonly rows: number;
  readonly cols: number;
}

export interface MemoryPlanRequest {
  /** every distinct weight tensor of the model, llama.cpp names (blk.N.* for layer N) */
  readonly tensors: readonly PlannedWeight[];
  readonly numLayers: number;
  /** KV cache bytes per layer (K and V) of the pool the engine will ask for */
  readonly kvBytesPerLayer: number;
  /** activations and scratch every memory holds (each memory has its own copy of the step's buffers) */
  readonly reserveBytes: number;
  /** bytes one memory may hold: 4 GiB, less in tests (FENNEC_WASM_MEMORY_BYTES forces a split) */
  readonly memoryBytes?: number;
}

export interface MemoryPlan {
  readonly numMemories: number;
  /** [numLayers]: the memory of layer l's weights and KV blocks */
  readonly layerMemory: readonly number[];
  /** [numMemories]: the first layer of each memory (its layers are firstLayer[m] .. firstLayer[m + 1] - 1) */
  readonly firstLayer: readonly number[];
  /** [numMemories]: heap bytes of the weights placed in each memory */
  readonly weightBytes: readonly number[];
  /** the bytes one memory may hold, as planned */
  readonly memoryBytes: number;
}

/** The layer of a llama.cpp tensor name (blk.N.*), or null for the model's token_embd / output / output_norm. */
export function layerOfTensor(name: string): number | null {
  const m = /^blk\.(\d+)\./.exec(name);
  return m === null ? null : Number(m[1]);
}

/** The memory a weight is loaded into: its layer's, the first for token_embd, the last layer's for the head. */
export function memoryOfTensor(plan: MemoryPlan, name: string): number {
  const layer = layerOfTensor(name);
  if (layer !== null && layer < plan.layerMemory.length) return plan.layerMemory[layer]!;
  return name.startsWith("token_embd") ? 0 : plan.numMemories - 1;
}

/** Memories used by the greedy fill of `costs` at `capacity` each (Infinity when one item alone does not fit). */
function greedyRanges(costs: readonly number[], fixed: number, capacity: number): number[] | null {
  const first: number[] = [0];
  let load = fixed;
  for (let l = 0; l < costs.length; l++) {
    if (fixed + costs[l]! > capacity) return null;
    if (load + costs[l]! > capacity) {
      first.push(l);
      load = fixed;
    }
    load += costs[l]!;
  }
  return first;
}

export function planMemories(request: MemoryPlanRequest): Result<MemoryPlan> {
  const memoryBytes = request.memoryBytes ?? WASM32_MEMORY_BYTES;
  const { numLayers } = request;
  const layerWeights = new Array<number>(numLayers).fill(0);
  let embedBytes = 0;
  let headBytes = 0;
  for (const t of request.tensors) {
    const bytes = weightHeapBytes(t.type, t.rows, t.cols);
    const layer = layerOfTensor(t.name);
    if (layer !== null && layer < numLayers) layerWeights[layer]! += bytes;
    else if (t.name.startsWith("token_embd")) embedBytes += bytes;
    else headBytes += bytes;
  }
  // a layer's cost is its weights and KV blocks; token_embd rides with the first layer, the head with the last
  const costs = layerWeights.map((w) => w + request.kvBytesPerLayer);
  if (numLayers > 0) {
    costs[0]! += embedBytes;
    costs[numLayers - 1]! += headBytes;
  }
  const fixed = request.reserveBytes + MEMORY_SLACK_BYTES;
  const total = costs.reduce((a, b) => a + b, 0);
  let first = greedyRanges(costs, fixed, memoryBytes);
  if (first === null || first.length > MAX_MEMORIES) {
    const worst = Math.max(...costs);
    const gib = (n: number) => (n / 2 ** 30).toFixed(2);
    return err(fixed + worst > memoryBytes
      ? `one layer of this model (${gib(worst)} GiB of weights and KV cache, plus ${gib(fixed)} GiB of activations) does not fit in a ${gib(memoryBytes)} GiB wasm32 memory; lower --kv-cache-memory or --max-num-batched-tokens`
      : `this model needs more than ${MAX_MEMORIES} wasm32 memories of ${gib(memoryBytes)} GiB (${gib(total)} GiB of weights and KV cache); lower --kv-cache-memory`);
  }
  if (first.length > 1) {
    // the fewest memories, then the smallest capacity that still needs no more: the fullest memory is as empty as it can be
    let lo = fixed + Math.max(...costs, Math.ceil(total / first.length));
    let hi = memoryBytes;
    while (hi - lo > 2 ** 20) {
      const mid = Math.floor((lo + hi) / 2);
      const ranges = greedyRanges(costs, fixed, mid);
      if (ranges !== null && ranges.length <= first.length) hi = mid;
      else lo = mid;
    }
    first = greedyRanges(costs, fixed, hi)!;
  }
  const layerMemory = new Array<number>(numLayers);
  const weightBytes = new Array<number>(first.length).fill(0);
  for (let m = 0; m < first.length; m++) {
    const end = first[m + 1] ?? numLayers;
    for (let l = first[m]!; l < end; l++) {
      layerMemory[l] = m;
      weightBytes[m]! += layerWeights[l]!;
    }
  }
  weightBytes[0]! += embedBytes;
  weightBytes[first.length - 1]! += headBytes;
  return ok({ numMemories: first.length, layerMemory, firstLayer: first, weightBytes, memoryBytes });
}
