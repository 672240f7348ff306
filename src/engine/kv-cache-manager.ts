/**
 * The KV cache manager (vLLM KVCacheManager): which blocks a request holds, prefix-cache lookups by a hash chain over
 * full blocks, and the usage / query / hit counts the metrics read. Pure integers.
 *
 *   positions:  | 0 ... 15 | 16 ... 31 | 32 ... 40 _ _ _ |      (blockSize 16, 41 tokens)
 *   blocks:     [ full, hashed ][ full, hashed ][ partial ]      only full blocks enter the prefix cache
 *
 * A block is entered into the prefix cache only after its K/V have been computed, so a cache hit never reads a block
 * that is still being written in the same step. While a request computes a prompt block that another waiting request
 * could reuse, that block's hash is "pending": the scheduler defers the other request instead of computing it twice
 * (this is how the n > 1 children of a request share the prompt's blocks).
 *
 * KV cache groups (vLLM's hybrid KV cache manager, model/kv-cache-groups.ts): each group of layers has its own block
 * table per request over the ONE pool. A sliding-window group frees the blocks wholly behind its window as the request
 * advances (vLLM SlidingWindowManager.remove_skipped_blocks, by computed tokens) and keeps a null entry (NULL_BLOCK) in
 * their place; the full-attention group keeps every block. Prefix-cache entries are per group (vLLM
 * BlockHashWithGroupId: group 0 keeps the bare hash, so one group caches exactly as before).
 *
 *   window 40, blockSize 16, 100 tokens computed: position 100 sees keys 61..100
 *   full group:     [ b0 ][ b1 ][ b2 ][ b3 ][ b4 ][ b5 ][ b6 ]
 *   sliding group:  [null][null][null][ s3 ][ s4 ][ s5 ][ s6 ]     blocks 0-2 (positions 0..47 < 61) went back to the pool
 *
 * With one group (no sliding layers, or --disable-hybrid-kv-cache-manager) every path below is today's single table.
 */
import { BlockPool, type BlockHash } from "./block-pool.ts";
import type { RequestState } from "./request.ts";
import { maxGroupBlocks, singleKvCacheGroup, type KvCacheGroup, type KvCacheGroups } from "../model/kv-cache-groups.ts";
import { NULL_BLOCK } from "../model/model-batch.ts";
import type { KvEventQueue } from "../kv-events/kv-event-queue.ts";

export interface KvCacheConfig {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly enablePrefixCaching: boolean;
  /** the hybrid manager's groups (absent: one group of every layer) */
  readonly kvCacheGroups?: KvCacheGroups;
  /** a step's token budget: what a sliding group may need beyond its window (maxBlocksFor); absent: no bound */
  readonly maxNumBatchedTokens?: number;
}

export interface ComputedBlocks {
  /** [numGroups] each group's cached blocks for the first numTokens positions (a sliding group's start: NULL_BLOCK) */
  readonly blockTables: readonly (readonly number[])[];
  readonly numTokens: number;
}

/** vLLM BlockHashWithGroupId: a block's K/V differ per group, so is its cache key (group 0: the bare hash) */
const groupHash = (hash: BlockHash, group: number): BlockHash => (group === 0 ? hash : `${hash}@${group}`);

export class KvCacheManager {
  readonly blockSize: number;
  readonly enablePrefixCaching: boolean;
  readonly pool: BlockPool;
  readonly groups: readonly KvCacheGroup[];
  private readonly maxNumBatchedTokens: number;
  private readonly noComputedBlocks: ComputedBlocks;
  /** tokens looked up / found in the prefix cache since the last takeCounts() */
  private prefixQueries = 0;
  private prefixHits = 0;
  /** hash -> number of running requests that will compute that block */
  private readonly pending = new Map<BlockHash, number>();
  /** per request: the full prompt block indices it registered as pending */
  private readonly pendingOf = new Map<RequestState, BlockHash[]>();

  /** `events`: the engine's KV event list (null: --kv-events-config off) */
  constructor(config: KvCacheConfig, private readonly events: KvEventQueue | null = null) {
    this.blockSize = config.blockSize;
    this.enablePrefixCaching = config.enablePrefixCaching;
    this.pool = new BlockPool(config.numBlocks, events === null ? null : {
      evicted: (digest, group) => events.blockEvicted(digest, group),
      cleared: () => events.allCleared(),
    });
    this.groups = (config.kvCacheGroups ?? singleKvCacheGroup(1)).groups;
    this.maxNumBatchedTokens = config.maxNumBatchedTokens ?? Infinity;
    this.noComputedBlocks = { blockTables: this.groups.map(() => []), numTokens: 0 };
  }

