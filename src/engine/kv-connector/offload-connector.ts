/**
 * The KV offload tier under the prefix cache (vLLM's SimpleCPUOffloadConnector scheduler side,
 * vllm/v1/simple_kv_offload/manager.py, and OffloadingConnector with the CPU spec): an offload pool of tier slots
 * keyed by the same block hashes as the primary prefix cache, LRU like it (it reuses BlockPool).
 *
 * Stores. Eager: after each step the request's newly full blocks are queued; at the next step's drain they are handed
 * off (copied out of the primary pool, written to the tier), and each is classified by outcome. A request that
 * finishes or is preempted hands off at once (its blocks are still held); an aborted one drops what it had queued.
 * Lazy: at each drain, the primary pool's next-to-be-evicted cached blocks are stored until `target_free` blocks are
 * covered (vLLM's lazy cursor over the free queue; not classified by outcome, as in vLLM).
 * Loads. When a waiting request's prefix misses the primary pool past its local hit but hits the tier, it gets its
 * primary blocks at once, waits in `loading` (never scheduled) while the tier reads run (async), and at a later drain
 * the bytes go into its blocks, which enter the primary prefix cache; it then goes back to the head of the waiting
 * queue with those tokens computed. A failed or too slow load frees its blocks and the request recomputes them.
 * The last prompt token is never loaded (its logits are needed), as in vLLM.
 *
 * Every tier slot is pinned (refcount) while a transfer uses it, and released exactly once when that transfer settles,
 * whatever happened to its request meanwhile: no slot leaks after aborts at any point.
 */
import { BlockPool, type BlockHash } from "../block-pool.ts";
import type { ComputedBlocks, KvCacheManager } from "../kv-cache-manager.ts";
import { KvBlockTransfer } from "./block-transfer.ts";
import type { KvConnector } from "./kv-connector.ts";
import type { KvOffloadConfig } from "../../config/kv-transfer-config.ts";
import { CpuTier, DiskTier, type OffloadTier } from "./offload-tiers.ts";
import type { RequestState } from "../request.ts";
import type { KvOffloadStepStats, KvTransferOp, SaveOutcome } from "../stats.ts";
import { errorMessage } from "../../util/error-message.ts";
import type { ModelRunner } from "../../model/model-batch.ts";
import type { BlockHashBytes } from "../../kv-events/block-hash.ts";
import type { KvEventQueue } from "../../kv-events/kv-event-queue.ts";
import { MEDIUM } from "../../kv-events/kv-events.ts";

export interface KvOffloadConnectorOptions {
  readonly config: KvOffloadConfig;
  readonly kv: KvCacheManager;
  readonly transfer: KvBlockTransfer;
  readonly tier: OffloadTier;
  readonly maxNumBatchedTokens: number;
  readonly nowMs: () => number;
  /** a load still running after this long is abandoned and its blocks recomputed */
  readonly loadTimeoutMs?: number;
  /** the engine's KV event list (null/absent: events off) */
  readonly events?: KvEventQueue | null;
}

const DEFAULT_LOAD_TIMEOUT_MS = 10_000;

interface StoreJob {
  readonly hash: BlockHash;
  /** the block's digest, for KV events (null: unknown) */
  readonly digest: BlockHashBytes | null;
  readonly slot: number;
  settled: boolean;
  ok: boolean;
}

interface StoreOp {
  readonly jobs: StoreJob[];
  readonly bytes: number;
  readonly startMs: number;
  endMs: number;
}

interface LoadJob {
  readonly request: RequestState;
  readonly slots: readonly number[];
  readonly blockIds: readonly number[];
  readonly startMs: number;
  settled: boolean;
  data: Uint8Array[] | null;
  error: string | null;
  endMs: number;
  /** the request was sent back to recompute (timeout); the job only waits to release its slots */
  abandoned: boolean;
}

