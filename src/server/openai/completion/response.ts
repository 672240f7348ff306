/**
 * The completion's answer, built from each prompt's outputs (vLLM serving_completion.py:
 * request_output_to_completion_response and completion_stream_generator): one JSON body, or SSE chunks (each prompt's
 * echo with its first output, text deltas numbered prompt_index * n + i, optional usage chunk). Pure: the preparation
 * step (prepare.ts) fixed everything the answer depends on in a CompletionAnswer.
 * @example const body = completionBody(answer, await Promise.all(requests.map((r, i) => collectGeneration(orchestrator, r, aborts[i]))));
 */
import type { PositionLogprobs } from "../../../engine/protocol.ts";
import type { RequestOutput } from "../../../frontend/orchestrator.ts";
import type { Tokenizer } from "../../../tokenizer/tokenizer.ts";
import { applyOutput, newChoice, type ChoiceResult, type GenerationResult } from "../../generation/run-generation.ts";
import { appendCompletionLogprobs, appendPromptCompletionLogprobs, emptyCompletionLogprobs, promptLogprobsWire, type CompletionLogprobs } from "../logprobs.ts";
import type { UsageMode } from "../wire-to-request.ts";
import { llamaTimings } from "../llama-timings.ts";
import { finalStreamUsageWire, metricsWire, promptTokensDetails, usageWire } from "../usage.ts";

type RequestTimes = RequestOutput["times"];

/** One prompt as the answer shows it (echo, prompt_token_ids). */
export interface AnsweredPrompt {
  readonly text: string;
  readonly tokenIds: readonly number[];
}

/** What a completion answer depends on, fixed before generation starts. */
export interface CompletionAnswer {
  /** llama.cpp's timings_per_token: a `timings` object on the answer and on each streamed chunk (llama-timings.ts) */
  readonly timings?: boolean;
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly tokenizer: Tokenizer;
  readonly n: number;
  readonly prompts: readonly AnsweredPrompt[];
  readonly echo: boolean;
  readonly returnTokenIds: boolean;
  /** top logprobs per token; null = no logprobs */
  readonly numTop: number | null;
  readonly fingerprint: string;
  readonly usage: UsageMode;
  readonly enablePromptTokensDetails: boolean;
  readonly enablePerRequestMetrics: boolean;
}

/** One output of prompt `promptIndex` (several prompts stream interleaved). */
export interface PromptOutput {
  readonly promptIndex: number;
  readonly output: RequestOutput;
}

interface EchoedPrompt {
  readonly tokenIds: readonly number[];
  readonly logprobs: readonly (PositionLogprobs | null)[] | null;
}

/** With `echo`, `echoed` holds the prompt and its logprobs: they come first, as in vLLM. */
function logprobsOf(tokenizer: Tokenizer, numTop: number | null, choice: ChoiceResult, echoed: EchoedPrompt | null): CompletionLogprobs | null {
  if (numTop === null) return null;
  const out = emptyCompletionLogprobs();
  const offset = echoed === null ? 0 : appendPromptCompletionLogprobs(out, tokenizer, echoed.tokenIds, echoed.logprobs ?? [], numTop, 0);
  appendCompletionLogprobs(out, tokenizer, choice.logprobs, numTop, offset);
  return out;
}

function metricsInput(answer: CompletionAnswer, times: RequestTimes | null, numGenerationTokens: number) {
  return { enabled: answer.enablePerRequestMetrics, n: answer.n, numPrompts: answer.prompts.length, times, numGenerationTokens };
}

/** The non-streaming body: results[i] is prompt i's generation. */
export function completionBody(answer: CompletionAnswer, results: readonly GenerationResult[]): Record<string, unknown> {
  const { id, created, model, n, prompts, echo, returnTokenIds, numTop, tokenizer } = answer;
  const choices = results.flatMap((r, p) => r.choices.map((c) => ({
    index: p * n + c.index,
    text: echo ? prompts[p]!.text + c.text : c.text,
    logprobs: logprobsOf(tokenizer, numTop, c, echo ? { tokenIds: prompts[p]!.tokenIds, logprobs: r.promptLogprobs } : null),
    finish_reason: c.finishReason,
    stop_reason: c.stopReason,
    token_ids: returnTokenIds ? c.tokenIds : null,
    prompt_logprobs: r.promptLogprobs ? promptLogprobsWire(tokenizer, r.promptLogprobs) : null,
    prompt_token_ids: returnTokenIds ? prompts[p]!.tokenIds : null,
    routed_experts: null,
  })));
  const promptTokens = results.reduce((s, r) => s + r.numPromptTokens, 0);
  const completionTokens = results.reduce((s, r) => s + r.choices.reduce((t, c) => t + c.numGeneratedTokens, 0), 0);
  return {
    id, object: "text_completion", created, model, choices,
    service_tier: null, system_fingerprint: answer.fingerprint,
    usage: { ...usageWire(promptTokens, completionTokens), prompt_tokens_details: promptTokensDetails(answer.enablePromptTokensDetails, results.reduce((s, r) => s + r.numCachedTokens, 0)) },
    kv_transfer_params: results[0]?.kvTransferParams ?? null,
    ec_transfer_params: null,
    metrics: metricsWire(metricsInput(answer, results[0]!.times, completionTokens), false),
    ...(answer.timings === true ? { timings: llamaTimings({ times: results[0]!.times, numPromptTokens: results[0]!.numPromptTokens, numCachedTokens: results[0]!.numCachedTokens, numGeneratedTokens: results[0]!.choices[0]?.numGeneratedTokens ?? 0 }) } : {}),
  };
}

