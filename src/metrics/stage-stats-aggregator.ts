/**
 * Collects what the omni `--log-stats` tables need, as vLLM-Omni's OrchestratorAggregator does
 * (vllm_omni/metrics/stats.py: OrchestratorAggregator on_forward / on_stage_metrics / on_finalize_request /
 * build_and_log_summary): per request its stage and edge records, per stage the first time anything was sent to it
 * and the last time anything came out of it. One aggregator per summary: per
 * request online, per batch offline (omni-stats-logger.ts decides). All times are `nowMs()` milliseconds from the
 * pipeline (one clock).
 * @example const agg = new StageStatsAggregator(2); agg.markWallStart(nowMs()); ...; const s = agg.summary();
 */
import type { FinalizedRequest, RequestStageEvents } from "../pipeline/stage-stats.ts";

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


export class StageStatsAggregator implements RequestStageEvents {
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
