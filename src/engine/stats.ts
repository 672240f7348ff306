/**
 * The records the engine produces, as vLLM V1 defines them (vllm/v1/metrics/stats.py: RequestStateStats,
 * SchedulerStats): per request its timestamps, per step the batch and scheduler figures. The front end adds what
 * only the main thread knows (frontend/iteration-stats.ts: TTFT / ITL, FinishedRequestStats); the pipeline its stage
 * and edge records (pipeline/stage-stats.ts). All times are `nowMs()` (util/clock.ts): one clock for every thread.
 */
export type FinishReason = "stop" | "length" | "abort" | "error";

/** Per request, kept by the engine and sent with every delta. */
export interface RequestTimes {
  /** when the server received the request (main thread) */
  readonly arrivalMs: number;
  /** when the engine put it in the waiting queue */
  readonly queuedMs: number | null;
  /** first time the scheduler gave it tokens (not reset by preemption) */
  readonly scheduledMs: number | null;
  /** when its first output token was produced */
  readonly firstTokenMs: number | null;
  /** when its latest output token was produced */
  readonly lastTokenMs: number | null;
}

/** One engine step (vLLM SchedulerStats + the engine's half of IterationStats). */
export interface StepStats {
  readonly engineIndex: number;
  readonly batchId: number;
  readonly stepStartMs: number;
  readonly stepEndMs: number;
  /** requests in this step's batch; 0 for a stats-only record (the engine went idle after an abort, no batch ran) */
  readonly batchSize: number;
  /** prompt tokens computed this step (prefill chunks, excluding prefix-cache hits) */
  readonly numPromptTokens: number;
  /** output tokens produced this step */
  readonly numGenerationTokens: number;
  readonly numPreempted: number;
  /** after the step */
  readonly numRunning: number;
  readonly numWaiting: number;
  /** of numWaiting: requests the scheduler skipped this step because a running request is computing their prompt's
   * next block (vLLM's "deferred" waiting reason); the rest wait for capacity */
  readonly numWaitingDeferred?: number;
  /** fraction of KV blocks in use, 0..1 */
  readonly kvCacheUsage: number;
  /** prefix cache: tokens looked up / tokens hit, this step */
  readonly prefixCacheQueries: number;
  readonly prefixCacheHits: number;
  /**
   * LoRA (--enable-lora): the adapters of the running and of the waiting requests, each name once (vLLM's
   * lora_requests_info labels running_lora_adapters / waiting_lora_adapters); absent: LoRA off
   */
  readonly lora?: { readonly maxLoras: number; readonly running: readonly string[]; readonly waiting: readonly string[] };
  /** prompt tokens whose KV came over a pipeline edge instead of being computed (the decode stage of pd), counted in
   * the step that produced their request's first output; vLLM's prompt_tokens_by_source{source="external_kv_transfer"}.
   * Absent when 0. */
  readonly numExternalKvTokens?: number;
  /** VLLM_LOGGING_LEVEL=DEBUG: the engine thread's own DEBUG lines since the last step (grammar compile times) */
  readonly debugLines?: readonly string[];
  /** the KV offload tier's step (present only when a connector is configured) */
  readonly kvOffload?: KvOffloadStepStats;
  /** with a speculative config: this step's drafts and acceptances */
  readonly specDecoding?: SpecDecodingStats;
  /** the KV connector between instances (NixlConnector), present only when configured */
  readonly kvPeer?: KvPeerStepStats;
}

/** One successful KV read from another instance (vLLM NixlKVConnectorStats: one entry per transfer). */
export interface KvPeerTransfer {
  /** read sent -> last block received (NIXL xferDuration) */
  readonly seconds: number;
  /** connect + read request written (NIXL postDuration) */
  readonly postSeconds: number;
  readonly bytes: number;
  /** contiguous regions copied: blocks x layers x (K, V) (NIXL descCount) */
  readonly descriptors: number;
  /** the decode-side request it was for (a pipeline with a remote prefill stage times its edge with it) */
  readonly requestId?: string;
  /** the received bytes written into the pool's blocks (the edge's rx-decode) */
  readonly writeSeconds?: number;
}

