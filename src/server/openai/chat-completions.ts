/**
 * POST /v1/chat/completions: render the chat template, tokenize, check, generate; answer as one JSON body or as SSE
 * chunks in vLLM's order (role chunk, content deltas, one finish chunk per choice, optional usage chunk, [DONE]).
 */
import { Elysia } from "elysia";
import { contentText } from "../../tokenizer/chat-template.ts";
import type { ChatMessage, Tokenizer } from "../../tokenizer/tokenizer.ts";
import { nowMs } from "../../util/clock.ts";
import { ApiError } from "../errors.ts";
import type { ServerLoad } from "../load.ts";
import type { ServerOptions } from "../server-options.ts";
import { applyOutput, collectGeneration, generateOutputs, linkAbort, newChoice, primed, type ChoiceResult } from "./generation.ts";
import { chatLogprobs, promptLogprobsWire } from "./logprobs.ts";
import { ChatCompletionRequest, type ChatCompletionBody, type ChatMessageBody } from "./schemas.ts";
import { CHAT_COMPLETION_RESPONSES } from "./response-docs.ts";
import { sseResponse } from "./stream.ts";
import { checkModel, checkRequestOptions, checkSamplingParams, checkStreamOptions, publicRequestId, resolveMaxTokens, toSamplingParams, truncatePrompt, unixSeconds, usageMode } from "./to-engine.ts";
import { systemFingerprint } from "./fingerprint.ts";
import { finalStreamUsageWire, metricsWire, promptTokensDetails, usageWire } from "./usage.ts";

/** Text parts are joined; other part types (images, audio) are not supported by fennec's text models. */
export function toChatMessages(messages: readonly ChatMessageBody[]): ChatMessage[] {
  return messages.map((m, i) => {
    if (m.content === undefined || m.content === null) return { role: m.role, content: "" };
    if (typeof m.content === "string") return { role: m.role, content: m.content };
    const texts = m.content.map((part, j) => {
      if (part.type !== "text" || part.text === undefined) {
        throw new ApiError("badRequest", `messages[${i}].content[${j}]: only text parts are supported (got type "${part.type}")`, `messages[${i}].content[${j}].type`);
      }
      return part.text;
    });
    return { role: m.role, content: texts.join("\n") };
  });
}

/**
 * The chat template turned into prompt text. Templates may refuse a conversation (`raise_exception`, e.g. roles that
 * do not alternate): that is the client's input, so a 400 naming `messages`, as vLLM answers.
 */
export function renderChat(tokenizer: Tokenizer, messages: readonly ChatMessageBody[], addGenerationPrompt: boolean): string {
  const chat = toChatMessages(messages);
  try {
    return tokenizer.applyChatTemplate(chat, { addGenerationPrompt });
  } catch (error) {
    const message = error instanceof Error ? error.message.split("\n")[0]! : String(error);
    throw new ApiError("badRequest", `The chat template could not render these messages: ${message}`, "messages");
  }
}

/** vLLM's get_chat_request_role: the assistant, unless the prompt continues the last message (no generation prompt). */
export function responseRole(body: Pick<ChatCompletionBody, "messages" | "add_generation_prompt">): string {
  return (body.add_generation_prompt ?? true) ? "assistant" : (body.messages.at(-1)?.role ?? "assistant");
}

/** vLLM's chat `echo`: the last message's text, when that message has the answer's role; else "". */
export function echoText(body: Pick<ChatCompletionBody, "messages" | "add_generation_prompt" | "echo">): string {
  const last = body.messages.at(-1);
  if (body.echo !== true || last === undefined || last.role !== responseRole(body)) return "";
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
  const sampling = toSamplingParams({
    body,
    maxTokens: body.max_completion_tokens ?? body.max_tokens ?? null,
    maxTokensParam,
    logprobs: body.logprobs === true ? (body.top_logprobs ?? 0) : null,
    vocabSize: orchestrator.tokenizer.vocabSize,
  });
  const prompt = renderChat(orchestrator.tokenizer, body.messages, body.add_generation_prompt ?? true);
  const promptTokenIds = truncatePrompt(orchestrator.tokenizer.encode(prompt, { addSpecial: body.add_special_tokens ?? false, parseSpecial: true }), body.truncate_prompt_tokens, orchestrator.maxModelLen, sampling.maxTokens);
  if (promptTokenIds.length === 0) throw new ApiError("badRequest", "The decoder prompt cannot be empty", "messages");
  const maxTokens = resolveMaxTokens(promptTokenIds.length, sampling.maxTokens, maxTokensParam, orchestrator.maxModelLen);
  checkSamplingParams({ ...sampling, maxTokens }, orchestrator.tokenizer.vocabSize);

  const id = `chatcmpl-${publicRequestId(requestIdHeader, body.request_id)}`;
  const created = unixSeconds(arrivalMs);
  const model = options.servedModelName;
  const request = { requestId: `${id}-${crypto.randomUUID().slice(0, 8)}`, externalRequestId: id, promptTokenIds, sampling: { ...sampling, maxTokens }, arrivalMs };
  const abort = linkAbort(clientSignal, options.shutdownSignal, () => options.log(`${id} aborted: the client disconnected`));
  const n = sampling.n;
  const returnTokenIds = body.return_token_ids === true;
  const role = responseRole(body);
  const echoed = echoText(body);
  const fingerprint = systemFingerprint({ ...options, maxModelLen: orchestrator.maxModelLen });

  if (body.stream !== true) {
    try {
      const result = await collectGeneration(orchestrator, request, abort);
      const completionTokens = result.choices.reduce((sum, c) => sum + c.numGeneratedTokens, 0);
      return {
        id, object: "chat.completion", created, model,
        choices: result.choices.map((c) => ({
          index: c.index,
          message: { role, content: echoed + c.text, refusal: null, annotations: null, audio: null, function_call: null, tool_calls: [], reasoning: null },
          logprobs: choiceLogprobs(options, body, c),
          finish_reason: c.finishReason,
          stop_reason: c.stopReason,
          token_ids: returnTokenIds ? c.tokenIds : null,
          routed_experts: null,
        })),
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
        const hasLogprobs = body.logprobs === true && (o.logprobsDelta?.length ?? 0) > 0;
        if (o.finishReason === null && o.textDelta === "" && !hasLogprobs) continue;
        const logprobs = body.logprobs === true ? choiceLogprobs(options, body, { logprobs: [...(o.logprobsDelta ?? [])] }) : null;
        const delta = o.textDelta === "" && o.finishReason !== null ? {} : { content: o.textDelta };
        const ids = returnTokenIds ? { token_ids: o.tokenIdsDelta } : {};
        const choice = o.finishReason === null
          ? { index: o.index, delta, logprobs, finish_reason: null, ...ids }
          : { index: o.index, delta, logprobs, finish_reason: o.finishReason, stop_reason: o.stopReason, ...ids };
        // vLLM puts the fingerprint on the finish chunk unless a usage chunk will carry it
        const extra = {
          ...(usage.continuousUsage ? { usage: usageWire(numPromptTokens, o.numGeneratedTokens) } : {}),
          ...(o.finishReason !== null && !usage.includeUsage ? { system_fingerprint: fingerprint } : {}),
        };
        yield chunk([choice], extra);
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