interface RequestOffloadState {
  /** blocks before this index were queued or handled */
  cursor: number;
  /** block indices waiting for the next drain's hand-off */
  queued: number[];
  /** a load of this request failed: it recomputes, never loads again */
  loadFailed: boolean;
}

function zeroOutcomes(): Record<SaveOutcome, number> {
  return {
    stored: 0, skipped_already_cached: 0, skipped_in_flight: 0, dropped_null_block: 0, dropped_not_hashed: 0, dropped_cpu_full: 0,
    dropped_request_gone: 0,
  };
}

export class KvOffloadConnector implements KvConnector {
  readonly pool: BlockPool;
  readonly capacityBlocks: number;
  private readonly config: KvOffloadConfig;
  private readonly kv: KvCacheManager;
  private readonly transfer: KvBlockTransfer;
  private readonly tier: OffloadTier;
  private readonly nowMs: () => number;
  private readonly loadTimeoutMs: number;
  private readonly blockSize: number;
  /** lazy mode: how many of the primary pool's next evictions to cover (vLLM target_free, full attention only) */
  private readonly targetFree: number;
  private readonly inFlightStores = new Map<BlockHash, StoreJob>();
  private readonly storeOps: StoreOp[] = [];
  private readonly loads: LoadJob[] = [];
  private readonly loading = new Set<RequestState>();
  private loaded: RequestState[] = [];
  private readonly requests = new Map<RequestState, RequestOffloadState>();
  /** wakes a step that waits for a load */
  private progress: (() => void) | null = null;
  // per-step counts, taken by takeStats()
  private outcomes = zeroOutcomes();
  private loadBlocksIssued = 0;
  private loadBlocksCompleted = 0;
  private loadBlocksFailed = 0;
  private loadOps: KvTransferOp[] = [];
  private finishedStoreOps: KvTransferOp[] = [];
  private lookupDelays: number[] = [];
  private allocationFailures = 0;
  private allocationSizes: number[] = [];
  private externalQueries = 0;
  private externalHits = 0;
  private closed = false;
  private readonly events: KvEventQueue | null;
  /** KV events' medium for this tier (offloading/events.py: CPU, or STORAGE for the disk backend) */
  private readonly medium: string;

  constructor(options: KvOffloadConnectorOptions) {
    this.config = options.config;
    this.kv = options.kv;
    this.transfer = options.transfer;
    this.tier = options.tier;
    this.nowMs = options.nowMs;
    this.loadTimeoutMs = options.loadTimeoutMs ?? DEFAULT_LOAD_TIMEOUT_MS;
    this.blockSize = options.kv.blockSize;
    this.capacityBlocks = options.tier.numSlots;
    this.events = options.events ?? null;
    this.medium = options.config.backend === "disk" ? MEDIUM.storage : MEDIUM.cpu;
    const events = this.events;
    this.pool = new BlockPool(this.capacityBlocks, events === null ? null : {
      evicted: (digest) => events.tierBlocksRemoved([digest], this.medium, 0),
      cleared: () => {},
    });
    this.targetFree = Math.ceil(options.maxNumBatchedTokens / this.blockSize) * 2;
  }

  get numLoading(): number {
    return this.loading.size;
  }

  /** the start-up lines vLLM logs for this connector */
  describe(): string[] {
    const c = this.config;
    const gb = (this.capacityBlocks * this.tier.slotBytes) / 1e9;
    const mode = c.lazy ? "lazy" : "eager";
    if (c.connector === "OffloadingConnector") return [`OffloadingConnector: CPUOffloadingSpec, ${this.capacityBlocks} CPU blocks (${gb.toFixed(2)} GB), eviction_policy=lru`];
    const tierLine = this.tier.describe?.();
    return [
      ...(tierLine !== undefined ? [tierLine] : []),
      `SimpleCPUOffloadConnector: role=kv_both, per_rank=${(c.cpuBytes / 1e9).toFixed(2)} GB, world_size=1, mode=${mode}, backend=${c.backend}, disk=${c.diskPath ?? "none"}`,
      `SimpleCPUOffloadScheduler: Allocating ${this.capacityBlocks} ${c.backend === "disk" ? "disk" : "CPU"} blocks (${gb.toFixed(2)} GB, mode=${mode})`,
    ];
  }

