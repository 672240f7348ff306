/**
 * A Messages request made ready (vLLM vllm/entrypoints/anthropic/serving.py create_messages: convert, then the chat
 * handler's preparation): the Anthropic body translated into vLLM's chat fields (message-request.ts), then the
 * preparation every dialect shares (server/generation/prepare-generation.ts prepareChatGeneration: tool_choice,
 * template, grammar, sampling, tokens). count_tokens stops after the template and the tokenizer. Framework-free;
 * throws ApiError (400/404).
 * @example const { request, answer, stream } = await prepareMessage(options, body, contexts.of(request));
 */
import type { GenerateRequest } from "../../frontend/orchestrator.ts";
import { DEFAULT_CHAT_SERVING } from "../chat-serving.ts";
import { ApiError } from "../errors.ts";
import { prepareChatGeneration } from "../generation/prepare-generation.ts";
import { prepareChat } from "../openai/chat-request.ts";
import { checkPromptChars, encodePrompt, messageContentChars } from "../openai/prompt-text.ts";
import { checkModel, publicRequestId } from "../openai/wire-to-request.ts";
import { refuseOnPoolingModel } from "../openai/embedding/prepare.ts";
import type { RequestContext } from "../request-context.ts";
import { imagePartsOf, withTemplateImageParts } from "../openai/chat-completion/image-inputs.ts";
import type { ChatMessageBody } from "../openai/schemas.ts";
import type { ServerOptions } from "../server-options.ts";
import { toChatGeneration } from "./message-request.ts";
import type { MessageAnswer } from "./message-response.ts";

export interface PreparedMessage {
  readonly request: GenerateRequest;
  readonly answer: MessageAnswer;
  readonly stream: boolean;
  /** thinking enabled: reasoning tokens allowed before the reasoning is closed (thinking-budget.ts); null = none */
  readonly thinkingBudgetTokens: number | null;
  /** the reasoning parser's end token, for the budget */
  readonly reasoningEndToken: string | null;
}

export async function prepareMessage(options: ServerOptions, raw: unknown, context: RequestContext): Promise<PreparedMessage> {
  const arrivalMs = context.arrivalMs;
  const serving = options.chat ?? DEFAULT_CHAT_SERVING;
  const translated = toChatGeneration(raw, serving, false);
  // a LoRA adapter's name runs the base model with it, as on the chat route (vLLM create_messages hands the converted
  // body to the chat handler, whose _maybe_get_adapters reads `model`)
  const loraName = options.lora?.has(translated.model) === true ? translated.model : undefined;
  if (loraName === undefined) checkModel(translated.model, options.servedModelName);
  refuseOnPoolingModel(options, "Messages");
  const generation = await prepareChatGeneration(options, translated.body, { maxTokens: { value: translated.maxTokens, param: "max_tokens" }, logprobs: null });
  const { promptTokenIds, sampling } = generation;
  const id = `msg_${publicRequestId(context.requestIdHeader, null)}`;
  const request: GenerateRequest = { requestId: `${id}-${crypto.randomUUID().slice(0, 8)}`, externalRequestId: id, promptTokenIds, sampling, arrivalMs, traceHeaders: context.traceHeaders, ...(loraName !== undefined ? { loraName } : {}) };
  const reasoning = generation.output.reasoning;
  if (translated.thinkingBudgetTokens !== null && (reasoning === null || reasoning.promptEndsReasoning)) {
    throw new ApiError("badRequest", "thinking: this prompt leaves the model no reasoning to budget (the chat template closed it); leave thinking out or use {\"type\": \"adaptive\"}", "thinking");
  }
  return {
    // the images' embeddings at their placeholder rows (prepareChatGeneration placed them)
    request: generation.multimodal === undefined ? request : { ...request, multimodal: generation.multimodal },
    answer: { id, model: translated.model, numPromptTokens: promptTokenIds.length, outputConfig: generation.output, stopSequences: translated.stopSequences },
    stream: translated.stream,
    thinkingBudgetTokens: translated.thinkingBudgetTokens,
    reasoningEndToken: reasoning?.parser.endToken ?? null,
  };
}

/** POST /v1/messages/count_tokens: the prompt the same body would render, counted (vLLM's count_tokens). */
export async function countMessageTokens(options: ServerOptions, raw: unknown): Promise<{ input_tokens: number }> {
  const serving = options.chat ?? DEFAULT_CHAT_SERVING;
  const translated = toChatGeneration(raw, serving, true);
  // an adapter shares the base model's template and tokenizer
  if (options.lora?.has(translated.model) !== true) checkModel(translated.model, options.servedModelName);
  const { tokenizer, maxModelLen } = options.orchestrator;
  checkPromptChars(tokenizer, maxModelLen, messageContentChars(translated.body.messages), "messages");
  const images = countedImages(options, translated.body.messages);
  if (images > 0 && options.vision!.encoder.info.rowsFollowImage === true) {
    // each image's rows and markers follow its size (Qwen2.5-VL's grid, SmolVLM's tiles): count the prompt the request
    // would send, its images preprocessed and encoded (the encoder cache keeps them for that request)
    const generation = await prepareChatGeneration(options, translated.body, { maxTokens: { value: 1, param: "max_tokens" }, logprobs: null });
    return { input_tokens: generation.promptTokenIds.length };
  }
  const body = images === 0 ? translated.body : { ...translated.body, messages: withTemplateImageParts(translated.body.messages) };
  const chat = prepareChat(tokenizer, body, serving, false);
  const ids = await encodePrompt(tokenizer, chat.prompt, { addSpecial: false, parseSpecial: true });
  // each image's marker becomes begin, one token per embedding row, end (image-inputs.ts placeImages)
  return { input_tokens: ids.length + images * (options.vision?.encoder.info.tokensPerImage ?? 0) + images };
}

/** The images a count_tokens body holds, on a model that takes them (a fixed number of rows each: counted, not encoded). */
function countedImages(options: ServerOptions, messages: readonly ChatMessageBody[]): number {
  const parts = imagePartsOf(messages);
  if (parts.length === 0) return 0;
  if ((options.vision ?? null) === null) throw new ApiError("badRequest", "this model takes no images: it was started without a vision projector (serve it with --mmproj FILE, the model's mmproj GGUF)", parts[0]!.param);
  const limit = options.vision!.media.maxImagesPerPrompt;
  if (parts.length > limit) throw new ApiError("badRequest", `At most ${limit} image(s) may be provided in one prompt.`, "messages");
  return parts.length;
}