  usage(): number {
    return this.pool.usage();
  }

  /** blocks needed to hold `numTokens` positions */
  blocksFor(numTokens: number): number {
    return Math.ceil(numTokens / this.blockSize);
  }

  /** blocks of the pool a request of `numTokens` positions holds at most, over every group (one group: blocksFor) */
  maxBlocksFor(numTokens: number): number {
    let total = 0;
    for (const g of this.groups) total += maxGroupBlocks(g, numTokens, this.blockSize, this.maxNumBatchedTokens);
    return total;
  }

  /** [numGroups] the request's block tables (created empty on first use) */
  tables(request: RequestState): number[][] {
    while (request.blockTables.length < this.groups.length) request.blockTables.push([]);
    return request.blockTables;
  }

  /** pool blocks the request holds now, over every group (null entries are not blocks) */
  numHeldBlocks(request: RequestState, group?: number): number {
    let n = 0;
    request.blockTables.forEach((table, g) => {
      if (group === undefined || group === g) for (const id of table) if (id !== NULL_BLOCK) n++;
    });
    return n;
  }

  /**
   * The longest run of cached full blocks at the start of the request's tokens that every group can use (vLLM
   * HybridKVCacheCoordinator.find_longest_cache_hit: full groups from the left, sliding groups from the right, shrunk
   * to the shortest until all agree). At least one token is always left to compute (its logits are needed), so a fully
   * cached prompt gives back its last block.
   */
  getComputedBlocks(request: RequestState): ComputedBlocks {
    // requests that already hold blocks (imported KV) start from those
    // MEAN / CLS pooling needs every position's hidden state (vLLM caches only for LAST pooling)
    if (!this.enablePrefixCaching || request.promptLogprobs !== null || request.blockTables.some((t) => t.length > 0) || (request.pooler !== null && request.pooler.type !== "LAST")) return this.noComputedBlocks;
    let numBlocks = Math.floor((request.numTokens - 1) / this.blockSize);
    let tables: number[][] = [];
    for (;;) {
      tables = this.groups.map((g, gi) => (g.slidingWindow === 0 ? this.fullHit(request, gi, numBlocks) : this.slidingHit(request, gi, g.slidingWindow, numBlocks)));
      const shortest = Math.min(...tables.map((t) => t.length));
      if (shortest === numBlocks) break;
      numBlocks = shortest;
    }
    return { blockTables: tables, numTokens: numBlocks * this.blockSize };
  }

  /** vLLM FullAttentionManager.find_longest_cache_hit: cached blocks from the first, up to `maxBlocks` */
  private fullHit(request: RequestState, group: number, maxBlocks: number): number[] {
    const ids: number[] = [];
    for (let i = 0; i < maxBlocks; i++) {
      const id = this.pool.lookup(groupHash(request.blockHash(i, this.blockSize)!, group));
      if (id === null) break;
      ids.push(id);
    }
    return ids;
  }

  /**
   * vLLM SlidingWindowManager.find_longest_cache_hit: the last run of cdiv(window - 1, blockSize) cached blocks ending at
   * most at `maxBlocks` (the blocks a row after them needs), nulls before it; or the cached run from block 0 if shorter.
   */
  private slidingHit(request: RequestState, group: number, window: number, maxBlocks: number): number[] {
    const needed = Math.ceil((window - 1) / this.blockSize);
    const ids = new Array<number>(maxBlocks).fill(NULL_BLOCK);
    let run = 0;
    for (let i = maxBlocks - 1; i >= 0; i--) {
      const id = this.pool.lookup(groupHash(request.blockHash(i, this.blockSize)!, group));
      if (id === null) { run = 0; continue; }
      ids[i] = id;
      run++;
      if (run >= needed) return ids.slice(0, i + run);
    }
    return ids.slice(0, run);
  }

  /**
   * Counts a lookup for the metrics once the request is admitted with it (vLLM: queries += the request's tokens,
   * hits += its cached tokens; lookups of preempted requests stay out of the counters).
   */
  recordLookup(request: RequestState, computed: ComputedBlocks): void {
    if (!this.enablePrefixCaching || request.numPreemptions > 0 || request.prefixLookupDone) return;
    request.prefixLookupDone = true;
    this.prefixQueries += request.numTokens;
    this.prefixHits += computed.numTokens;
  }

