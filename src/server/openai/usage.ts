/**
 * The `usage` and `metrics` parts that chat and completion responses share (vLLM protocol.py UsageInfo; the `metrics` object is vLLM's PerRequestTimingMetrics, attached only for one prompt with n = 1).
 */
import type { RequestOutput } from "../../frontend/orchestrator.ts";

type RequestTimes = RequestOutput["times"];
import { EMPTY_PER_REQUEST_METRICS, perRequestMetrics, perRequestMetricsApply, perRequestMetricsToWire } from "../../metrics/per-request.ts";

export interface UsageWire {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number } | null;
}

/** vLLM's --enable-prompt-tokens-details: the prompt tokens the prefix cache (or a pipeline's KV handoff) supplied. */
export function promptTokensDetails(enabled: boolean | undefined, cachedTokens: number): { cached_tokens: number } | null {
  return enabled === true ? { cached_tokens: cachedTokens } : null;
}

export function usageWire(promptTokens: number, completionTokens: number): UsageWire {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/** A stream's final usage: prompt_tokens_details only when --enable-prompt-tokens-details is on (vLLM drops the null). */
export function finalStreamUsageWire(promptTokens: number, completionTokens: number, enableDetails: boolean | undefined, cachedTokens: number): UsageWire {
  const details = promptTokensDetails(enableDetails, cachedTokens);
  return { ...usageWire(promptTokens, completionTokens), ...(details === null ? {} : { prompt_tokens_details: details }) };
}

export interface MetricsInput {
  /** --enable-per-request-metrics */
  readonly enabled: boolean;
  readonly n: number;
  readonly numPrompts: number;
  readonly times: RequestTimes | null;
  readonly numGenerationTokens: number;
}

/**
 * The top-level `metrics` value: null when the feature is off or suppressed (n > 1, several prompts); all-null fields
 * when the engine sent no timings. `dropNulls` for stream usage chunks, which vLLM writes without null fields.
 */
export function metricsWire(input: MetricsInput, dropNulls: boolean): Record<string, number | null> | null {
  if (!input.enabled || !perRequestMetricsApply(input.n, input.numPrompts)) return null;
  const metrics = input.times === null ? EMPTY_PER_REQUEST_METRICS : perRequestMetrics(input.times, input.numGenerationTokens);
  return perRequestMetricsToWire(metrics, dropNulls);
}
