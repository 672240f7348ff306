/**
 * The engine's arguments (vLLM's EngineArgs, names in camelCase): built from the flags by the command line, carried to
 * the engine Worker in its spec message (engine/protocol.ts), read by the pipeline and the commands.
 */
import type { LoraConfig } from "./lora-config.ts";
import type { KvCacheDtypeName } from "./cache-dtype.ts";
import type { KvOffloadConfig, KvPeerConfig } from "./kv-transfer-config.ts";
import type { Matryoshka, PoolerConfig, RunnerOption } from "./pooler-config.ts";
import type { SpeculativeConfig } from "./speculative-config.ts";
import type { KvEventsConfig } from "../kv-events/kv-events-config.ts";
import type { PrefixCachingHashAlgo } from "../kv-events/block-hash.ts";
export type { PrefixCachingHashAlgo } from "../kv-events/block-hash.ts";

export type { KvCacheDtypeName } from "./cache-dtype.ts";

/** Engine arguments (vLLM names in camelCase). */
export interface EngineArgs {
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  /** false when --max-num-batched-tokens was not given (its default applies); absent: given */
  readonly maxNumBatchedTokensGiven?: boolean;
  readonly maxModelLen: number | null;
  readonly blockSize: number;
  /** bytes for the KV cache pool; null = sensible default from free memory */
  readonly kvCacheMemoryBytes: number | null;
  readonly enablePrefixCaching: boolean;
  /** VLLM_LOGGING_LEVEL=DEBUG, carried to the engine thread: it reports its DEBUG lines (grammar compile times) */
  readonly debugLog?: boolean;
  /** --disable-hybrid-kv-cache-manager: one KV block table for every layer, even with sliding-window layers; absent: false */
  readonly disableHybridKvCacheManager?: boolean;
  /** use exactly this many KV blocks, whatever the memory sizing says (vLLM num_gpu_blocks_override; tests) */
  readonly numKvBlocksOverride?: number | null;
  readonly threads: number;
  readonly device: "cpu" | "webgpu";
  /** --seed: the sampler stream of requests without their own seed; null/absent = a new seed each start */
  readonly seed?: number | null;
  /** --gpu-memory-utilization on fennec: this fraction of host memory for the KV pool (kvCacheMemoryBytes wins) */
  readonly kvCacheMemoryFraction?: number | null;
  /** --kv-cache-dtype as given (vLLM's name: auto, float16, fp8, fp8_e4m3); absent: auto */
  readonly kvCacheDtype?: KvCacheDtypeName;
  /** the KV offload tier (--kv-offloading-size / --kv-transfer-config); null or absent: none */
  readonly kvOffload?: KvOffloadConfig | null;
  /** NixlConnector: fennec's KV connector between instances (prefill / decode on other processes); null or absent: none */
  readonly kvPeer?: KvPeerConfig | null;
  /** --speculative-config, parsed (null/absent: no speculative decoding) */
  readonly speculativeConfig?: SpeculativeConfig | null;
  /** cap on drafted tokens per step, shared by the decoding requests (null: none; absent: k + 1, see engine.ts) */
  readonly numDraftTokensPerStep?: number | null;
  /** --scheduling-policy: fcfs (default) or priority (the request's priority field orders the queue) */
  readonly schedulingPolicy?: "fcfs" | "priority";
  /** --runner (auto: pooling when the GGUF is an embedding model); absent: auto */
  readonly runner?: RunnerOption;
  /** --pooler-config, parsed; null/absent: the model's own pooling */
  readonly poolerConfig?: PoolerConfig | null;
  /** --hf-overrides' matryoshka keys; null/absent: not a matryoshka model (`dimensions` is refused) */
  readonly matryoshka?: Matryoshka | null;
  /** --prefix-caching-hash-algo (vLLM CacheConfig.prefix_caching_hash_algo); absent: sha256 */
  readonly prefixCachingHashAlgo?: PrefixCachingHashAlgo;
  /** PYTHONHASHSEED, the seed of the block hashes' NONE_HASH (vLLM init_none_hash); null/absent: random per start */
  readonly pythonHashSeed?: string | null;
  /** --kv-events-config, parsed; null/absent: no KV cache events */
  readonly kvEventsConfig?: KvEventsConfig | null;
  /** VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES: events carry uint64 hashes (true, vLLM's default) or the 32-byte digests */
  readonly kvEventsUseIntBlockHashes?: boolean;
  /** --enable-lora and its limits (lora-config.ts); null / absent: no adapters */
  readonly lora?: LoraConfig | null;
}
