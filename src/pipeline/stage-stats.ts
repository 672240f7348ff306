/**
 * Collects what the omni `--log-stats` tables need (reference omni-stats-tables.md §1.4-§1.7, §2), as vLLM-Omni's
 * OrchestratorAggregator does: per request its stage events and edge events, and per stage the first time anything was
 * sent to it and the last time anything came out of it. One aggregator per summary: per request online, per batch
 * offline. All times are `nowMs()` milliseconds from the pipeline (one clock).
 * @example const agg = new StageStatsAggregator(2); agg.markWallStart(nowMs()); ...; const s = agg.summary();
 */
import type { StageRequestStats, TransferEdgeStats } from "../engine/stats.ts";

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

export interface StageSpan {
  readonly firstInputMs: number;
  readonly lastOutputMs: number;
}

/** Everything the four tables are rendered from. */
export interface PipelineSummary {
  readonly numStages: number;
  readonly wallStartMs: number;
  readonly requests: readonly FinalizedRequest[];
  /** index = stage id; null when the stage never ran */
  readonly stageSpans: readonly (StageSpan | null)[];
}

/** Where the omni tables' data goes: online one aggregator per request, offline one per batch. */
export interface PipelineStatsSink {
  aggregatorFor(requestId: string): StageStatsAggregator;
  /** the request was finalized in `aggregator` (online: print its tables now) */
  finalized(requestId: string, aggregator: StageStatsAggregator): void;
}

export class StageStatsAggregator {
  private wallStartMs: number | null = null;
  private readonly firstInputMs: (number | null)[];
  private readonly lastOutputMs: (number | null)[];
  private readonly requests: FinalizedRequest[] = [];

  constructor(readonly numStages: number) {
    this.firstInputMs = new Array<number | null>(numStages).fill(null);
    this.lastOutputMs = new Array<number | null>(numStages).fill(null);
  }

  /** just before the first request is submitted to stage 0 (only the first call counts) */
  markWallStart(atMs: number): void {
    this.wallStartMs ??= atMs;
  }

  /** something was sent to `stageId` (only the first time counts) */
  onStageInput(stageId: number, atMs: number): void {
    this.firstInputMs[stageId] ??= atMs;
  }

  /** any output (streamed chunk or final) came out of `stageId` */
  onStageOutput(stageId: number, atMs: number): void {
    const last = this.lastOutputMs[stageId];
    this.lastOutputMs[stageId] = last === null || last === undefined ? atMs : Math.max(last, atMs);
  }

  /** The request finished at its final stage; that stage's span is raised to the finalize time. */
  finalize(request: FinalizedRequest): void {
    this.requests.push(request);
    const finalStage = request.stages.reduce((max, s) => Math.max(max, s.stageId), 0);
    this.onStageOutput(finalStage, request.finalizeMs);
  }

  get numFinalized(): number {
    return this.requests.length;
  }

  summary(): PipelineSummary {
    const stageSpans = this.firstInputMs.map((first, i) => {
      const last = this.lastOutputMs[i];
      return first === null || last === null || last === undefined ? null : { firstInputMs: first, lastOutputMs: last };
    });
    const firstSubmit = this.requests.reduce((min, r) => Math.min(min, r.submitMs), Infinity);
    return {
      numStages: this.numStages,
      wallStartMs: this.wallStartMs ?? (Number.isFinite(firstSubmit) ? firstSubmit : 0),
      requests: [...this.requests],
      stageSpans,
    };
  }
}
