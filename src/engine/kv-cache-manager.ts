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
 * Sliding-window layers (gemma3) free nothing yet. vLLM frees the blocks wholly outside a sliding layer's window
 * (SlidingWindowManager.remove_skipped_blocks) because its hybrid allocator gives those layers their own KV cache
 * groups, each with its own block table over one shared pool. Here one block id holds its positions' K/V in every
 * layer, so a model with any full-attention layer needs every block to the end. The backends never read a block
 * before a sliding layer's window (test/conformance: such blocks may point anywhere, NaN-filled), so the group
 * tables can come here and in the runner without touching the kernels.
 */
import { BlockPool, type BlockHash } from "./block-pool.ts";
import type { RequestState } from "./request.ts";

export interface KvCacheConfig {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly enablePrefixCaching: boolean;
}

export interface ComputedBlocks {
  readonly blockIds: readonly number[];
  readonly numTokens: number;
}

const NO_COMPUTED_BLOCKS: ComputedBlocks = { blockIds: [], numTokens: 0 };

export class KvCacheManager {
  readonly blockSize: number;
  readonly enablePrefixCaching: boolean;
  readonly pool: BlockPool;
  /** tokens looked up / found in the prefix cache since the last takeCounts() */
  private prefixQueries = 0;
  private prefixHits = 0;
  /** hash -> number of running requests that will compute that block */
  private readonly pending = new Map<BlockHash, number>();
  /** per request: the full prompt block indices it registered as pending */
  private readonly pendingOf = new Map<RequestState, BlockHash[]>();

  constructor(config: KvCacheConfig) {
    this.blockSize = config.blockSize;
    this.enablePrefixCaching = config.enablePrefixCaching;
    this.pool = new BlockPool(config.numBlocks);
  }

  usage(): number {
    return this.pool.usage();
  }

  /** blocks needed to hold `numTokens` positions */
  blocksFor(numTokens: number): number {
    return Math.ceil(numTokens / this.blockSize);
  }

  /**
   * The longest run of cached full blocks at the start of the request's tokens. At least one token is always left to
   * compute (its logits are needed), so a fully cached prompt gives back its last block.
   */
  getComputedBlocks(request: RequestState): ComputedBlocks {
    // requests that already hold blocks (imported KV) start from those
    // MEAN / CLS pooling needs every position's hidden state (vLLM caches only for LAST pooling)
    if (!this.enablePrefixCaching || request.promptLogprobs !== null || request.blockIds.length > 0 || (request.pooler !== null && request.pooler.type !== "LAST")) return NO_COMPUTED_BLOCKS;
    const maxBlocks = Math.floor((request.numTokens - 1) / this.blockSize);
    const blockIds: number[] = [];
    for (let i = 0; i < maxBlocks; i++) {
      const id = this.pool.lookup(request.blockHash(i, this.blockSize)!);
      if (id === null) break;
      blockIds.push(id);
    }
    return { blockIds, numTokens: blockIds.length * this.blockSize };
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

  /**
   * Makes room for `numNewTokens` more positions after the computed ones (vLLM allocate_slots). With `computed`, the
   * request starts by reusing those cached blocks. Returns the newly allocated block ids, or null (nothing changed)
   * when the pool cannot supply them.
   */
  allocateSlots(request: RequestState, numNewTokens: number, computed: ComputedBlocks = NO_COMPUTED_BLOCKS): number[] | null {
    const numComputedTokens = request.numComputedTokens + computed.numTokens;
    const numBlocksHeld = request.blockIds.length + computed.blockIds.length;
    const numNeeded = Math.max(0, this.blocksFor(numComputedTokens + numNewTokens) - numBlocksHeld);
    // cached blocks nobody holds are on the free queue: taking them shrinks what is left for new blocks
    let numFreeCached = 0;
    for (const id of computed.blockIds) if (this.pool.refCount(id) === 0) numFreeCached++;
    if (numNeeded > this.pool.numFreeBlocks - numFreeCached) return null;
    for (const id of computed.blockIds) this.pool.touch(id);
    request.blockIds.push(...computed.blockIds);
    request.numComputedTokens = numComputedTokens;
    request.numCachedBlocks = Math.max(request.numCachedBlocks, computed.blockIds.length);
    const newIds = this.pool.allocate(numNeeded)!;
    request.blockIds.push(...newIds);
    if (this.enablePrefixCaching && !this.pendingOf.has(request)) this.markPending(request);
    return newIds;
  }

  /** After a step: enter the request's newly completed full blocks into the prefix cache. */
  cacheFullBlocks(request: RequestState): void {
    if (!this.enablePrefixCaching) return;
    const numFull = Math.floor(request.numComputedTokens / this.blockSize);
    for (let i = request.numCachedBlocks; i < numFull; i++) this.pool.cache(request.blockIds[i]!, request.blockHash(i, this.blockSize)!);
    request.numCachedBlocks = Math.max(request.numCachedBlocks, numFull);
    if (numFull >= Math.floor(request.numPromptTokens / this.blockSize)) this.clearPending(request);
  }

  /** Frees every block of the request at once (finish, abort, preemption); tail blocks are evicted first. */
  free(request: RequestState): void {
    this.clearPending(request);
    this.pool.release([...request.blockIds].reverse());
    request.blockIds = [];
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