/** The connector between instances over one engine step: counts since the previous step. */
export interface KvPeerStepStats {
  readonly transfers: readonly KvPeerTransfer[];
  readonly failedTransfers: number;
  readonly failedNotifications: number;
  /** prefill side: pinned requests freed by the lease (vllm:nixl_num_kv_expired_reqs) */
  readonly expiredRequests: number;
  /** decode side, vLLM external_prefix_cache_*: tokens beyond the local hit / granted by the remote prefill, at admission */
  readonly externalQueries: number;
  readonly externalHits: number;
  /** one line per event (expiry, failed read), logged by the main thread */
  readonly logLines: readonly string[];
}

/**
 * Speculative decoding in one step (vLLM SpecDecodingStats, vllm/v1/spec_decode/metrics.py): drafts = requests that
 * had at least one draft verified; accepted excludes the bonus / recovered token.
 */
export interface SpecDecodingStats {
  readonly numDrafts: number;
  readonly numDraftTokens: number;
  readonly numAcceptedTokens: number;
  /** [numSpeculativeTokens] requests that accepted at least i + 1 drafts */
  readonly numAcceptedTokensPerPos: readonly number[];
}

/** SimpleCPUOffloadConnector's save outcomes (vllm/v1/simple_kv_offload/metrics.py BoundaryStoreStats), eager mode
 * only; metrics/catalogue.ts lists them as label values (checked against this type) */
export type SaveOutcome =
  | "stored" | "skipped_already_cached" | "skipped_in_flight" | "dropped_null_block" | "dropped_not_hashed" | "dropped_cpu_full"
  | "dropped_request_gone";

/** One transfer between the primary pool and the tier (one request's blocks in one step). */
export interface KvTransferOp {
  readonly bytes: number;
  readonly seconds: number;
}

/**
 * The offload tier's deployment facts for the metrics (vllm:simple_kv_offload_info and the connector's series), from
 * the config and the ready engine: built by pipeline/serving-pipeline.ts, read by metrics/recorder.ts.
 */
export interface KvOffloadFacts {
  readonly connector: "OffloadingConnector" | "SimpleCPUOffloadConnector";
  readonly backend: "cpu" | "disk";
  /** disk backend with use_page_cache */
  readonly pageCache: boolean;
  readonly lazy: boolean;
  readonly capacityBlocks: number;
}

/**
 * The offload tier over one engine step (vLLM drains the connector's stats once per step): counts are deltas since
 * the previous step, gauges are the state after it.
 */
export interface KvOffloadStepStats {
  readonly connector: "OffloadingConnector" | "SimpleCPUOffloadConnector";
  readonly saveOutcomes: Readonly<Record<SaveOutcome, number>>;
  readonly loadBlocksIssued: number;
  readonly loadBlocksCompleted: number;
  /** loads that failed or ran too long, and were recomputed instead */
  readonly loadBlocksFailed: number;
  readonly loads: readonly KvTransferOp[];
  readonly stores: readonly KvTransferOp[];
  /** seconds spent in each tier lookup */
  readonly lookupSyncDelaysS: readonly number[];
  /** stores that found no free tier block */
  readonly allocationFailures: number;
  /** tier blocks asked for by each store */
  readonly allocationSizes: readonly number[];
  /** tier blocks pinned by in-flight transfers or loads (capacity minus free) */
  readonly usedBlocks: number;
  readonly pendingStoreBlocks: number;
  readonly pendingLoadBlocks: number;
  readonly capacityBlocks: number;
  /** vLLM external_prefix_cache_*: tokens looked up beyond the local hit / found in the tier, at admission */
  readonly externalQueries: number;
  readonly externalHits: number;
}