  private stateOf(request: RequestState): RequestOffloadState {
    let s = this.requests.get(request);
    if (!s) this.requests.set(request, (s = { cursor: 0, queued: [], loadFailed: false }));
    return s;
  }

  // ---- scheduler side -------------------------------------------------------------------------------------------

  takeLoaded(): RequestState[] {
    const out = this.loaded.filter((r) => r.status !== "finished");
    this.loaded = [];
    return out;
  }

  startLoad(request: RequestState, computed: ComputedBlocks): boolean {
    if (this.closed || request.promptLogprobs !== null || request.blockIds.length > 0) return false;
    if (this.requests.get(request)?.loadFailed) return false;
    const t0 = performance.now();
    const maxBlocks = Math.floor((request.numTokens - 1) / this.blockSize);
    const slots: number[] = [];
    for (let i = computed.numTokens / this.blockSize; i < maxBlocks; i++) {
      const slot = this.pool.lookup(request.blockHash(i, this.blockSize)!);
      if (slot === null || this.inFlightStores.has(request.blockHash(i, this.blockSize)!)) break;
      slots.push(slot);
    }
    this.lookupDelays.push((performance.now() - t0) / 1000);
    if (slots.length === 0) return false;
    const numLocal = computed.numTokens;
    const numTokens = slots.length * this.blockSize;
    if (this.kv.allocateSlots(request, numTokens, computed) === null) return false;
    for (const s of slots) this.pool.touch(s);
    const firstLookup = !request.prefixLookupDone;
    this.kv.recordLookup(request, computed);
    if (firstLookup) {
      if (request.numPreemptions === 0) request.numCachedTokens = numLocal + numTokens;
      this.externalQueries += request.numTokens - numLocal;
      this.externalHits += numTokens;
    }
    const first = computed.numTokens / this.blockSize;
    const job: LoadJob = {
      request, slots, blockIds: request.blockIds.slice(first, first + slots.length), startMs: this.nowMs(),
      settled: false, data: null, error: null, endMs: 0, abandoned: false,
    };
    this.loads.push(job);
    this.loading.add(request);
    request.status = "loading";
    this.loadBlocksIssued += slots.length;
    Promise.all(slots.map((s) => this.tier.read(s))).then(
      (data) => { job.data = data; },
      (e: unknown) => { job.error = errorMessage(e); },
    ).finally(() => {
      job.settled = true;
      job.endMs = this.nowMs();
      this.wake();
    });
    return true;
  }

  recordAdmission(request: RequestState, computed: ComputedBlocks): void {
    const queries = request.numTokens - computed.numTokens;
    if (queries !== 0) this.externalQueries += queries;
  }

  beforeFree(request: RequestState, gone: boolean): void {
    this.loading.delete(request);
    // a request that finishes in the step that computed its prompt (max_tokens 1: the prefill leg of disaggregated
    // serving) has no state yet, since afterStep skips finished requests: its blocks are still stored here, as
    // vLLM's request_finished does
    const storing = !gone && !this.config.lazy && request.status !== "loading";
    const state = storing ? this.stateOf(request) : this.requests.get(request);
    if (state === undefined) return;
    if (storing) {
      this.queueNewBlocks(request, state);
      this.handOff(request, state);
    }
    for (const _ of state.queued) this.outcomes.dropped_request_gone++;
    state.queued = [];
    // a preempted request keeps only the fact that its load failed; its cursor starts over
    if (gone || !state.loadFailed) this.requests.delete(request);
    else state.cursor = 0;
  }

