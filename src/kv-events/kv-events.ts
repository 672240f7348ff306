/**
 * KV cache events and their msgpack bytes exactly as vLLM's msgspec encoder writes them
 * (vllm/distributed/kv_events.py: `EventBatch`, `BlockStored`, `BlockRemoved`, `AllBlocksCleared`).
 *
 * - The batch is `array_like`: `[ts (float64), [events], data_parallel_rank]`, always three items (msgspec's
 *   `omit_defaults` does not shorten an array-like struct: a None rank is nil; the publisher fills it anyway).
 * - Each event is a msgspec tagged struct, a msgpack **map** (vLLM PR #42892) whose first key is `"type"` (the class
 *   name), then the fields in declaration order. Fields without a default are always written (None as nil); fields
 *   whose default is None are left out when None (`omit_defaults`).
 * - Ints take msgpack's shortest form (msgspec), `ts` is always a float64, hashes are uint64 ints or 32-byte `bin`.
 *
 * The records are plain data (bigint, Uint8Array, arrays), so the engine worker can build them and post them to the
 * main thread inside a step message unchanged (structured clone keeps bigint and Uint8Array).
 */
import { Encoder } from "@msgpack/msgpack";
import type { ExternalBlockHash, HashKey } from "./block-hash.ts";

/** vLLM's medium names: the primary KV pool is "GPU" on every vLLM platform (block_pool.py MEDIUM_GPU), the offload
 * tiers "CPU" (host memory) and "STORAGE" (disk) (offloading/events.py _MEDIUM_TO_EVENT_STR). */
export const MEDIUM = { primary: "GPU", cpu: "CPU", storage: "STORAGE" } as const;
export type Medium = (typeof MEDIUM)[keyof typeof MEDIUM];

/** `kv_cache_spec_kind` values (vllm/v1/kv_cache_interface.py KVCacheSpecKind). */
export const KV_CACHE_SPEC_KINDS = [
  "full_attention", "mla_attention", "sliding_window", "sliding_window_mla", "mamba", "chunked_local_attention",
  "sink_full_attention", "encoder_only_attention", "cross_attention", "unknown",
] as const;
export type KvCacheSpecKind = (typeof KV_CACHE_SPEC_KINDS)[number];

/** Where a block lives relative to the publisher (a newer, optional field). */
export type Locality = "LOCAL" | "REMOTE";

export interface BlockStored {
  readonly type: "BlockStored";
  readonly blockHashes: readonly ExternalBlockHash[];
  readonly parentBlockHash: ExternalBlockHash | null;
  readonly tokenIds: readonly number[];
  readonly blockSize: number;
  /** deprecated in vLLM (kept on the wire): the LoRA adapter's int id */
  readonly loraId: number | null;
  readonly medium: string | null;
  readonly loraName: string | null;
  /** one entry per block hash: the extra keys that went into it (null: none) */
  readonly extraKeys?: readonly (readonly HashKey[] | null)[] | null;
  readonly groupIdx?: number | null;
  readonly kvCacheSpecKind?: KvCacheSpecKind | null;
  readonly kvCacheSpecSlidingWindow?: number | null;
  readonly locality?: Locality | null;
}

export interface BlockRemoved {
  readonly type: "BlockRemoved";
  readonly blockHashes: readonly ExternalBlockHash[];
  readonly medium: string | null;
  readonly groupIdx?: number | null;
  readonly locality?: Locality | null;
}

export interface AllBlocksCleared {
  readonly type: "AllBlocksCleared";
}

export type KvCacheEvent = BlockStored | BlockRemoved | AllBlocksCleared;

/** One engine step's events (vLLM KVEventBatch); `ts` in seconds since the epoch, like Python's time.time(). */
export interface KvEventBatch {
  readonly ts: number;
  readonly events: readonly KvCacheEvent[];
  readonly dataParallelRank: number | null;
}

