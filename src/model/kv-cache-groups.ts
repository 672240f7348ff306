/**
 * KV cache groups (vLLM's hybrid KV cache manager, kv_cache_utils.py _get_kv_cache_groups_uniform_page_size): the
 * layers of one attention type (full, or one sliding window) are cut into groups of the same number of layers, so one
 * block of any group has the same bytes. Every group has its own block table over ONE shared block pool; the backend's
 * KV storage has `groupSize` layer slots, and layer l keeps its K/V in slot `layerSlot[l]` of the blocks of its group
 * `layerGroup[l]`. A sliding group then frees the blocks behind its window (engine/kv-cache-manager.ts) while the
 * full-attention group keeps its own.
 *
 *   gemma3-270m, 18 layers (15 sliding, 3 full), group size 3:
 *   group 0 full   [5, 11, 17]          group 1 sliding [0, 6, 12]   group 2 sliding [1, 7, 13]  ...
 *   group 5 sliding [4, 10, 16]         slot j of a block of group g holds layer groups[g].layers[j]
 *
 * Without sliding layers, or with the hybrid manager off, there is one group of every layer (slot l = layer l): the
 * layout, block counts and bits of a single block table.
 */
import { layerSlidingWindow, type ModelConfig } from "./model-config.ts";

export interface KvCacheGroup {
  /** [<= groupSize] the layers in this group; layers[j] sits in slot j */
  readonly layers: readonly number[];
  /** 0: full attention (every block kept); > 0: the sliding window in tokens (blocks behind it are freed) */
  readonly slidingWindow: number;
}

export interface KvCacheGroups {
  readonly groups: readonly KvCacheGroup[];
  /** layer slots per block (the backend's numLayers); a group with fewer layers pads (vLLM's padding layers) */
  readonly groupSize: number;
  /** [numLayers] group of each layer */
  readonly layerGroup: Int32Array;
  /** [numLayers] slot of each layer in its group's blocks */
  readonly layerSlot: Int32Array;
}

function fromGroups(groups: readonly KvCacheGroup[], numLayers: number): KvCacheGroups {
  const layerGroup = new Int32Array(numLayers); // [numLayers]
  const layerSlot = new Int32Array(numLayers); // [numLayers]
  groups.forEach((g, gi) => g.layers.forEach((l, j) => { layerGroup[l] = gi; layerSlot[l] = j; }));
  return { groups, groupSize: Math.max(...groups.map((g) => g.layers.length)), layerGroup, layerSlot };
}

/** One group holding every layer (no hybrid manager): block b holds all layers' K/V of its positions. */
export function singleKvCacheGroup(numLayers: number): KvCacheGroups {
  return fromGroups([{ layers: Array.from({ length: numLayers }, (_, l) => l), slidingWindow: 0 }], numLayers);
}

/**
 * True when the model has layers of more than one attention type (the hybrid manager would give it several groups).
 * A bidirectional model (gemma-embedding) counts as one type: each prompt is one step and its rows read keys ahead,
 * so no window ever frees a block.
 */
export function hasSlidingLayers(config: ModelConfig): boolean {
  if (config.bidirectional === true) return false;
  for (let l = 0; l < config.numLayers; l++) if (layerSlidingWindow(config, l) > 0) return true;
  return false;
}

/**
 * The model's groups under the hybrid manager (vLLM's rule): layers bucketed by attention type (full first, then each
 * window), group size the smallest bucket, or the largest when it is under 1.5x the smallest; each bucket cut into
 * cdiv(n, size) groups as layers[i::numGroups] (interleaved, as vLLM does for pipeline stages).
 */
export function kvCacheGroups(config: ModelConfig): KvCacheGroups {
  const buckets = new Map<number, number[]>();
  for (let l = 0; l < config.numLayers; l++) {
    const w = layerSlidingWindow(config, l);
    const bucket = buckets.get(w) ?? [];
    bucket.push(l);
    buckets.set(w, bucket);
  }
  const ordered = [...buckets.entries()].sort((a, b) => a[0] - b[0]);
  const sizes = ordered.map(([, layers]) => layers.length);
  const minLayers = Math.min(...sizes);
  const maxLayers = Math.max(...sizes);
  const groupSize = maxLayers < minLayers * 1.5 ? maxLayers : minLayers;
  const groups: KvCacheGroup[] = [];
  for (const [slidingWindow, layers] of ordered) {
    const numGroups = Math.ceil(layers.length / groupSize);
    for (let i = 0; i < numGroups; i++) groups.push({ layers: layers.filter((_, k) => k % numGroups === i), slidingWindow });
  }
  return fromGroups(groups, config.numLayers);
}

/**
 * Blocks one group holds at most for a request of `numTokens` positions (vLLM SlidingWindowSpec.max_memory_usage_bytes:
 * the window, one step's new tokens and one block of slack; a full group: all of them).
 */
export function maxGroupBlocks(group: KvCacheGroup, numTokens: number, blockSize: number, maxNumBatchedTokens: number): number {
  const all = Math.ceil(numTokens / blockSize);
  if (group.slidingWindow === 0) return all;
  return Math.min(all, Math.ceil((group.slidingWindow - 1 + maxNumBatchedTokens) / blockSize) + 1);
}

/** One line for the start-up log: the groups, as vLLM's KV cache config describes them. */
export function describeKvCacheGroups(groups: KvCacheGroups): string {
  const parts = groups.groups.map((g, i) => `${i} ${g.slidingWindow === 0 ? "full" : `sliding ${g.slidingWindow}`} [${g.layers.join(",")}]`);
  return `KV cache groups: ${groups.groups.length} of ${groups.groupSize} layers (${parts.join("; ")})`;
}
