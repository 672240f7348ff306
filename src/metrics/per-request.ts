/**
 * Per-request timing metrics (vLLM `--enable-per-request-metrics`, PerRequestTimingMetrics): the `metrics` object that chat and
 * completion responses carry. Pure functions of the engine's timestamps and the completion token count.
 * All timestamps come from one clock (util/clock.ts nowMs), so every interval below is in milliseconds already.
 * @example perRequestMetrics(output.times, 10) // { timeToFirstTokenMs: 500, generationTimeMs: 1000, ... }
 */
import type { RequestTimes } from "../engine/stats.ts";

/** vLLM PerRequestTimingMetrics (camelCase here; the server writes the snake_case wire names). */
export interface PerRequestMetrics {
  /** first token - first scheduled (from scheduling, unlike the Prometheus TTFT which runs from arrival) */
  readonly timeToFirstTokenMs: number | null;
  /** last token - first token (decode phase only) */
  readonly generationTimeMs: number | null;
  /** first scheduled - queued */
  readonly queueTimeMs: number | null;
  /** generation time / (tokens - 1); null for one-token answers */
  readonly meanItlMs: number | null;
  /** tokens / (last token - first scheduled): the inference interval, prefill included */
  readonly tokensPerSecond: number | null;
}

/** Wire names, in vLLM's field order. */
export const PER_REQUEST_METRICS_WIRE_NAMES: Readonly<Record<keyof PerRequestMetrics, string>> = {
  timeToFirstTokenMs: "time_to_first_token_ms",
  generationTimeMs: "generation_time_ms",
  queueTimeMs: "queue_time_ms",
  meanItlMs: "mean_itl_ms",
  tokensPerSecond: "tokens_per_second",
};

/** vLLM treats an unset (0) timestamp as missing; here unset is null, and 0 or non-finite counts as unset too. */
function isSet(ms: number | null): ms is number {
  return ms !== null && Number.isFinite(ms) && ms !== 0;
}

function intervalMs(fromMs: number | null, toMs: number | null): number | null {
  return isSet(fromMs) && isSet(toMs) ? toMs - fromMs : null;
}

/**
 * The metrics object for one request (n = 1). `numGenerationTokens` is the response's completion token count.
 * Missing timestamps give nulls, never NaN or a guess.
 */
export function perRequestMetrics(times: RequestTimes, numGenerationTokens: number): PerRequestMetrics {
  const generationTimeMs = intervalMs(times.firstTokenMs, times.lastTokenMs);
  const inferenceMs = intervalMs(times.scheduledMs, times.lastTokenMs);
  return {
    timeToFirstTokenMs: intervalMs(times.scheduledMs, times.firstTokenMs),
    generationTimeMs,
    queueTimeMs: intervalMs(times.queuedMs, times.scheduledMs),
    meanItlMs: generationTimeMs !== null && numGenerationTokens > 1 ? generationTimeMs / (numGenerationTokens - 1) : null,
    tokensPerSecond: inferenceMs !== null && inferenceMs > 0 ? numGenerationTokens / (inferenceMs / 1000) : null,
  };
}

/** The all-null object vLLM builds when an output carries no timings. */
export const EMPTY_PER_REQUEST_METRICS: PerRequestMetrics = {
  timeToFirstTokenMs: null, generationTimeMs: null, queueTimeMs: null, meanItlMs: null, tokensPerSecond: null,
};

/** vLLM attaches metrics only to single-sequence answers: n = 1 and (completions) one prompt. */
export function perRequestMetricsApply(n: number, numPrompts: number): boolean {
  return n <= 1 && numPrompts === 1;
}

/**
 * Snake_case wire object. `dropNulls` for stream usage chunks (vLLM serializes them with exclude_none);
 * non-streaming bodies keep every field.
 */
export function perRequestMetricsToWire(metrics: PerRequestMetrics, dropNulls: boolean): Record<string, number | null> {
  const wire: Record<string, number | null> = {};
  for (const key of Object.keys(PER_REQUEST_METRICS_WIRE_NAMES) as (keyof PerRequestMetrics)[]) {
    const value = metrics[key];
    if (dropNulls && value === null) continue;
    wire[PER_REQUEST_METRICS_WIRE_NAMES[key]] = value;
  }
  return wire;
}
