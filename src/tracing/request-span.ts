/**
 * The attributes of one finished request's span, as vLLM's OutputProcessor.do_tracing computes them
 * (vllm/v1/engine/output_processor.py) from the request's timestamps (engine/stats.ts RequestTimes, one clock) and its
 * parameters. Sampling parameters are set only when truthy, as vLLM's (so temperature 0 is left out).
 * @example span.setAttributes(requestSpanAttributes({ requestId, sampling, times, numPromptTokens, numCompletionTokens }));
 */
import type { RequestTimes } from "../engine/stats.ts";
import { SPAN_ATTRIBUTES as A } from "./span-attributes.ts";

export interface FinishedRequestFacts {
  /** the id the client sees (vLLM's external request id) */
  readonly requestId: string;
  readonly sampling: { readonly topP: number; readonly maxTokens: number | null; readonly temperature: number; readonly n: number };
  readonly times: RequestTimes;
  readonly numPromptTokens: number;
  /** over every choice */
  readonly numCompletionTokens: number;
  /** nowMs() when the last output arrived (vLLM's iteration timestamp): the end of e2e when no token came */
  readonly finishedMs: number;
}

export type SpanAttributeValues = Record<string, string | number>;

const seconds = (fromMs: number | null, toMs: number | null): number | null =>
  fromMs === null || toMs === null ? null : Math.max(0, toMs - fromMs) / 1000;

export function requestSpanAttributes(facts: FinishedRequestFacts): SpanAttributeValues {
  const t = facts.times;
  const out: SpanAttributeValues = {
    [A.usageCompletionTokens]: facts.numCompletionTokens,
    [A.requestId]: facts.requestId,
    [A.usagePromptTokens]: facts.numPromptTokens,
  };
  const timings: [string, number | null][] = [
    [A.timeToFirstToken, seconds(t.arrivalMs, t.firstTokenMs)],
    [A.e2e, seconds(t.arrivalMs, t.lastTokenMs ?? facts.finishedMs)],
    [A.timeInQueue, seconds(t.queuedMs, t.scheduledMs)],
    [A.timeInModelPrefill, seconds(t.scheduledMs, t.firstTokenMs)],
    [A.timeInModelDecode, seconds(t.firstTokenMs, t.lastTokenMs)],
    [A.timeInModelInference, seconds(t.scheduledMs, t.lastTokenMs)],
  ];
  for (const [name, value] of timings) if (value !== null) out[name] = value;
  const s = facts.sampling;
  const params: [string, number | null][] = [[A.requestTopP, s.topP], [A.requestMaxTokens, s.maxTokens], [A.requestTemperature, s.temperature], [A.requestN, s.n]];
  for (const [name, value] of params) if (value) out[name] = value;
  return out;
}