  // ---- engine side ------------------------------------------------------------------------------------------------

  /** True while a load is in flight (a step with nothing else to run waits for it). */
  hasPendingLoads(): boolean {
    return this.loads.some((j) => !j.abandoned);
  }

  /** Resolves when some transfer settles, or when the oldest load reaches its deadline. */
  waitForProgress(): Promise<void> {
    const oldest = this.loads.find((j) => !j.abandoned);
    const ms = oldest ? Math.max(1, oldest.startMs + this.loadTimeoutMs - this.nowMs()) : 1;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => { this.progress = null; resolve(); }, ms);
      this.progress = () => { clearTimeout(timer); resolve(); };
    });
  }

  private wake(): void {
    const p = this.progress;
    this.progress = null;
    p?.();
  }

  /** Once per engine step, before scheduling: settle transfers, hand off queued stores, lazy stores. */
  drain(runningAndWaiting: Iterable<RequestState>): void {
    this.settleStores();
    this.settleLoads();
    if (this.config.lazy) this.lazyStore();
    else for (const request of runningAndWaiting) {
      const state = this.requests.get(request);
      if (state !== undefined && state.queued.length > 0) this.handOff(request, state);
    }
  }

  /** After a step: queue the newly full blocks of the requests it computed (eager mode). */
  afterStep(requests: Iterable<RequestState>): void {
    if (this.config.lazy) return;
    for (const request of requests) {
      if (request.status === "finished") continue;
      this.queueNewBlocks(request, this.stateOf(request));
    }
  }

  private queueNewBlocks(request: RequestState, state: RequestOffloadState): void {
    const limit = this.config.offloadPromptOnly ? Math.min(request.numComputedTokens, request.numPromptTokens) : request.numComputedTokens;
    const numFull = Math.min(Math.floor(limit / this.blockSize), request.blockIds.length);
    for (; state.cursor < numFull; state.cursor++) state.queued.push(state.cursor);
  }

  /** Eager hand-off of a request's queued blocks: classify each, copy the stored ones out in one transfer. */
  private handOff(request: RequestState, state: RequestOffloadState): void {
    const toStore: { index: number; hash: BlockHash; digest: BlockHashBytes | null }[] = [];
    const queued = state.queued;
    state.queued = [];
    for (let q = 0; q < queued.length; q++) {
      const index = queued[q]!;
      const blockId = request.blockIds[index];
      // fennec has no null block (sliding window / mamba padding) and hashes every full block: counted for vLLM's set
      if (blockId === undefined) { this.outcomes.dropped_null_block++; continue; }
      const hash = request.blockHash(index, this.blockSize);
      if (hash === null) { this.outcomes.dropped_not_hashed++; continue; }
      if (this.inFlightStores.has(hash) || toStore.some((s) => s.hash === hash)) { this.outcomes.skipped_in_flight++; continue; }
      if (this.pool.lookup(hash) !== null) { this.outcomes.skipped_already_cached++; continue; }
      toStore.push({ index, hash, digest: request.blockDigest(index, this.blockSize) });
    }
    this.store(toStore.map((s) => ({ blockId: request.blockIds[s.index]!, hash: s.hash, digest: s.digest })), true);
  }

  /** Lazy mode: cover the primary pool's next evictions (vLLM _prepare_lazy_store_specs). */
  private lazyStore(): void {
    const blocks: { blockId: number; hash: BlockHash; digest: BlockHashBytes | null }[] = [];
    for (const [blockId, hash] of this.kv.pool.evictableCached(this.targetFree)) {
      if (this.inFlightStores.has(hash) || this.pool.lookup(hash) !== null) continue;
      if (blocks.length >= this.pool.numFreeBlocks) break;
      blocks.push({ blockId, hash, digest: this.kv.pool.digestOf(blockId) });
    }
    this.store(blocks, false);
  }

  /** Allocates tier slots, copies the blocks out of the primary pool (one transfer) and starts the writes. */
  private store(blocks: readonly { blockId: number; hash: BlockHash; digest: BlockHashBytes | null }[], classify: boolean): void {
    if (blocks.length === 0 || this.closed) return;
    this.allocationSizes.push(blocks.length);
    const slots: number[] = [];
    for (const _ of blocks) {
      const slot = this.pool.allocate(1);
      if (slot === null) break;
      slots.push(slot[0]!);
    }
    const dropped = blocks.length - slots.length;
    if (dropped > 0) {
      this.allocationFailures++;
      if (classify) this.outcomes.dropped_cpu_full += dropped;
    }
    if (slots.length === 0) return;
    if (classify) this.outcomes.stored += slots.length;
    const stored = blocks.slice(0, slots.length);
    const data = this.transfer.read(stored.map((b) => b.blockId));
    const op: StoreOp = { jobs: [], bytes: data.length, startMs: this.nowMs(), endMs: 0 };
    stored.forEach((b, i) => {
      const job: StoreJob = { hash: b.hash, digest: b.digest, slot: slots[i]!, settled: false, ok: false };
      op.jobs.push(job);
      this.inFlightStores.set(b.hash, job);
      this.tier.write(job.slot, this.transfer.slice(data, i)).then(
        () => { job.ok = true; },
        () => { job.ok = false; },
      ).finally(() => {
        job.settled = true;
        op.endMs = Math.max(op.endMs, this.nowMs());
      });
    });
    this.storeOps.push(op);
  }

  private settleStores(): void {
    for (let i = 0; i < this.storeOps.length; ) {
      const op = this.storeOps[i]!;
      if (!op.jobs.every((j) => j.settled)) { i++; continue; }
      const stored: BlockHashBytes[] = [];
      for (const job of op.jobs) {
        this.inFlightStores.delete(job.hash);
        // a stored block becomes findable (and evictable) only once its write returned
        if (job.ok && !this.closed && this.pool.cache(job.slot, job.hash, job.digest) && job.digest !== null) stored.push(job.digest);
        this.pool.release([job.slot]);
      }
      this.events?.tierBlocksStored(stored, this.blockSize, this.medium, 0);
      this.finishedStoreOps.push({ bytes: op.bytes, seconds: (op.endMs - op.startMs) / 1000 });
      this.storeOps.splice(i, 1);
    }
  }

  private settleLoads(): void {
    const now = this.nowMs();
    for (let i = 0; i < this.loads.length; ) {
      const job = this.loads[i]!;
      const request = job.request;
      if (!job.settled) {
        if (!job.abandoned && now - job.startMs > this.loadTimeoutMs) {
          job.abandoned = true;
          this.recompute(request, job.slots.length);
        }
        i++;
        continue;
      }
      this.loads.splice(i, 1);
      this.pool.release(job.slots);
      if (job.abandoned || request.status !== "loading") continue; // recomputing already, or aborted meanwhile
      if (job.data === null) {
        this.recompute(request, job.slots.length);
        continue;
      }
      try {
        const bytes = new Uint8Array(job.blockIds.length * this.transfer.blockBytes);
        job.data.forEach((d, b) => bytes.set(d.subarray(0, this.transfer.blockBytes), b * this.transfer.blockBytes));
        this.transfer.write(job.blockIds, bytes);
      } catch {
        this.recompute(request, job.slots.length);
        continue;
      }
      request.numComputedTokens += job.blockIds.length * this.blockSize;
      this.kv.cacheFullBlocks(request);
      // the loaded blocks count as handled: the eager scan does not store them back
      this.stateOf(request).cursor = Math.floor(request.numComputedTokens / this.blockSize);
      this.loadBlocksCompleted += job.blockIds.length;
      this.loadOps.push({ bytes: job.blockIds.length * this.transfer.blockBytes, seconds: (job.endMs - job.startMs) / 1000 });
      this.finishLoading(request);
    }
  }

  /** A load failed or ran too long: free its blocks, and the request computes them itself. */
  private recompute(request: RequestState, numBlocks: number): void {
    if (request.status !== "loading") return;
    this.loadBlocksFailed += numBlocks;
    this.kv.free(request);
    this.stateOf(request).loadFailed = true;
    this.finishLoading(request);
  }

  private finishLoading(request: RequestState): void {
    this.loading.delete(request);
    request.status = "waiting";
    this.loaded.push(request);
  }

  takeStats(): KvOffloadStepStats {
    let pendingLoadBlocks = 0;
    for (const j of this.loads) pendingLoadBlocks += j.slots.length;
    const stats: KvOffloadStepStats = {
      connector: this.config.connector, saveOutcomes: this.outcomes, loadBlocksIssued: this.loadBlocksIssued,
      loadBlocksCompleted: this.loadBlocksCompleted, loadBlocksFailed: this.loadBlocksFailed, loads: this.loadOps,
      stores: this.finishedStoreOps, lookupSyncDelaysS: this.lookupDelays, allocationFailures: this.allocationFailures,
      allocationSizes: this.allocationSizes, usedBlocks: this.capacityBlocks - this.pool.numFreeBlocks,
      pendingStoreBlocks: this.inFlightStores.size, pendingLoadBlocks, capacityBlocks: this.capacityBlocks,
      externalQueries: this.externalQueries, externalHits: this.externalHits,
    };
    this.outcomes = zeroOutcomes();
    this.loadBlocksIssued = this.loadBlocksCompleted = this.loadBlocksFailed = 0;
    this.loadOps = [];
    this.finishedStoreOps = [];
    this.lookupDelays = [];
    this.allocationFailures = 0;
    this.allocationSizes = [];
    this.externalQueries = this.externalHits = 0;
    return stats;
  }

  /** Tier slots in use by nothing: what a leak test checks (every slot free once all transfers settled). */
  get numFreeSlots(): number {
    return this.pool.numFreeBlocks;
  }

  get numInFlight(): number {
    return this.loads.length + this.storeOps.length;
  }

  /** Waits for every transfer to settle (shutdown, tests). */
  async settle(): Promise<void> {
    while (this.loads.some((j) => !j.settled) || this.storeOps.some((op) => op.jobs.some((j) => !j.settled))) {
      await new Promise((r) => setTimeout(r, 1));
    }
    this.settleStores();
    this.settleLoads();
  }

  close(): void {
    this.closed = true;
    this.tier.close();
  }
}

