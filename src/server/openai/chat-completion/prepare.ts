/**
 * The chat completion's preparation (vLLM serving_chat.py create_chat_completion up to the generator): the OpenAI
 * request rules, then the preparation every generating dialect shares (server/generation/prepare-generation.ts
 * prepareChatGeneration: template, structured outputs, sampling, tokens). Everything the answer depends on is fixed
 * in a ChatAnswer before anything runs. Framework-free; throws ApiError (400/404) naming the parameter.
 * @example const { request, answer } = await prepareChatCompletion(options, body, context);
 */
import { refuseOnPoolingModel } from "../embedding/prepare.ts";
import { contentText } from "../../../tokenizer/chat-template.ts";
import { ApiError } from "../../errors.ts";
import type { ServerOptions } from "../../server-options.ts";
import type { GenerateRequest } from "../../../frontend/orchestrator.ts";
import type { RequestContext } from "../../request-context.ts";
import { requestedMaxTokens } from "../../generation/sampling-request.ts";
import { prepareChatGeneration } from "../../generation/prepare-generation.ts";
import type { ChatCompletionBody } from "../schemas.ts";
import { DEFAULT_CHAT_SERVING } from "../../chat-serving.ts";
import type { ChatAnswer } from "./response.ts";
import { responseRole, toChatMessages } from "../chat-request.ts";
import { checkModel, checkRequestOptions, checkStreamOptions, publicRequestId, unixSeconds, usageMode } from "../wire-to-request.ts";
import { systemFingerprint } from "../fingerprint.ts";
import { logIgnoredFields, refuseFields } from "../request-fields.ts";
import { resolveAliases } from "../field-aliases.ts";
import { logprobTokenizer } from "../logprobs.ts";

/** vLLM's chat `echo`: the last message's text, when that message has the answer's role; else "". */
export function echoText(body: Pick<ChatCompletionBody, "messages" | "add_generation_prompt" | "echo">, role: string): string {
  const last = body.messages.at(-1);
  if (body.echo !== true || last === undefined || last.role !== role) return "";
  return contentText(toChatMessages([last])[0]!.content);
}

/** The request for the engine and everything its answer depends on, checked once, before anything runs. */
export interface PreparedChat {
  readonly request: GenerateRequest;
  readonly answer: ChatAnswer;
}

/**
 * The preparation step (vLLM serving_chat.py create_chat_completion up to the generator): model, stream options and
 * request-level rules, sampling from the body, the rendered and tokenized prompt, the context-length budget, ids.
 * Throws ApiError (400/404) naming the parameter.
 */
export async function prepareChatCompletion(options: ServerOptions, clientBody: ChatCompletionBody, context: RequestContext): Promise<PreparedChat> {
  logIgnoredFields(options.log, context.bodyKeys, "chat");
  const body = resolveAliases(clientBody, "chat");
  // read first: the arrival is when preparation starts, not after the template and the tokenizer ran
  const arrivalMs = context.arrivalMs;
  const { orchestrator } = options;
  // a LoRA adapter's name runs the base model with it (vLLM _maybe_get_adapters); answers carry the adapter's name
  const loraName = options.lora?.has(body.model) === true ? body.model! : undefined;
  if (loraName === undefined) checkModel(body.model, options.servedModelName);
  refuseOnPoolingModel(options, "Chat Completions");
  checkStreamOptions(body.stream, body.stream_options);
  checkRequestOptions(body);
  if (body.messages.length === 0) throw new ApiError("badRequest", "messages must not be empty", "messages");
  if (body.logprobs !== true && (body.top_logprobs ?? 0) > 0) {
    throw new ApiError("badRequest", "when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
  }
  if ((body.top_logprobs ?? 0) < 0) throw new ApiError("badRequest", "top_logprobs must be a non-negative value.", "top_logprobs");
  const generation = await prepareChatGeneration(options, body, {
    maxTokens: requestedMaxTokens(body, null),
    logprobs: body.logprobs === true ? (body.top_logprobs ?? 0) : null,
  }, () => refuseFields(body, "chat"));
  const { promptTokenIds, sampling, chat: prepared, multimodal } = generation;

  const id = `chatcmpl-${publicRequestId(context.requestIdHeader, body.request_id)}`;
  const request = { requestId: `${id}-${crypto.randomUUID().slice(0, 8)}`, externalRequestId: id, promptTokenIds, sampling, arrivalMs, traceHeaders: context.traceHeaders, ...(multimodal !== undefined ? { multimodal } : {}), ...(loraName !== undefined ? { loraName } : {}) };
  const role = responseRole(body, options.chat ?? DEFAULT_CHAT_SERVING);
  const outputConfig = generation.output;
  return {
    request,
    answer: {
      timings: body.timings_per_token === true,
      id, created: unixSeconds(arrivalMs), model: loraName ?? options.servedModelName, tokenizer: logprobTokenizer(orchestrator.tokenizer, body.return_tokens_as_token_ids ?? options.returnTokensAsTokenIds ?? false), n: sampling.n, promptTokenIds,
      role, echoed: echoText(body, role), returnTokenIds: body.return_token_ids === true,
      logprobs: body.logprobs === true, topLogprobs: body.top_logprobs ?? 0,
      // with a reasoning parser, include_reasoning false also withholds logprobs and token ids (they would show the reasoning)
      hideTokens: prepared.output.reasoning !== null && !prepared.output.reasoning.include,
      outputConfig,
      // the counter is of the model-format parser's runs (auto), not of the forced forms
      ...(outputConfig.tools !== null && (outputConfig.tools.forced ?? null) === null && options.onToolParserInvocation !== undefined ? { onToolParserRun: options.onToolParserInvocation } : {}),
      fingerprint: systemFingerprint({ ...options, maxModelLen: orchestrator.maxModelLen }),
      usage: usageMode(body.stream_options, options.forceIncludeUsage),
      enablePromptTokensDetails: options.enablePromptTokensDetails === true, enablePerRequestMetrics: options.enablePerRequestMetrics,
    },
  };
}

