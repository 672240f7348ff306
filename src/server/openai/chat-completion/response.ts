/**
 * The chat completion's answer, built from the generation's outputs (vLLM serving_chat.py:
 * chat_completion_full_generator and chat_completion_stream_generator): one JSON body, or SSE chunks in vLLM's order
 * (role chunk, echo, content deltas, one finish chunk per choice, optional usage chunk). Pure: the preparation step
 * (prepare.ts) fixed everything the answer depends on in a ChatAnswer.
 * @example const body = chatCompletionBody(answer, await collectGeneration(orchestrator, request, abort));
 */
import type { RequestOutput } from "../../../frontend/orchestrator.ts";
import type { Tokenizer } from "../../../tokenizer/tokenizer.ts";
import type { ToolParserInvocation } from "../../../metrics/recorder.ts";
import { chatFinishReason, chatMessageOf, ChatStreamProcessor, type ChatOutputConfig } from "../chat-output.ts";
import { applyOutput, newChoice, type ChoiceResult, type GenerationResult } from "../../generation/run-generation.ts";
import { chatLogprobs, promptLogprobsWire } from "../logprobs.ts";
import type { UsageMode } from "../wire-to-request.ts";
import { llamaTimings } from "../llama-timings.ts";
import { finalStreamUsageWire, metricsWire, promptTokensDetails, usageWire } from "../usage.ts";

/** What a chat answer depends on, fixed before generation starts. */
export interface ChatAnswer {
  /** llama.cpp's timings_per_token: a `timings` object on the answer and on each streamed chunk (llama-timings.ts) */
  readonly timings?: boolean;
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly tokenizer: Tokenizer;
  readonly n: number;
  readonly promptTokenIds: readonly number[];
  /** the role of the answer (vLLM get_chat_request_role) */
  readonly role: string;
  /** the echoed last message ("" without echo) */
  readonly echoed: string;
  readonly returnTokenIds: boolean;
  /** the client asked for logprobs, with this many top entries */
  readonly logprobs: boolean;
  readonly topLogprobs: number;
  /** with a reasoning parser and include_reasoning false, logprobs and token ids are withheld (they show the reasoning) */
  readonly hideTokens: boolean;
  readonly outputConfig: ChatOutputConfig;
  /** told of each run of the model-format tool parser (vllm:tool_call_parser_invocations_total); absent when none runs */
  readonly onToolParserRun?: (event: ToolParserInvocation) => void;
  readonly fingerprint: string;
  readonly usage: UsageMode;
  readonly enablePromptTokensDetails: boolean;
  readonly enablePerRequestMetrics: boolean;
}

function choiceLogprobs(answer: ChatAnswer, choice: Pick<ChoiceResult, "logprobs">) {
  if (!answer.logprobs) return null;
  return { content: chatLogprobs(answer.tokenizer, choice.logprobs, answer.topLogprobs) };
}

/** The non-streaming body. */
export function chatCompletionBody(answer: ChatAnswer, result: GenerationResult): Record<string, unknown> {
  const { id, created, model, role, echoed, returnTokenIds, hideTokens, outputConfig, fingerprint, n } = answer;
  const completionTokens = result.choices.reduce((sum, c) => sum + c.numGeneratedTokens, 0);
  return {
    id, object: "chat.completion", created, model,
    choices: result.choices.map((c) => {
      const message = chatMessageOf(c.text, outputConfig);
      answer.onToolParserRun?.({ mode: "non_streaming", outcome: message.toolCalls.length > 0 ? "tool_call" : "no_tool_call" });
      const content = echoed === "" ? message.content : echoed + (message.content ?? "");
      return {
        index: c.index,
        message: { role, content, refusal: null, annotations: null, audio: null, function_call: null, tool_calls: message.toolCalls, reasoning: message.reasoning },
        logprobs: hideTokens ? null : choiceLogprobs(answer, c),
        // vLLM: tool calls found by the parser make the finish reason "tool_calls"
        finish_reason: c.finishReason === null ? null : chatFinishReason(c.finishReason, message.toolCalls.length > 0, outputConfig, false),
        stop_reason: c.stopReason,
        token_ids: returnTokenIds && !hideTokens ? c.tokenIds : null,
        routed_experts: null,
      };
    }),
    service_tier: null, system_fingerprint: fingerprint,
    usage: { ...usageWire(result.numPromptTokens, completionTokens), prompt_tokens_details: promptTokensDetails(answer.enablePromptTokensDetails, result.numCachedTokens) },
    prompt_logprobs: result.promptLogprobs ? promptLogprobsWire(answer.tokenizer, result.promptLogprobs) : null,
    prompt_token_ids: returnTokenIds ? answer.promptTokenIds : null,
    prompt_text: null,
    kv_transfer_params: result.kvTransferParams,
    ec_transfer_params: null,
    metrics: metricsWire({ enabled: answer.enablePerRequestMetrics, n, numPrompts: 1, times: result.times, numGenerationTokens: completionTokens }, false),
    ...(answer.timings === true ? { timings: llamaTimings({ times: result.times, numPromptTokens: result.numPromptTokens, numCachedTokens: result.numCachedTokens, numGeneratedTokens: result.choices[0]?.numGeneratedTokens ?? 0 }) } : {}),
  };
}