/** The stream's chunks, as the prompts' outputs arrive; `aborted` ends it without the usage chunk. */
export async function* completionChunks(answer: CompletionAnswer, outputs: AsyncIterable<PromptOutput>, aborted: () => boolean): AsyncGenerator<Record<string, unknown>> {
  const { id, created, model, n, prompts, echo, returnTokenIds, numTop, tokenizer, usage } = answer;
  const promptTokens = prompts.reduce((s, p) => s + p.tokenIds.length, 0);
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({ id, object: "text_completion", created, model, choices, ...extra });
  const states = prompts.map(() => Array.from({ length: n }, (_, i) => newChoice(i)));
  const offsets = prompts.map((p) => Array.from({ length: n }, () => (echo ? p.text.length : 0)));
  let times: RequestTimes | null = null;
  // each prompt's echo goes out with its first output, which carries the prompt logprobs (with logprobs set)
  const echoPending = prompts.map(() => echo);
  const cachedTokens = prompts.map(() => 0);
  for await (const { promptIndex, output } of outputs) {
    cachedTokens[promptIndex] = output.numCachedTokens;
    if (echoPending[promptIndex]) {
      echoPending[promptIndex] = false;
      for (let i = 0; i < n; i++) {
        let logprobs: CompletionLogprobs | null = null;
        if (numTop !== null) {
          logprobs = emptyCompletionLogprobs();
          offsets[promptIndex]![i] = appendPromptCompletionLogprobs(logprobs, tokenizer, prompts[promptIndex]!.tokenIds, output.promptLogprobs ?? [], numTop, 0);
        }
        yield chunk([{ index: promptIndex * n + i, text: prompts[promptIndex]!.text, logprobs, finish_reason: null }]);
      }
    }
    applyOutput(states[promptIndex]!, output);
    times = output.times;
    const timings = answer.timings === true ? { timings: llamaTimings({ times: output.times, numPromptTokens: output.numPromptTokens, numCachedTokens: output.numCachedTokens, numGeneratedTokens: states[promptIndex]![0]!.numGeneratedTokens }) } : {};
    for (const o of output.outputs) {
      if (o.finishReason === null && o.textDelta === "" && (o.logprobsDelta?.length ?? 0) === 0) continue;
      let logprobs: CompletionLogprobs | null = null;
      if (numTop !== null) {
        logprobs = emptyCompletionLogprobs();
        offsets[promptIndex]![o.index] = appendCompletionLogprobs(logprobs, tokenizer, o.logprobsDelta ?? [], numTop, offsets[promptIndex]![o.index]!);
      }
      const index = promptIndex * n + o.index;
      const ids = returnTokenIds ? { token_ids: o.tokenIdsDelta } : {};
      const choice = o.finishReason === null
        ? { index, text: o.textDelta, logprobs, finish_reason: null, ...ids }
        : { index, text: o.textDelta, logprobs, finish_reason: o.finishReason, stop_reason: o.stopReason, ...ids };
      yield chunk([choice], { ...(usage.continuousUsage ? { usage: usageWire(prompts[promptIndex]!.tokenIds.length, o.numGeneratedTokens) } : {}), ...timings });
    }
  }
  if (aborted()) return;
  if (usage.includeUsage) {
    const completionTokens = states.flat().reduce((s, c) => s + c.numGeneratedTokens, 0);
    const metrics = metricsWire(metricsInput(answer, times, completionTokens), true);
    const finalUsage = finalStreamUsageWire(promptTokens, completionTokens, answer.enablePromptTokensDetails, cachedTokens.reduce((s, c) => s + c, 0));
    yield chunk([], { usage: finalUsage, ...(metrics === null ? {} : { metrics }) });
  }
}