/**
 * The offload tier's storage and connector for one engine (the disk file is created, empty, here).
 * @example createOffloadConnector(offload, kv, runner, { blockSize: 16, maxNumBatchedTokens: 2048 }, nowMs, 0)
 */
export function createOffloadConnector(offload: KvOffloadConfig, kv: KvCacheManager, runner: ModelRunner, sizes: { blockSize: number; maxNumBatchedTokens: number }, nowMs: () => number, rank: number, events: KvEventQueue | null = null): KvOffloadConnector {
  const transfer = new KvBlockTransfer(runner, sizes.blockSize);
  let tier: OffloadTier;
  if (offload.backend === "disk") {
    const slotBytes = offload.usePageCache ? transfer.blockBytes : Math.ceil(transfer.blockBytes / 4096) * 4096;
    tier = new DiskTier(offload.diskPath!, Math.max(1, Math.floor(offload.diskCapacityBytes / slotBytes)), transfer.blockBytes, offload.diskBufferSlots, offload.usePageCache, rank);
  } else {
    tier = new CpuTier(Math.max(1, Math.floor(offload.cpuBytes / transfer.blockBytes)), transfer.blockBytes);
  }
  return new KvOffloadConnector({ config: offload, kv, transfer, tier, maxNumBatchedTokens: sizes.maxNumBatchedTokens, nowMs, events });
}
