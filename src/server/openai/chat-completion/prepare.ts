/**
 * The chat completion's preparation (vLLM serving_chat.py create_chat_completion up to the generator): the OpenAI
 * request rules, then the shared preparation every generating dialect uses: the chat template rendered
 * (chat-request.ts), sampling parameters and structured outputs (server/generation/sampling-request.ts,
 * sampling-extras.ts), the prompt tokenized and fitted to the context. Everything the answer depends on is fixed in a
 * ChatAnswer before anything runs. Framework-free; throws ApiError (400/404) naming the parameter.
 * @example const { request, answer } = await prepareChatCompletion(options, body, context);
 */
import { refuseOnPoolingModel } from "../embedding/prepare.ts";
import { contentText } from "../../../tokenizer/chat-template.ts";
import { ApiError } from "../../errors.ts";
import type { ServerOptions } from "../../server-options.ts";
import type { GenerateRequest } from "../../../frontend/orchestrator.ts";
import type { RequestContext } from "../../request-context.ts";
import { fitPrompt, requestedMaxTokens, toSamplingParams } from "../../generation/sampling-request.ts";
import type { ChatCompletionBody } from "../schemas.ts";
import { DEFAULT_CHAT_SERVING } from "../../chat-serving.ts";
import { outputAfterGrammar } from "../chat-output.ts";
import type { ChatAnswer } from "./response.ts";
import { prepareChat, responseRole, toChatMessages } from "../chat-request.ts";
import { checkModel, checkRequestOptions, checkStreamOptions, publicRequestId, unixSeconds, usageMode } from "../wire-to-request.ts";
import { systemFingerprint } from "../fingerprint.ts";
import { extrasContext, samplingExtras } from "../sampling-extras.ts";
import { refuseFields } from "../request-fields.ts";
import { logprobTokenizer } from "../logprobs.ts";
import { checkRequestGrammar } from "../structured-outputs.ts";
import { checkPromptChars, encodePrompt, messageContentChars } from "../prompt-text.ts";

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
export async function prepareChatCompletion(options: ServerOptions, body: ChatCompletionBody, context: RequestContext): Promise<PreparedChat> {
  // read first: the arrival is when preparation starts, not after the template and the tokenizer ran
  const arrivalMs = context.arrivalMs;
  const { orchestrator } = options;
  checkModel(body.model, options.servedModelName);
  refuseOnPoolingModel(options, "Chat Completions");
  checkStreamOptions(body.stream, body.stream_options);
  checkRequestOptions(body);
  if (body.messages.length === 0) throw new ApiError("badRequest", "messages must not be empty", "messages");
  if (body.logprobs !== true && (body.top_logprobs ?? 0) > 0) {
    throw new ApiError("badRequest", "when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
  }
  if ((body.top_logprobs ?? 0) < 0) throw new ApiError("badRequest", "top_logprobs must be a non-negative value.", "top_logprobs");
  const maxTokens = requestedMaxTokens(body, null);
  const requestedSampling = toSamplingParams({ body, maxTokens, logprobs: body.logprobs === true ? (body.top_logprobs ?? 0) : null });
  const chat = options.chat ?? DEFAULT_CHAT_SERVING;
  const extrasCtx = extrasContext(options);
  // the contents are in the rendered prompt: bound them before the template renders them
  const truncates = body.truncate_prompt_tokens !== undefined && body.truncate_prompt_tokens !== null;
  if (!truncates) checkPromptChars(orchestrator.tokenizer, orchestrator.maxModelLen, messageContentChars(body.messages), "messages");
  const prepared = prepareChat(orchestrator.tokenizer, body, chat, extrasCtx.structuredOutputs.disableAnyWhitespace);
  // after prepareChat: its reasoning checks answer thinking_token_budget with vLLM's own messages first
  refuseFields(body, "chat");
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
  // with a single-token reasoning end the grammar starts after it, and the reasoning is split off as for free text
  const gated = sampling.structuredOutputs !== null && prepared.reasoningEndTokenIds !== null;
  if (gated) sampling.structuredOutputs = { ...sampling.structuredOutputs!, reasoningEndTokenIds: prepared.reasoningEndTokenIds };
  if (!truncates) checkPromptChars(orchestrator.tokenizer, orchestrator.maxModelLen, prompt.length, "messages");
  const fullIds = await encodePrompt(orchestrator.tokenizer, prompt, { addSpecial: body.add_special_tokens ?? false, parseSpecial: true });
  const fitted = fitPrompt(fullIds, sampling, {
    maxModelLen: orchestrator.maxModelLen, vocabSize: orchestrator.tokenizer.vocabSize, ...(options.maxLogprobs !== undefined ? { maxLogprobs: options.maxLogprobs } : {}),
    truncatePromptTokens: body.truncate_prompt_tokens, maxTokensParam: maxTokens.param, promptParam: "messages",
  });
  const { promptTokenIds } = fitted;

  const id = `chatcmpl-${publicRequestId(context.requestIdHeader, body.request_id)}`;
  const request = { requestId: `${id}-${crypto.randomUUID().slice(0, 8)}`, externalRequestId: id, promptTokenIds, sampling: fitted.sampling, arrivalMs };
  const role = responseRole(body, chat);
  const outputConfig = outputAfterGrammar(prepared.output, sampling.structuredOutputs !== null, gated);
  return {
    request,
    answer: {
      id, created: unixSeconds(arrivalMs), model: options.servedModelName, tokenizer: logprobTokenizer(orchestrator.tokenizer, body.return_tokens_as_token_ids ?? options.returnTokensAsTokenIds ?? false), n: sampling.n, promptTokenIds,
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

