/**
 * The engine side of KV events: the list a block pool appends to and the scheduler takes once per step (vLLM
 * BlockPool.kv_event_queue / take_events, KVCacheManager.take_events), building each record as vLLM does:
 *
 * - `blocksStored`: BlockPool.cache_full_blocks (newly full blocks: parent = the hash of the block before the first
 *   one, null from block 0) and emit_cached_block_events (a prefix-cache hit: the whole prefix again, parent null);
 *   `extra_keys` one entry per block; `kv_cache_spec_kind` / `_sliding_window` from the block's KV cache group.
 * - `blockEvicted`: BlockPool._emit_block_removed_events, one BlockRemoved per evicted hash (with its group).
 * - `tierBlocksRemoved`: an offload tier dropping blocks (offloading/events.py: one BlockRemoved per batch and group).
 * - `allCleared`: BlockPool.reset_prefix_cache.
 *
 * Hashes go out in vLLM's external form (block-hash.ts externalBlockHash). Plain data: it runs in the engine worker
 * and its `take()` goes to the main thread inside the step message.
 */
import { type BlockHashBytes, externalBlockHash, type HashKey } from "./block-hash.ts";
import { type KvCacheEvent, type KvCacheSpecKind, type Locality, MEDIUM } from "./kv-events.ts";

/** One KV cache group's spec as events describe it. */
export interface KvEventGroup {
  readonly kind: KvCacheSpecKind;
  readonly slidingWindow: number | null;
}

export interface StoredBlocks {
  /** the blocks' digests, in prompt order */
  readonly hashes: readonly BlockHashBytes[];
  /** the digest of the block before the first one, null when the first one is block 0 */
  readonly parent: BlockHashBytes | null;
  /** the blocks' tokens: hashes.length * blockSize ids */
  readonly tokenIds: readonly number[];
  readonly blockSize: number;
  /** the request's LoRA adapter (vLLM lora_request.adapter_id / .name), null for the base model */
  readonly lora: { readonly id: number; readonly name: string } | null;
  /** one entry per block: what went into its hash besides the tokens */
  readonly extraKeys: readonly (readonly HashKey[] | null)[];
  readonly groupIdx: number;
  /** "GPU" (the primary pool) unless an offload tier stored them */
  readonly medium?: string;
  readonly locality?: Locality | null;
}

export class KvEventQueue {
  private events: KvCacheEvent[] = [];

  /** `intHashes`: VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES (default true); `groups`: the engine's KV cache groups. */
  constructor(
    private readonly intHashes: boolean,
    private readonly groups: readonly KvEventGroup[],
  ) {}

  private external(hash: BlockHashBytes) {
    return externalBlockHash(hash, this.intHashes);
  }

  blocksStored(s: StoredBlocks): void {
    if (s.hashes.length === 0) return;
    if (s.tokenIds.length !== s.hashes.length * s.blockSize) {
      throw new Error(`kv events: ${s.hashes.length} blocks of ${s.blockSize} tokens but ${s.tokenIds.length} token ids`);
    }
    if (s.extraKeys.length !== s.hashes.length) throw new Error("kv events: extra_keys must have one entry per block hash");
    const group = this.groups[s.groupIdx];
    this.events.push({
      type: "BlockStored",
      blockHashes: s.hashes.map((h) => this.external(h)),
      parentBlockHash: s.parent === null ? null : this.external(s.parent),
      tokenIds: [...s.tokenIds],
      blockSize: s.blockSize,
      loraId: s.lora?.id ?? null,
      medium: s.medium ?? MEDIUM.primary,
      loraName: s.lora?.name ?? null,
      extraKeys: s.extraKeys.map((k) => (k === null ? null : [...k])),
      groupIdx: s.groupIdx,
      // KVCacheManager.take_events: a group it does not know gets no spec fields
      kvCacheSpecKind: group?.kind ?? null,
      kvCacheSpecSlidingWindow: group?.slidingWindow ?? null,
      locality: s.locality ?? null,
    });
  }

  /**
   * An offload tier finished writing these blocks (vLLM OffloadingConnector.take_events: BlockStored with no parent and
   * no token ids, the tier's medium).
   */
  tierBlocksStored(hashes: readonly BlockHashBytes[], blockSize: number, medium: string, groupIdx: number): void {
    if (hashes.length === 0) return;
    this.events.push({
      type: "BlockStored", blockHashes: hashes.map((h) => this.external(h)), parentBlockHash: null, tokenIds: [], blockSize,
      loraId: null, medium, loraName: null, groupIdx,
    });
  }

  /** A cached block handed out again: its hash leaves the primary pool. */
  blockEvicted(hash: BlockHashBytes, groupIdx: number): void {
    this.events.push({ type: "BlockRemoved", blockHashes: [this.external(hash)], medium: MEDIUM.primary, groupIdx });
  }

  /** An offload tier dropped these blocks (one event per batch, as vLLM's tier events). */
  tierBlocksRemoved(hashes: readonly BlockHashBytes[], medium: string, groupIdx: number, locality: Locality | null = null): void {
    if (hashes.length === 0) return;
    this.events.push({ type: "BlockRemoved", blockHashes: hashes.map((h) => this.external(h)), medium, groupIdx, locality });
  }

  allCleared(): void {
    this.events.push({ type: "AllBlocksCleared" });
  }

  /** Takes the step's events, oldest first, and starts a new list (vLLM take_events). */
  take(): KvCacheEvent[] {
    const out = this.events;
    this.events = [];
    return out;
  }
}
