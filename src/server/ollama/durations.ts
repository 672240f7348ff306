/**
 * Ollama's timing fields, in nanoseconds (ollama api/types.go Metrics; llm/server.go fills them from the runner's own
 * timings): total_duration, load_duration, prompt_eval_count, prompt_eval_duration, eval_count, eval_duration, each
 * omitted when zero (`omitempty`). fennec's come from the engine's RequestTimes: prompt evaluation is scheduled ->
 * first token, evaluation first -> last token (both on the engine clock), the total is the HTTP request's own span
 * (the server clock); load_duration is the wait for the model's load behind the several-models router (its
 * x-model-load-ms), else 0 (omitted): a server of one model loads it before it starts.
 * @example durationFields({ totalMs: 12, times, numPromptTokens: 5, numGeneratedTokens: 3 })
 */
import type { RequestOutput } from "../../frontend/orchestrator.ts";

type RequestTimes = RequestOutput["times"];

const NS_PER_MS = 1e6;

const ns = (ms: number): number => Math.max(0, Math.round(ms * NS_PER_MS));

export interface DurationInput {
  /** the request's wall time so far (performance.now() clock) */
  readonly totalMs: number;
  /** ms the request waited for the model's load; absent = 0 */
  readonly loadMs?: number;
  readonly times: RequestTimes | null;
  readonly numPromptTokens: number;
  readonly numGeneratedTokens: number;
}

/** The six fields, zero ones left out as Ollama does. */
export function durationFields(input: DurationInput): Record<string, number> {
  const t = input.times;
  const promptEvalMs = t !== null && t.scheduledMs !== null && t.firstTokenMs !== null ? t.firstTokenMs - t.scheduledMs : 0;
  const evalMs = t !== null && t.firstTokenMs !== null && t.lastTokenMs !== null ? t.lastTokenMs - t.firstTokenMs : 0;
  const fields: Record<string, number> = {
    total_duration: ns(input.totalMs),
    load_duration: ns(input.loadMs ?? 0),
    prompt_eval_count: input.numPromptTokens,
    prompt_eval_duration: ns(promptEvalMs),
    eval_count: input.numGeneratedTokens,
    eval_duration: ns(evalMs),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== 0));
}