  /** True when the first block the request would compute is being computed right now by a running request. */
  isNextBlockPending(request: RequestState, computed: ComputedBlocks): boolean {
    // a request that registered pending blocks is the one computing them (it came back from an offload load)
    if (!this.enablePrefixCaching || this.pending.size === 0 || this.pendingOf.has(request)) return false;
    const hash = request.blockHash(Math.floor((request.numComputedTokens + computed.numTokens) / this.blockSize), this.blockSize);
    return hash !== null && this.pending.has(hash);
  }

  /** blocks of a sliding group wholly behind the window of the row at position `numComputedTokens` (vLLM get_num_skipped_tokens) */
  private numSkippedBlocks(group: KvCacheGroup, numComputedTokens: number): number {
    if (group.slidingWindow === 0) return 0;
    return Math.floor(Math.max(0, numComputedTokens - group.slidingWindow + 1) / this.blockSize);
  }

  /**
   * Frees the request's blocks that no row after its computed tokens can see (vLLM remove_skipped_blocks): each
   * sliding group's blocks wholly behind the window become NULL_BLOCK, back to the pool in position order (the
   * oldest, least useful prefix is evicted first); full groups keep theirs.
   */
  removeSkippedBlocks(request: RequestState): void {
    if (this.groups.length === 1 && this.groups[0]!.slidingWindow === 0) return;
    const tables = this.tables(request);
    this.groups.forEach((g, gi) => {
      const table = tables[gi]!;
      const numSkipped = Math.min(this.numSkippedBlocks(g, request.numComputedTokens), table.length);
      const freed: number[] = [];
      // the entries before the first null were freed by an earlier call (vLLM stops at the first null from the right)
      for (let b = numSkipped - 1; b >= 0 && table[b] !== NULL_BLOCK; b--) {
        freed.push(table[b]!);
        table[b] = NULL_BLOCK;
      }
      this.pool.release(freed.reverse());
    });
  }

  /**
   * Makes room for `numNewTokens` more positions after the computed ones (vLLM allocate_slots): first frees what the
   * sliding groups no longer need, then allocates every group's missing blocks from the one pool. With `computed`, the
   * request starts by reusing those cached blocks. Returns the newly allocated block ids per group, or null (nothing
   * allocated) when the pool cannot supply them.
   */
  allocateSlots(request: RequestState, numNewTokens: number, computed: ComputedBlocks = this.noComputedBlocks): number[][] | null {
    this.removeSkippedBlocks(request);
    const tables = this.tables(request);
    const numComputedTokens = request.numComputedTokens + computed.numTokens;
    const numRequired = this.blocksFor(numComputedTokens + numNewTokens);
    let numNeeded = 0;
    // cached blocks nobody holds are on the free queue: taking them shrinks what is left for new blocks
    let numFreeCached = 0;
    this.groups.forEach((g, gi) => {
      const numHeld = tables[gi]!.length + computed.blockTables[gi]!.length;
      numNeeded += Math.max(0, numRequired - Math.max(numHeld, this.numSkippedBlocks(g, numComputedTokens)));
      for (const id of computed.blockTables[gi]!) if (id !== NULL_BLOCK && this.pool.refCount(id) === 0) numFreeCached++;
    });
    if (numNeeded > this.pool.numFreeBlocks - numFreeCached) return null;
    computed.blockTables.forEach((ids, gi) => {
      for (const id of ids) if (id !== NULL_BLOCK) this.pool.touch(id);
      tables[gi]!.push(...ids);
    });
    request.numComputedTokens = numComputedTokens;
    request.numCachedBlocks = Math.max(request.numCachedBlocks, computed.numTokens / this.blockSize);
    // vLLM emit_cached_block_events: a hit announces the whole cached prefix again, with no parent
    if (this.events !== null && computed.numTokens > 0) {
      computed.blockTables.forEach((ids, gi) => this.emitStored(request, gi, ids.map((id, i) => (id === NULL_BLOCK ? -1 : i)), false));
    }
    const newIds = this.groups.map((g, gi) => {
      const table = tables[gi]!;
      // a window already past blocks never held: they stay null (vLLM pads skipped blocks with the null block)
      while (table.length < Math.min(numRequired, this.numSkippedBlocks(g, numComputedTokens))) table.push(NULL_BLOCK);
      const ids = this.pool.allocate(Math.max(0, numRequired - table.length))!;
      table.push(...ids);
      return ids;
    });
    if (this.enablePrefixCaching && !this.pendingOf.has(request)) this.markPending(request);
    return newIds;
  }