/** One wire field: its msgspec name, the record's property, and whether it has a default (then None is omitted). */
interface WireField {
  readonly wire: string;
  readonly key: string;
  readonly omitWhenNull: boolean;
}

const field = (wire: string, key: string, omitWhenNull = false): WireField => ({ wire, key, omitWhenNull });

/** Each event's fields in vLLM's declaration order. */
const EVENT_FIELDS: Readonly<Record<KvCacheEvent["type"], readonly WireField[]>> = {
  BlockStored: [
    field("block_hashes", "blockHashes"),
    field("parent_block_hash", "parentBlockHash"),
    field("token_ids", "tokenIds"),
    field("block_size", "blockSize"),
    field("lora_id", "loraId"),
    field("medium", "medium"),
    field("lora_name", "loraName"),
    field("extra_keys", "extraKeys", true),
    field("group_idx", "groupIdx", true),
    field("kv_cache_spec_kind", "kvCacheSpecKind", true),
    field("kv_cache_spec_sliding_window", "kvCacheSpecSlidingWindow", true),
    field("locality", "locality", true),
  ],
  BlockRemoved: [
    field("block_hashes", "blockHashes"),
    field("medium", "medium"),
    field("group_idx", "groupIdx", true),
    field("locality", "locality", true),
  ],
  AllBlocksCleared: [],
};

type Wire = null | number | bigint | string | Uint8Array | readonly Wire[] | { readonly [key: string]: Wire };

/** msgspec writes the shortest int. @msgpack/msgpack (with useBigInt64) writes a number below 2^32 in its shortest
 * form, a bigint as 8 bytes, and a number beyond 32 bits as a float: so 32-bit ints go as numbers, wider ones as
 * bigints (which need the 8 bytes anyway). */
function wireInt(value: number | bigint): number | bigint {
  const big = BigInt(value);
  return big >= -(2n ** 31n) && big < 2n ** 32n ? Number(big) : big;
}

function wireValue(value: unknown): Wire {
  if (value === undefined || value === null) return null;
  if (typeof value === "bigint") return wireInt(value);
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new Error(`kv events: ${value} is not an integer (every number field is an int)`);
    return wireInt(value);
  }
  if (typeof value === "string" || value instanceof Uint8Array) return value;
  if (Array.isArray(value)) return value.map(wireValue);
  throw new Error(`kv events: cannot encode ${typeof value}`);
}

/** The event as the map msgspec writes: `type` first, then its fields (defaults left out). */
function wireEvent(event: KvCacheEvent): Record<string, Wire> {
  const out: Record<string, Wire> = { type: event.type };
  const record = event as unknown as Record<string, unknown>;
  for (const f of EVENT_FIELDS[event.type]) {
    const v = record[f.key];
    if (f.omitWhenNull && (v === undefined || v === null)) continue;
    out[f.wire] = wireValue(v);
  }
  return out;
}

const encoder = new Encoder({ useBigInt64: true });

/**
 * The batch's msgpack bytes, as `msgspec.msgpack.Encoder().encode(KVEventBatch(...))` writes them.
 * @example encodeKvEventBatch({ ts: 1.5, events: [{ type: "AllBlocksCleared" }], dataParallelRank: 0 })
 *   // 93 cb 3ff8000000000000 91 81 a4 "type" b0 "AllBlocksCleared" 00
 */
export function encodeKvEventBatch(batch: KvEventBatch): Uint8Array {
  if (!Number.isFinite(batch.ts)) throw new Error(`kv events: ts must be a finite number (got ${batch.ts})`);
  const events = encoder.encode(batch.events.map(wireEvent));
  const rank = encoder.encode(wireValue(batch.dataParallelRank));
  const out = new Uint8Array(1 + 9 + events.length + rank.length);
  out[0] = 0x93; // fixarray of 3
  // ts is a Python float: always float64, even when it has no fraction
  out[1] = 0xcb;
  new DataView(out.buffer).setFloat64(2, batch.ts, false);
  out.set(events, 10);
  out.set(rank, 10 + events.length);
  return out;
}
