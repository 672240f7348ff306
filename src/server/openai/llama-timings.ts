/**
 * llama.cpp's `timings` object (tools/server/server-task.h result_timings::to_json), which its clients read with
 * `timings_per_token`, from the engine's own timestamps: prompt processing runs from the first scheduling to the
 * first token, generation from the first token to the latest one. A rate over no time or no tokens is null (what
 * llama.cpp's JSON writer makes of its NaN and infinity).
 * @example llamaTimings({ times, numPromptTokens: 6, numCachedTokens: 0, numGeneratedTokens: 3 }).predicted_n // 3
 */
import type { RequestOutput } from "../../frontend/orchestrator.ts";

export interface LlamaTimingsInput {
  /** null: the engine sent none (every span 0) */
  readonly times: RequestOutput["times"] | null;
  readonly numPromptTokens: number;
  readonly numCachedTokens: number;
  /** tokens generated so far by the choice the times are of (choice 0) */
  readonly numGeneratedTokens: number;
}

const span = (from: number | null, to: number | null): number => (from === null || to === null ? 0 : Math.max(0, to - from));
const ratio = (a: number, b: number): number | null => (b > 0 ? a / b : null);

export function llamaTimings(input: LlamaTimingsInput): Record<string, number | null> {
  const times = input.times ?? { scheduledMs: null, firstTokenMs: null, lastTokenMs: null };
  const promptN = input.numPromptTokens - input.numCachedTokens;
  const promptMs = span(times.scheduledMs, times.firstTokenMs);
  const predictedN = input.numGeneratedTokens;
  const predictedMs = span(times.firstTokenMs, times.lastTokenMs);
  return {
    cache_n: input.numCachedTokens,
    prompt_n: promptN, prompt_ms: promptMs, prompt_per_token_ms: ratio(promptMs, promptN), prompt_per_second: ratio(1e3 * promptN, promptMs),
    predicted_n: predictedN, predicted_ms: predictedMs, predicted_per_token_ms: ratio(predictedMs, predictedN), predicted_per_second: ratio(1e3 * predictedN, predictedMs),
  };
}
