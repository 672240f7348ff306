/**
 * The pool of KV cache blocks (vLLM BlockPool): reference counts, a free queue in LRU order, and the prefix-cache map
 * from a full block's hash to the block that holds it. Pure integers; only the model runner maps block ids to memory.
 *
 * A free block may still be cached (its hash stays in the map) until it is handed out again: the free queue is ordered
 * so the least recently freed block is reused first, which keeps the most useful prefixes alive longest.
 */

import type { BlockHashBytes } from "../kv-events/block-hash.ts";

/** A prefix-cache key: the hex of the block's digest, with "@group" for KV cache groups after the first. */
export type BlockHash = string;

/** What leaves the cache, for KV events (vLLM BlockPool._maybe_evict_cached_block, reset_prefix_cache). */
export interface BlockPoolEvents {
  /** a cached block was handed out again: its digest left this pool */
  evicted(digest: BlockHashBytes, group: number): void;
  cleared(): void;
}

interface CachedBlock {
  readonly key: BlockHash;
  readonly digest: BlockHashBytes | null;
  readonly group: number;
}

export class BlockPool {
  readonly numBlocks: number;
  /** [numBlocks] how many requests use each block */
  private readonly refCounts: Int32Array;
  /** [numBlocks] the hash of the full block's tokens, when it is in the prefix cache */
  private readonly hashes: (CachedBlock | null)[];
  /** free block ids, oldest first (a Map keeps insertion order and deletes in O(1)) */
  private readonly freeQueue = new Map<number, true>();
  private readonly cached = new Map<BlockHash, number>();

  constructor(numBlocks: number, private readonly events: BlockPoolEvents | null = null) {
    if (!Number.isInteger(numBlocks) || numBlocks < 1) throw new Error(`block pool: need at least one block (got ${numBlocks})`);
    this.numBlocks = numBlocks;
    this.refCounts = new Int32Array(numBlocks);
    this.hashes = new Array<CachedBlock | null>(numBlocks).fill(null);
    for (let id = 0; id < numBlocks; id++) this.freeQueue.set(id, true);
  }

  get numFreeBlocks(): number {
    return this.freeQueue.size;
  }

  /** fraction of blocks in use, 0..1 (cached-but-free blocks count as free, as in vLLM) */
  usage(): number {
    return 1 - this.freeQueue.size / this.numBlocks;
  }

  /** Takes `count` blocks from the head of the free queue (evicting their cache entries), or null if too few. */
  allocate(count: number): number[] | null {
    if (count > this.freeQueue.size) return null;
    const ids: number[] = [];
    const it = this.freeQueue.keys();
    for (let i = 0; i < count; i++) ids.push(it.next().value as number);
    for (const id of ids) {
      this.freeQueue.delete(id);
      this.evict(id);
      this.refCounts[id] = 1;
    }
    return ids;
  }

  /** The block that caches `hash`, if any (free or in use). */
  lookup(hash: BlockHash): number | null {
    return this.cached.get(hash) ?? null;
  }

  /** Another request starts using a cached block: take it off the free queue if nobody held it. */
  touch(blockId: number): void {
    if (this.refCounts[blockId] === 0) this.freeQueue.delete(blockId);
    this.refCounts[blockId]! += 1;
  }

  /** Drops one reference to each block; blocks nobody uses go to the tail of the free queue in the given order. */
  release(blockIds: readonly number[]): void {
    for (const id of blockIds) {
      const refs = this.refCounts[id]! - 1;
      if (refs < 0) throw new Error(`block pool: block ${id} released more often than taken`);
      this.refCounts[id] = refs;
      if (refs === 0) this.freeQueue.set(id, true);
    }
  }

  /**
   * Records that a full block now holds the tokens of `hash`; the first block to hold a hash keeps it. `digest` and
   * `group` are what an eviction reports (KV events). Returns whether the block entered the cache.
   */
  cache(blockId: number, hash: BlockHash, digest: BlockHashBytes | null = null, group = 0): boolean {
    if (this.hashes[blockId] !== null || this.cached.has(hash)) return false;
    this.hashes[blockId] = { key: hash, digest, group };
    this.cached.set(hash, blockId);
    return true;
  }

  /** Forget every cached prefix (blocks in use keep their contents). */
  resetPrefixCache(): void {
    this.cached.clear();
    this.hashes.fill(null);
    this.events?.cleared();
  }

  /** Free blocks that still hold a cached prefix, next to be evicted first (vLLM free_block_queue order); `limit`
   * bounds how many free blocks are visited, hashed or not. */
  *evictableCached(limit: number): Generator<[number, BlockHash]> {
    let visited = 0;
    for (const id of this.freeQueue.keys()) {
      if (visited++ >= limit) return;
      const cached = this.hashes[id];
      if (cached !== null && cached !== undefined) yield [id, cached.key];
    }
  }

  refCount(blockId: number): number {
    return this.refCounts[blockId]!;
  }

  /** The digest a cached block holds (null: not cached, or cached without one). */
  digestOf(blockId: number): BlockHashBytes | null {
    return this.hashes[blockId]?.digest ?? null;
  }

  private evict(blockId: number): void {
    const cached = this.hashes[blockId];
    if (cached === null || cached === undefined) return;
    this.hashes[blockId] = null;
    if (this.cached.get(cached.key) === blockId) this.cached.delete(cached.key);
    if (cached.digest !== null) this.events?.evicted(cached.digest, cached.group);
  }
}