/** The stream's chunks, as the outputs arrive; `aborted` ends it without the usage chunk. */
export async function* chatCompletionChunks(answer: ChatAnswer, outputs: AsyncIterable<RequestOutput>, aborted: () => boolean): AsyncGenerator<Record<string, unknown>> {
  const { id, created, model, role, echoed, returnTokenIds, hideTokens, outputConfig, fingerprint, n, usage } = answer;
  const numPromptTokens = answer.promptTokenIds.length;
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({ id, object: "chat.completion.chunk", created, model, choices, ...extra });
  const choices: ChoiceResult[] = Array.from({ length: n }, (_, i) => newChoice(i));
  const processors = Array.from({ length: n }, () => new ChatStreamProcessor(outputConfig));
  for (let i = 0; i < n; i++) {
    yield chunk([{ index: i, delta: { role, content: "" }, logprobs: null, finish_reason: null }],
      usage.continuousUsage ? { usage: usageWire(numPromptTokens, 0) } : {});
  }
  if (echoed !== "") {
    for (let i = 0; i < n; i++) {
      yield chunk([{ index: i, delta: { content: echoed }, logprobs: null, finish_reason: null }],
        usage.continuousUsage ? { usage: usageWire(numPromptTokens, 0) } : {});
    }
  }
  let times = null;
  let cachedTokens = 0;
  for await (const output of outputs) {
    applyOutput(choices, output);
    times = output.times;
    cachedTokens = output.numCachedTokens;
    const timings = answer.timings === true ? { timings: llamaTimings({ times: output.times, numPromptTokens, numCachedTokens: output.numCachedTokens, numGeneratedTokens: choices[0]!.numGeneratedTokens }) } : {};
    for (const o of output.outputs) {
      const hasLogprobs = answer.logprobs && !hideTokens && (o.logprobsDelta?.length ?? 0) > 0;
      const final = o.finishReason !== null;
      const deltas = processors[o.index]!.push(o.textDelta, final);
      answer.onToolParserRun?.({ mode: "streaming", outcome: deltas.some((d) => d.tool_calls !== undefined) ? "tool_call" : "no_tool_call" });
      if (!final && deltas.length === 0 && !hasLogprobs) continue;
      const logprobs = answer.logprobs && !hideTokens ? choiceLogprobs(answer, { logprobs: [...(o.logprobsDelta ?? [])] }) : null;
      const ids = returnTokenIds && !hideTokens ? { token_ids: o.tokenIdsDelta } : {};
      // every delta but the last goes alone; the last carries the finish reason; logprobs and ids go on the first
      const pieces: Record<string, unknown>[] = deltas.length === 0 ? [final ? {} : { content: "" }] : deltas.map((d) => ({ ...d }));
      for (let k = 0; k < pieces.length; k++) {
        const last = k === pieces.length - 1;
        const extras = k === 0 ? { logprobs, ...ids } : { logprobs: null };
        if (!(final && last)) {
          yield chunk([{ index: o.index, delta: pieces[k], ...extras, finish_reason: null }], { ...(usage.continuousUsage ? { usage: usageWire(numPromptTokens, o.numGeneratedTokens) } : {}), ...timings });
          continue;
        }
        const finishReason = chatFinishReason(o.finishReason!, processors[o.index]!.calledTools, outputConfig, true);
        const choice = { index: o.index, delta: pieces[k], ...extras, finish_reason: finishReason, stop_reason: o.stopReason };
        // vLLM puts the fingerprint on the finish chunk unless a usage chunk will carry it
        const extra = {
          ...(usage.continuousUsage ? { usage: usageWire(numPromptTokens, o.numGeneratedTokens) } : {}),
          ...(!usage.includeUsage ? { system_fingerprint: fingerprint } : {}),
          ...timings,
        };
        yield chunk([choice], extra);
      }
    }
  }
  if (aborted()) return;
  if (usage.includeUsage) {
    const completionTokens = choices.reduce((sum, c) => sum + c.numGeneratedTokens, 0);
    const metrics = metricsWire({ enabled: answer.enablePerRequestMetrics, n, numPrompts: 1, times, numGenerationTokens: completionTokens }, true);
    const finalUsage = finalStreamUsageWire(numPromptTokens, completionTokens, answer.enablePromptTokensDetails, cachedTokens);
    yield chunk([], { usage: finalUsage, system_fingerprint: fingerprint, ...(metrics === null ? {} : { metrics }) });
  }
}