  /** After a step: enter the request's newly completed full blocks into the prefix cache, in every group that holds them. */
  cacheFullBlocks(request: RequestState): void {
    if (!this.enablePrefixCaching) return;
    const tables = this.tables(request);
    const numFull = Math.floor(request.numComputedTokens / this.blockSize);
    // [numGroups] the block indices each group entered now (KV events: vLLM cache_full_blocks' BlockStored)
    const entered: number[][] = tables.map(() => []);
    for (let i = request.numCachedBlocks; i < numFull; i++) {
      const hash = request.blockHash(i, this.blockSize)!;
      const digest = request.blockDigest(i, this.blockSize);
      tables.forEach((table, g) => {
        const id = table[i]!;
        if (id !== NULL_BLOCK && this.pool.cache(id, groupHash(hash, g), digest, g)) entered[g]!.push(i);
      });
    }
    if (this.events !== null) entered.forEach((indices, g) => this.emitStored(request, g, indices, true));
    request.numCachedBlocks = Math.max(request.numCachedBlocks, numFull);
    if (numFull >= Math.floor(request.numPromptTokens / this.blockSize)) this.clearPending(request);
  }

  /** Frees every block of the request at once (finish, abort, preemption); in each group tail blocks are evicted first. */
  free(request: RequestState): void {
    this.clearPending(request);
    for (const table of request.blockTables) this.pool.release(table.filter((id) => id !== NULL_BLOCK).reverse());
    request.blockTables = [];
    request.numComputedTokens = 0;
    request.numCachedBlocks = 0;
  }

  /** prefix-cache token queries and hits since the previous call */
  takeCounts(): { queries: number; hits: number } {
    const counts = { queries: this.prefixQueries, hits: this.prefixHits };
    this.prefixQueries = 0;
    this.prefixHits = 0;
    return counts;
  }

  /**
   * One BlockStored per run of consecutive block indices (-1 entries split runs): the run's hashes, tokens and extra
   * keys; parent = the block before the run when `chained` (vLLM cache_full_blocks), else none (emit_cached_block_events).
   */
  private emitStored(request: RequestState, group: number, indices: readonly number[], chained: boolean): void {
    const bs = this.blockSize;
    let start = 0;
    for (let i = 0; i <= indices.length; i++) {
      const breaks = i === indices.length || indices[i]! < 0 || (i > start && indices[i]! !== indices[i - 1]! + 1);
      if (!breaks) continue;
      const run = indices.slice(start, i).filter((b) => b >= 0);
      start = indices[i] !== undefined && indices[i]! < 0 ? i + 1 : i;
      if (run.length === 0) continue;
      const first = run[0]!;
      this.events!.blocksStored({
        hashes: run.map((b) => request.blockDigest(b, bs)!),
        parent: chained && first > 0 ? request.blockDigest(first - 1, bs) : null,
        tokenIds: request.allTokenIds.slice(first * bs, (first + run.length) * bs),
        blockSize: bs,
        // vLLM BlockPool._build_block_stored_event: the request's lora_request adapter_id and name
        lora: request.loraName !== null && request.loraIntId !== null ? { id: request.loraIntId, name: request.loraName } : null,
        extraKeys: run.map((b) => request.blockExtraKeys(b, bs)),
        groupIdx: group,
      });
    }
  }

  private markPending(request: RequestState): void {
    const hashes: BlockHash[] = [];
    const numFullPromptBlocks = Math.floor(request.numPromptTokens / this.blockSize);
    for (let i = request.numCachedBlocks; i < numFullPromptBlocks; i++) hashes.push(request.blockHash(i, this.blockSize)!);
    for (const h of hashes) this.pending.set(h, (this.pending.get(h) ?? 0) + 1);
    this.pendingOf.set(request, hashes);
  }

  private clearPending(request: RequestState): void {
    const hashes = this.pendingOf.get(request);
    if (!hashes) return;
    this.pendingOf.delete(request);
    for (const h of hashes) {
      const n = (this.pending.get(h) ?? 1) - 1;
      if (n <= 0) this.pending.delete(h);
      else this.pending.set(h, n);
    }
  }
}
