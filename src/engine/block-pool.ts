/**
 * The pool of KV cache blocks (vLLM BlockPool): reference counts, a free queue in LRU order, and the prefix-cache map
 * from a full block's hash to the block that holds it. Pure integers; only the model runner maps block ids to memory.
 *
 * A free block may still be cached (its hash stays in the map) until it is handed out again: the free queue is ordered
 * so the least recently freed block is reused first, which keeps the most useful prefixes alive longest.
 */

export type BlockHash = string;

export class BlockPool {
  readonly numBlocks: number;
  /** [numBlocks] how many requests use each block */
  private readonly refCounts: Int32Array;
  /** [numBlocks] the hash of the full block's tokens, when it is in the prefix cache */
  private readonly hashes: (BlockHash | null)[];
  /** free block ids, oldest first (a Map keeps insertion order and deletes in O(1)) */
  private readonly freeQueue = new Map<number, true>();
  private readonly cached = new Map<BlockHash, number>();

  constructor(numBlocks: number) {
    if (!Number.isInteger(numBlocks) || numBlocks < 1) throw new Error(`block pool: need at least one block (got ${numBlocks})`);
    this.numBlocks = numBlocks;
    this.refCounts = new Int32Array(numBlocks);
    this.hashes = new Array<BlockHash | null>(numBlocks).fill(null);
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

  /** Records that a full block now holds the tokens of `hash`; the first block to hold a hash keeps it. */
  cache(blockId: number, hash: BlockHash): void {
    if (this.hashes[blockId] !== null || this.cached.has(hash)) return;
    this.hashes[blockId] = hash;
    this.cached.set(hash, blockId);
  }

  /** Forget every cached prefix (blocks in use keep their contents). */
  resetPrefixCache(): void {
    this.cached.clear();
    this.hashes.fill(null);
  }

  /** Free blocks that still hold a cached prefix, next to be evicted first (vLLM free_block_queue order); `limit`
   * bounds how many free blocks are visited, hashed or not. */
  *evictableCached(limit: number): Generator<[number, BlockHash]> {
    let visited = 0;
    for (const id of this.freeQueue.keys()) {
      if (visited++ >= limit) return;
      const hash = this.hashes[id];
      if (hash !== null && hash !== undefined) yield [id, hash];
    }
  }

  refCount(blockId: number): number {
    return this.refCounts[blockId]!;
  }

  private evict(blockId: number): void {
    const hash = this.hashes[blockId];
    if (hash === null || hash === undefined) return;
    this.hashes[blockId] = null;
    if (this.cached.get(hash) === blockId) this.cached.delete(hash);
  }
}
