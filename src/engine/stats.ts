/**
 * Request timestamps and stats, as vLLM V1 defines them (RequestStateStats, IterationStats, SchedulerStats,
 * FinishedRequestStats). The one place the server (per-request metrics), the metrics recorder (/metrics) and the
 * omni tables (--log-stats) read timings from. All times are `nowMs()` (util/clock.ts): one clock for every thread.
 * OWNER: engine helper (computation); types are a contract for the server and metrics helpers.
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

/** One engine step (vLLM IterationStats + SchedulerStats). */
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
  /** per-token latencies observed this step (main side fills these; seconds like vLLM's histograms) */
  readonly timeToFirstTokensS: readonly number[];
  readonly interTokenLatenciesS: readonly number[];
  /** prompt tokens whose KV came over a pipeline edge instead of being computed (the decode stage of pd), counted in
   * the step that produced their request's first output; vLLM's prompt_tokens_by_source{source="external_kv_transfer"} */
  readonly numExternalKvTokens?: number;
  /** the KV offload tier's step (present only when a connector is configured) */
  readonly kvOffload?: KvOffloadStepStats;
  /** with a speculative config: this step's drafts and acceptances */
  readonly specDecoding?: SpecDecodingStats;
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

/** SimpleCPUOffloadConnector's save outcomes (vllm/v1/simple_kv_offload/metrics.py BoundaryStoreStats), eager mode only */
export const SAVE_OUTCOMES = [
  "stored", "skipped_already_cached", "skipped_in_flight", "dropped_null_block", "dropped_not_hashed", "dropped_cpu_full", "dropped_request_gone",
] as const;
export type SaveOutcome = (typeof SAVE_OUTCOMES)[number];

/** One transfer between the primary pool and the tier (one request's blocks in one step). */
export interface KvTransferOp {
  readonly bytes: number;
  readonly seconds: number;
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

/** Emitted once when a request finishes (vLLM FinishedRequestStats); aborted-by-client requests are flagged. */
export interface FinishedRequestStats {
  readonly requestId: string;
  readonly finishReason: FinishReason;
  /** true when the client went away: such requests count in no finished-request metric */
  readonly clientAborted: boolean;
  readonly numPromptTokens: number;
  readonly numGenerationTokens: number;
  readonly numCachedTokens: number;
  readonly maxTokensParam: number | null;
  readonly n: number;
  readonly times: RequestTimes;
  /** seconds, vLLM formulas: e2e = now - arrival; queued = scheduled - queued; prefill = first token - scheduled;
   * decode = last token - first token; inference = last token - scheduled; mean TPOT = decode / (gen - 1) */
  readonly e2eLatencyS: number;
  readonly queuedTimeS: number;
  readonly prefillTimeS: number;
  readonly decodeTimeS: number;
  readonly inferenceTimeS: number;
  readonly meanTimePerOutputTokenS: number;
}

/** Per request and stage (omni StageRequestStats), recorded by the pipeline. */
export interface StageRequestStats {
  readonly stageId: number;
  readonly numTokensIn: number;
  readonly numTokensOut: number;
  readonly batchId: number;
  readonly batchSize: number;
  readonly stageGenTimeMs: number;
  readonly postprocessTimeMs: number;
}

/** Per request and edge (omni TransferEdgeStats). */
export interface TransferEdgeStats {
  readonly fromStage: number;
  readonly toStage: number;
  readonly sizeBytes: number;
  readonly txTimeMs: number;
  readonly inFlightTimeMs: number;
  readonly rxDecodeTimeMs: number;
}

/** Whoever observes the engines (metrics recorder, omni tables) implements this; the orchestrator calls it. */
export interface StatsListener {
  onStep(stats: StepStats): void;
  onRequestFinished(stats: FinishedRequestStats): void;
  onPipelineRequestFinished?(requestId: string, stages: readonly StageRequestStats[], edges: readonly TransferEdgeStats[]): void;
}
