/**
 * POST /v1/chat/completions: render the chat template, tokenize, check, generate; answer as one JSON body or as SSE
 * chunks in vLLM's order (role chunk, content deltas, one finish chunk per choice, optional usage chunk, [DONE]).
 */
import { Elysia } from "elysia";
import { contentText } from "../../tokenizer/chat-template.ts";
import { nowMs } from "../../util/clock.ts";
import { ApiError } from "../errors.ts";
import type { ServerLoad } from "../load.ts";
import type { ServerOptions } from "../server-options.ts";
import { applyOutput, collectGeneration, generateOutputs, linkAbort, newChoice, primed, type ChoiceResult } from "./generation.ts";
import { chatLogprobs, promptLogprobsWire } from "./logprobs.ts";
import { ChatCompletionRequest, type ChatCompletionBody } from "./schemas.ts";
import { DEFAULT_CHAT_SERVING } from "../chat-serving.ts";
import { chatFinishReason, chatMessageOf, ChatStreamProcessor, outputAfterGrammar } from "./chat-output.ts";
import { prepareChat, responseRole, toChatMessages } from "./chat-request.ts";
import { CHAT_COMPLETION_RESPONSES } from "./response-docs.ts";
import { sseResponse } from "./stream.ts";
import { checkModel, checkRequestOptions, checkSamplingParams, checkStreamOptions, publicRequestId, resolveMaxTokens, toSamplingParams, truncatePrompt, unixSeconds, usageMode } from "./to-engine.ts";
import { systemFingerprint } from "./fingerprint.ts";
import { extrasContext, samplingExtras } from "./sampling-extras.ts";
import { checkRequestGrammar } from "./structured-outputs.ts";
import { finalStreamUsageWire, metricsWire, promptTokensDetails, usageWire } from "./usage.ts";

export { toChatMessages };

/** vLLM's chat `echo`: the last message's text, when that message has the answer's role; else "". */
export function echoText(body: Pick<ChatCompletionBody, "messages" | "add_generation_prompt" | "echo">, role: string): string {
  const last = body.messages.at(-1);
  if (body.echo !== true || last === undefined || last.role !== role) return "";
  return contentText(toChatMessages([last])[0]!.content);
}

function choiceLogprobs(options: ServerOptions, body: ChatCompletionBody, choice: Pick<ChoiceResult, "logprobs">) {
  if (body.logprobs !== true) return null;
  return { content: chatLogprobs(options.orchestrator.tokenizer, choice.logprobs, body.top_logprobs ?? 0) };
}

