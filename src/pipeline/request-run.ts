/**
 * One request's way through the stages, as one record (what the stage loop used to keep in a dozen locals): what each
 * stage produced, the stage and edge records for the omni tables, and the one FinishedRequestStats the pipeline
 * reports for the whole request (vLLM-Omni's orchestrator reports a request once, not per stage).
 * @example const run = startRun(request, tables, nowMs); ...; reportRun(run, listener, nowMs(), false);
 */
import type { KvHandoff } from "../engine/protocol.ts";
import type { FinishReason, RequestTimes } from "../engine/stats.ts";
import { finishedRequestStats, type StatsListener } from "../frontend/iteration-stats.ts";
import type { GenerateRequest, RequestOutput } from "../frontend/orchestrator.ts";
import type { PipelineStatsSink, RequestStageEvents, StageRequestStats, TransferEdgeStats } from "./stage-stats.ts";

export interface StagePipelineOptions {
  /** gets the pipeline's step stats (per stage) and one FinishedRequestStats per request */
  readonly listener?: StatsListener | null;
  readonly tables?: PipelineStatsSink | null;
  readonly nowMs?: () => number;
  /** one-line warnings (default: stderr) */
  readonly warn?: (line: string) => void;
}

/** What one stage produced for one request (choice 0: multi-stage chains take n = 1). */
export interface StageResult {
  readonly tokenIds: number[];
  text: string;
  finishReason: FinishReason | null;
  stopReason: string | number | null;
  kv: KvHandoff | undefined;
  times: RequestTimes | null;
  numCachedTokens: number;
  /** a prefill stage in another process: the params that name its blocks (RequestOutput.kvTransferParams) */
  kvTransferParams?: Readonly<Record<string, unknown>>;
}

export interface RequestRun {
  readonly request: GenerateRequest;
  /** the tables name the request as its client knows it (vLLM-Omni prints the OpenAI ids online) */
  readonly tableId: string;
  readonly events: RequestStageEvents | null;
  /** right after the request was submitted to stage 0 */
  readonly submitMs: number;
  readonly stageStats: StageRequestStats[];
  readonly edgeStats: TransferEdgeStats[];
  /** edges whose numbers come later (the read of a remote stage's blocks, reported with an engine step) */
  readonly pendingEdges: Promise<void>[];
  /** stage 0's result (queue / schedule times, cached tokens of the request) */
  stage0: StageResult | null;
  /** the latest stage's result */
  last: StageResult | null;
  /** when the client saw its first token */
  firstVisibleTokenMs: number | null;
  /** the request's last output, held back until its stats are recorded (consumers stop at `finished`) */
  held: RequestOutput | null;
  /** the finished-request record went out (normally, or as abandoned) */
  reported: boolean;
}

/** A request enters the chain: its table events start the wall clock, then it is submitted (two clock reads). */
export function startRun(request: GenerateRequest, tables: PipelineStatsSink | null, nowMs: () => number): RequestRun {
  const tableId = request.externalRequestId ?? request.requestId;
  const events = tables?.eventsFor(tableId) ?? null;
  events?.markWallStart(nowMs());
  return {
    request, tableId, events, submitMs: nowMs(), stageStats: [], edgeStats: [], pendingEdges: [],
    stage0: null, last: null, firstVisibleTokenMs: null, held: null, reported: false,
  };
}

export function emptyStageResult(): StageResult {
  return { tokenIds: [], text: "", finishReason: null, stopReason: null, kv: undefined, times: null, numCachedTokens: 0 };
}

/** Adds one stage output to the stage's result (choice 0 only). */
export function absorbOutput(result: StageResult, out: RequestOutput): void {
  const choice = out.outputs[0];
  if (choice) {
    result.tokenIds.push(...choice.tokenIdsDelta);
    result.text += choice.textDelta;
    if (choice.finishReason !== null) {
      result.finishReason = choice.finishReason;
      result.stopReason = choice.stopReason;
    }
  }
  result.times = out.times;
  result.numCachedTokens = out.numCachedTokens;
  if (out.kv) result.kv = out.kv;
  if (out.kvTransferParams) result.kvTransferParams = out.kvTransferParams;
}

/** A stage ended without a usable result: the client went away, or it aborted / failed / stopped without a reason. */
export function stageFailed(result: StageResult, signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true || result.finishReason === "abort" || result.finishReason === "error" || result.finishReason === null;
}

/** The request finished at its final stage: its tables' record. */
export function finalizeTables(run: RequestRun, finalizeMs: number): void {
  run.events?.finalize({ requestId: run.tableId, submitMs: run.submitMs, finalizeMs, stages: run.stageStats, edges: run.edgeStats });
}

/**
 * The one FinishedRequestStats of the whole request: queue and schedule times from stage 0, the first token the
 * client saw, the last token of the last stage. Nothing is reported before stage 0 has finished.
 */
export function reportRun(run: RequestRun, listener: StatsListener | null | undefined, numGenerated: number, atMs: number, clientAborted: boolean): void {
  run.reported = true;
  const { request, stage0, last } = run;
  if (!listener || !stage0 || !last) return;
  listener.onRequestFinished(finishedRequestStats({
    requestId: request.requestId, finishReason: clientAborted ? "abort" : (last.finishReason ?? "abort"), clientAborted,
    numPromptTokens: request.promptTokenIds.length, numGenerationTokens: numGenerated, numCachedTokens: stage0.numCachedTokens,
    maxTokensParam: request.sampling.maxTokens, n: request.sampling.n,
    times: {
      arrivalMs: request.arrivalMs, queuedMs: stage0.times?.queuedMs ?? null, scheduledMs: stage0.times?.scheduledMs ?? null,
      firstTokenMs: run.firstVisibleTokenMs, lastTokenMs: last.times?.lastTokenMs ?? null,
    },
    nowMs: atMs,
  }));
}
