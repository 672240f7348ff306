/**
 * The stats the front end produces from the engine's records, on the main thread (vllm/v1/metrics/stats.py:
 * IterationStats.update_from_output, FinishedRequestStats; vllm/v1/engine/output_processor.py): per step the TTFT /
 * inter-token latency samples, per finished sequence the FinishedRequestStats with vLLM's formulas, and the listener
 * interface the metrics recorder implements. Times are nowMs() on both threads (util/clock.ts), so arrival (main) and
 * the engine timestamps share one clock.
 */
import type { RequestDelta } from "../engine/protocol.ts";
import type { FinishReason, RequestTimes, StepStats } from "../engine/stats.ts";

const MS_PER_S = 1000;

/** One engine step with the latencies only the main thread can measure (vLLM IterationStats). */
export interface IterationStats extends StepStats {
  /** seconds, like vLLM's histograms: one per sequence whose first token arrived this step */
  readonly timeToFirstTokensS: readonly number[];
  /** seconds: one per sequence per step after its first (not per token), as vLLM does */
  readonly interTokenLatenciesS: readonly number[];
}

/** An n > 1 request's figures, on the record of the child that finished it (vllm/v1/engine/parallel_sampling.py). */
export interface ParentRequestStats {
  readonly n: number;
  /** the longest child's generated tokens (vllm:request_max_num_generation_tokens) */
  readonly maxNumGenerationTokens: number;
}

/** Emitted once when a sequence finishes (vLLM FinishedRequestStats); aborted-by-client sequences are flagged. */
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
  /** n > 1: present on the child that finished its parent (all children done, none client-aborted) */
  readonly parent?: ParentRequestStats;
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

/** Whoever observes the engines (the metrics recorder) implements this; the front end and the pipeline call it. */
export interface StatsListener {
  onStep(stats: IterationStats): void;
  onRequestFinished(stats: FinishedRequestStats): void;
}

/**
 * vLLM's finished-request formulas: e2e = now - arrival; queued = scheduled - queued; prefill = first token -
 * scheduled; decode = last token - first token; inference = last token - scheduled; TPOT = decode / (gen - 1).
 */
export function finishedRequestStats(input: {
  requestId: string; finishReason: FinishReason; clientAborted: boolean; numPromptTokens: number; numGenerationTokens: number;
  numCachedTokens: number; maxTokensParam: number | null; n: number; times: RequestTimes; nowMs: number; parent?: ParentRequestStats | null;
}): FinishedRequestStats {
  const t = input.times;
  const span = (from: number | null, to: number | null): number => (from !== null && to !== null ? Math.max(0, to - from) / MS_PER_S : 0);
  const decodeTimeS = span(t.firstTokenMs, t.lastTokenMs);
  return {
    requestId: input.requestId, finishReason: input.finishReason, clientAborted: input.clientAborted,
    numPromptTokens: input.numPromptTokens, numGenerationTokens: input.numGenerationTokens, numCachedTokens: input.numCachedTokens,
    maxTokensParam: input.maxTokensParam, n: input.n, ...(input.parent ? { parent: input.parent } : {}), times: t,
    e2eLatencyS: Math.max(0, input.nowMs - t.arrivalMs) / MS_PER_S,
    queuedTimeS: span(t.queuedMs, t.scheduledMs),
    prefillTimeS: span(t.scheduledMs, t.firstTokenMs),
    decodeTimeS,
    inferenceTimeS: span(t.scheduledMs, t.lastTokenMs),
    meanTimePerOutputTokenS: input.numGenerationTokens > 1 ? decodeTimeS / (input.numGenerationTokens - 1) : 0,
  };
}

/** Tracks the last output time of every live sequence to fill a step's TTFT and ITL samples. */
export class IterationTracker {
  /** sequence id -> engine time of its previous output batch */
  private readonly lastOutputMs = new Map<string, number>();

  /**
   * TTFT = this output batch's processing time on main - arrival (once per sequence); ITL = this batch's engine output
   * time - the previous batch's, one sample per step per sequence (not per token), as vLLM does.
   */
  observeStep(stats: StepStats, deltas: readonly RequestDelta[], iterationMs: number): IterationStats {
    const timeToFirstTokensS: number[] = [];
    const interTokenLatenciesS: number[] = [];
    for (const d of deltas) {
      if (d.newTokenIds.length === 0) continue;
      const previous = this.lastOutputMs.get(d.requestId);
      if (previous === undefined) timeToFirstTokensS.push(Math.max(0, iterationMs - d.times.arrivalMs) / MS_PER_S);
      else interTokenLatenciesS.push(Math.max(0, stats.stepEndMs - previous) / MS_PER_S);
      if (d.finishReason) this.lastOutputMs.delete(d.requestId);
      else this.lastOutputMs.set(d.requestId, stats.stepEndMs);
    }
    return { ...stats, timeToFirstTokensS, interTokenLatenciesS };
  }

  /** forget a sequence that ended without a final engine output (abort, stop string) */
  forget(sequenceId: string): void {
    this.lastOutputMs.delete(sequenceId);
  }
}