export async function createChatCompletion(options: ServerOptions, body: ChatCompletionBody, requestIdHeader: string | null, clientSignal: AbortSignal | undefined): Promise<Response | Record<string, unknown>> {
  const arrivalMs = nowMs();
  const { orchestrator } = options;
  checkModel(body.model, options.servedModelName);
  checkStreamOptions(body.stream, body.stream_options);
  checkRequestOptions(body);
  if (body.messages.length === 0) throw new ApiError("badRequest", "messages must not be empty", "messages");
  if (body.logprobs !== true && (body.top_logprobs ?? 0) > 0) {
    throw new ApiError("badRequest", "when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
  }
  if ((body.top_logprobs ?? 0) < 0) throw new ApiError("badRequest", "top_logprobs must be a non-negative value.", "top_logprobs");
  const maxTokensParam = body.max_completion_tokens !== undefined && body.max_completion_tokens !== null ? "max_completion_tokens" : "max_tokens";
  const requestedSampling = toSamplingParams({
    body,
    maxTokens: body.max_completion_tokens ?? body.max_tokens ?? null,
    maxTokensParam,
    logprobs: body.logprobs === true ? (body.top_logprobs ?? 0) : null,
    vocabSize: orchestrator.tokenizer.vocabSize,
    ...(options.maxLogprobs !== undefined ? { maxLogprobs: options.maxLogprobs } : {}),
  });
  const chat = options.chat ?? DEFAULT_CHAT_SERVING;
  const extrasCtx = extrasContext(options);
  const prepared = prepareChat(orchestrator.tokenizer, body, chat, extrasCtx.structuredOutputs.disableAnyWhitespace);
  const prompt = prepared.prompt;
  const extras = await samplingExtras(body, extrasCtx);
  if (prepared.grammar !== null && extras.structuredOutputs !== null) {
    throw new ApiError("badRequest", "You can only either use constraints for structured outputs or tools, not both.", "tool_choice");
  }
  // the tools' schemas become a grammar: xgrammar's verdict on them is a 400 before any engine work
  if (prepared.grammar !== null) await checkRequestGrammar(extrasCtx.checker, { spec: prepared.grammar, param: "tools" });
  // vLLM's hermes / mistral adjust_request: their tags are special tokens the parser must see
  const sampling = {
    ...requestedSampling,
    ...extras,
    ...(prepared.keepSpecialTokens ? { skipSpecialTokens: false } : {}),
    // tool_choice required / named: vLLM's adjust_request replaces the structured-output constraint with the tools' schema
    ...(prepared.grammar !== null ? { structuredOutputs: prepared.grammar } : {}),
  };
  const promptTokenIds = truncatePrompt(orchestrator.tokenizer.encode(prompt, { addSpecial: body.add_special_tokens ?? false, parseSpecial: true }), body.truncate_prompt_tokens, orchestrator.maxModelLen, sampling.maxTokens);
  if (promptTokenIds.length === 0) throw new ApiError("badRequest", "The decoder prompt cannot be empty", "messages");
  const maxTokens = resolveMaxTokens(promptTokenIds.length, sampling.maxTokens, maxTokensParam, orchestrator.maxModelLen);
  checkSamplingParams({ ...sampling, maxTokens }, orchestrator.tokenizer.vocabSize, options.maxLogprobs);

  const id = `chatcmpl-${publicRequestId(requestIdHeader, body.request_id)}`;
  const created = unixSeconds(arrivalMs);
  const model = options.servedModelName;
  const request = { requestId: `${id}-${crypto.randomUUID().slice(0, 8)}`, externalRequestId: id, promptTokenIds, sampling: { ...sampling, maxTokens }, arrivalMs };
  const abort = linkAbort(clientSignal, options.shutdownSignal, () => options.log(`${id} aborted: the client disconnected`));
  const n = sampling.n;
  const returnTokenIds = body.return_token_ids === true;
  const role = responseRole(body, chat);
  const echoed = echoText(body, role);
  // with a reasoning parser, include_reasoning false also withholds logprobs and token ids (they would show the reasoning)
  const hideTokens = prepared.output.reasoning !== null && !prepared.output.reasoning.include;
  const outputConfig = outputAfterGrammar(prepared.output, sampling.structuredOutputs !== null);
  const fingerprint = systemFingerprint({ ...options, maxModelLen: orchestrator.maxModelLen });

  if (body.stream !== true) {
    try {
      const result = await collectGeneration(orchestrator, request, abort);
      const completionTokens = result.choices.reduce((sum, c) => sum + c.numGeneratedTokens, 0);
      return {
        id, object: "chat.completion", created, model,
        choices: result.choices.map((c) => {
          const message = chatMessageOf(c.text, outputConfig);
          const content = echoed === "" ? message.content : echoed + (message.content ?? "");
          return {
            index: c.index,
            message: { role, content, refusal: null, annotations: null, audio: null, function_call: null, tool_calls: message.toolCalls, reasoning: message.reasoning },
            logprobs: hideTokens ? null : choiceLogprobs(options, body, c),
            // vLLM: tool calls found by the parser make the finish reason "tool_calls"
            finish_reason: c.finishReason === null ? null : chatFinishReason(c.finishReason, message.toolCalls.length > 0, outputConfig, false),
            stop_reason: c.stopReason,
            token_ids: returnTokenIds && !hideTokens ? c.tokenIds : null,
            routed_experts: null,
          };
        }),
        service_tier: null, system_fingerprint: fingerprint,
        usage: { ...usageWire(result.numPromptTokens, completionTokens), prompt_tokens_details: promptTokensDetails(options.enablePromptTokensDetails, result.numCachedTokens) },
        prompt_logprobs: result.promptLogprobs ? promptLogprobsWire(orchestrator.tokenizer, result.promptLogprobs) : null,
        prompt_token_ids: returnTokenIds ? promptTokenIds : null,
        prompt_text: null,
        kv_transfer_params: null,
        ec_transfer_params: null,
        metrics: metricsWire({ enabled: options.enablePerRequestMetrics, n, numPrompts: 1, times: result.times, numGenerationTokens: completionTokens }, false),
      };
    } finally {
      abort.dispose();
    }
  }

  const usage = usageMode(body.stream_options, options.forceIncludeUsage);
  const numPromptTokens = promptTokenIds.length;
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({ id, object: "chat.completion.chunk", created, model, choices, ...extra });
  const outputs = await primed(generateOutputs(orchestrator, request, abort)).catch((error: unknown) => {
    abort.dispose();
    throw error;
  });
  async function* chunks() {
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
      for (const o of output.outputs) {
        const hasLogprobs = body.logprobs === true && !hideTokens && (o.logprobsDelta?.length ?? 0) > 0;
        const final = o.finishReason !== null;
        const deltas = processors[o.index]!.push(o.textDelta, final);
        if (!final && deltas.length === 0 && !hasLogprobs) continue;
        const logprobs = body.logprobs === true && !hideTokens ? choiceLogprobs(options, body, { logprobs: [...(o.logprobsDelta ?? [])] }) : null;
        const ids = returnTokenIds && !hideTokens ? { token_ids: o.tokenIdsDelta } : {};
        // every delta but the last goes alone; the last carries the finish reason; logprobs and ids go on the first
        const pieces: Record<string, unknown>[] = deltas.length === 0 ? [final ? {} : { content: "" }] : deltas.map((d) => ({ ...d }));
        for (let k = 0; k < pieces.length; k++) {
          const last = k === pieces.length - 1;
          const extras = k === 0 ? { logprobs, ...ids } : { logprobs: null };
          if (!(final && last)) {
            yield chunk([{ index: o.index, delta: pieces[k], ...extras, finish_reason: null }], usage.continuousUsage ? { usage: usageWire(numPromptTokens, o.numGeneratedTokens) } : {});
            continue;
          }
          const finishReason = chatFinishReason(o.finishReason!, processors[o.index]!.calledTools, outputConfig, true);
          const choice = { index: o.index, delta: pieces[k], ...extras, finish_reason: finishReason, stop_reason: o.stopReason };
          // vLLM puts the fingerprint on the finish chunk unless a usage chunk will carry it
          const extra = {
            ...(usage.continuousUsage ? { usage: usageWire(numPromptTokens, o.numGeneratedTokens) } : {}),
            ...(!usage.includeUsage ? { system_fingerprint: fingerprint } : {}),
          };
          yield chunk([choice], extra);
        }
      }
    }
    if (abort.controller.signal.aborted) return;
    if (usage.includeUsage) {
      const completionTokens = choices.reduce((sum, c) => sum + c.numGeneratedTokens, 0);
      const metrics = metricsWire({ enabled: options.enablePerRequestMetrics, n, numPrompts: 1, times, numGenerationTokens: completionTokens }, true);
      const finalUsage = finalStreamUsageWire(numPromptTokens, completionTokens, options.enablePromptTokensDetails, cachedTokens);
      yield chunk([], { usage: finalUsage, system_fingerprint: fingerprint, ...(metrics === null ? {} : { metrics }) });
    }
  }
  return sseResponse(chunks(), { onCancel: () => abort.clientGone(), onEnd: () => abort.dispose(), log: options.log });
}

/** `track` counts the request for GET /load (server/load.ts) until its response is over. */
export function chatCompletionsRoutes(options: ServerOptions, track: ServerLoad["track"] = (handler) => handler()) {
  return new Elysia({ name: "openai-chat-completions" }).post(
    "/v1/chat/completions",
    ({ body, headers, request }) => track(() => createChatCompletion(options, body, headers["x-request-id"] ?? null, request.signal)),
    {
      body: ChatCompletionRequest,
      detail: {
        tags: ["OpenAI"],
        summary: "Create a chat completion",
        description: "OpenAI Chat Completions with vLLM's extra sampling fields. With `stream: true` the answer comes as server-sent events. With `--enable-per-request-metrics` the response carries a top-level `metrics` object.",
        security: [{ bearerAuth: [] }],
        responses: CHAT_COMPLETION_RESPONSES,
      },
    },
  );
}
