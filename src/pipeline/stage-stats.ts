/**
 * The records a pipeline of stages produces (vLLM-Omni's StageRequestStats and TransferEdgeStats, per request) and
 * the door they leave by: per request a `RequestStageEvents` from the sink, fed as the request moves through the
 * stages. What is done with them (one table block per request online, one per batch offline) is metrics/' business
 * (metrics/omni-stats-logger.ts, metrics/stage-stats-aggregator.ts). All times are `nowMs()` milliseconds.
 */

/** Per request and stage (omni StageRequestStats). */
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

/** One finalized request: what RequestE2EStats, StageRequestStats and TransferEdgeStats print. */
export interface FinalizedRequest {
  readonly requestId: string;
  /** right after the request was submitted to stage 0 */
  readonly submitMs: number;
  /** when the final stage's finished output was processed */
  readonly finalizeMs: number;
  readonly stages: readonly StageRequestStats[];
  readonly edges: readonly TransferEdgeStats[];
}

/** What the pipeline reports while one request moves through the stages. */
export interface RequestStageEvents {
  /** just before the request is submitted to stage 0 (only the first call of a summary counts) */
  markWallStart(atMs: number): void;
  /** something was sent to `stageId` (only the first time counts) */
  onStageInput(stageId: number, atMs: number): void;
  /** any output (streamed chunk or final) came out of `stageId` */
  onStageOutput(stageId: number, atMs: number): void;
  /** the request finished at its final stage (online: its tables are printed now) */
  finalize(request: FinalizedRequest): void;
}

/** Where the omni tables' data goes: online one summary per request, offline one per batch. */
export interface PipelineStatsSink {
  eventsFor(requestId: string): RequestStageEvents;
}

