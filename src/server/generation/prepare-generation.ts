/**
 * The preparation every generating dialect shares, between its own request rules and its own answer: a dialect
 * (OpenAI chat and completions today; the Responses API, Anthropic Messages and Ollama's /api/* next) translates its
 * body into vLLM's field names (the OpenAI chat / completions names) and calls one of these:
 * - prepareChatGeneration: tool_choice and reasoning, the chat template rendered, structured outputs (a forced tool
 *   call's grammar or response_format's), sampling parameters, the prompt tokenized and fitted to the context, and
 *   how the output will be parsed (tools, reasoning);
 * - prepareTextGeneration: sampling parameters and structured outputs for prompts the dialect already has (text or
 *   token ids), each tokenized and fitted to the context.
 * Both end in fitPrompt, the one server-side check of the sampling parameters (vllm/entrypoints/openai/serving_chat.py
 * and serving_completion.py, up to the generator). Framework-free; throws ApiError (400) naming the parameter.
 * @example const chat = await prepareChatGeneration(options, body, { maxTokens: requestedMaxTokens(body, null), logprobs: null });
 */
import type { MultimodalInput } from "../../engine/protocol.ts";
import type { EncodedImage } from "../../vision/vision-client.ts";
import { encodeImages, imagePartsOf, placeImages, withTemplateImageParts, type ImagePart } from "../openai/chat-completion/image-inputs.ts";
import type { SamplingParams } from "../../engine/sampling-params.ts";
import { ApiError } from "../errors.ts";
import type { ServerOptions } from "../server-options.ts";
import { DEFAULT_CHAT_SERVING } from "../chat-serving.ts";
import { outputAfterGrammar, type ChatOutputConfig } from "../openai/chat-output.ts";
import { prepareChat, type ChatRequestFields, type PreparedChat } from "../openai/chat-request.ts";
import { checkPromptChars, encodePrompt, messageContentChars } from "../openai/prompt-text.ts";
import { extrasContext, samplingExtras, type SamplingExtrasBody } from "../openai/sampling-extras.ts";
import { checkRequestGrammar } from "../openai/structured-outputs.ts";
import { withThinkingTokenBudget } from "../openai/thinking-token-budget.ts";
import type { PromptInput } from "../openai/wire-to-request.ts";
import { fitPrompt, toSamplingParams, type PromptLimits, type RequestedMaxTokens, type SamplingBody, type SamplingInput } from "./sampling-request.ts";
import { llamaSampling, type LlamaSamplingBody } from "./llama-sampling-request.ts";

/** The prompt-side fields both forms read. */
interface PromptFields {
  readonly truncate_prompt_tokens?: number | null;
  readonly add_special_tokens?: boolean | null;
}

/** A chat request in vLLM's names: the conversation and template fields, sampling, structured outputs. */
export interface ChatGenerationBody extends ChatRequestFields, SamplingBody, SamplingExtrasBody, LlamaSamplingBody, PromptFields {}

/** A prompt request in vLLM's names: sampling and structured outputs (the prompts come separately). */
export interface TextGenerationBody extends SamplingBody, SamplingExtrasBody, LlamaSamplingBody, PromptFields {}

/** What the dialect decided before the shared part runs. */
export interface GenerationChoices {
  /** the output budget asked for (requestedMaxTokens) */
  readonly maxTokens: RequestedMaxTokens;
  /** top logprobs per generated token, null = none */
  readonly logprobs: number | null;
}

export interface ChatGeneration {
  readonly promptTokenIds: readonly number[];
  /** the images' embeddings at their placeholder positions (EngineRequest.multimodal); absent: no images */
  readonly multimodal?: readonly MultimodalInput[];
  /** checked, with max_tokens resolved for this prompt */
  readonly sampling: SamplingParams;
  /** tool choice, prompt and the parsers, as prepareChat made them */
  readonly chat: PreparedChat;
  /** how the output is parsed, after the grammar's effect on the reasoning (outputAfterGrammar) */
  readonly output: ChatOutputConfig;
}

/** One prompt of a text request, ready for the engine. */
export interface TextGeneration {
  readonly promptTokenIds: readonly number[];
  readonly sampling: SamplingParams;
}

/** What every prompt is fitted against: the model, --max-logprobs and the request's truncation. */
function promptLimits(options: ServerOptions, body: PromptFields, maxTokensParam: RequestedMaxTokens["param"], promptParam: string): PromptLimits {
  const { orchestrator } = options;
  return {
    maxModelLen: orchestrator.maxModelLen, vocabSize: orchestrator.tokenizer.vocabSize, ...(options.maxLogprobs !== undefined ? { maxLogprobs: options.maxLogprobs } : {}),
    truncatePromptTokens: body.truncate_prompt_tokens, maxTokensParam, promptParam,
  };
}

/** vLLM's fields, then llama.cpp's over them (llama-sampling-request.ts). */
function requestSampling(options: ServerOptions, input: SamplingInput & { readonly body: SamplingBody & LlamaSamplingBody }): SamplingParams {
  const base = toSamplingParams(input);
  return { ...base, ...llamaSampling(input.body, options.orchestrator.tokenizer, base) };
}

const truncates = (body: PromptFields): boolean => body.truncate_prompt_tokens !== undefined && body.truncate_prompt_tokens !== null;

/**
 * A conversation made ready for the engine. `refuseFields` runs the dialect's refused-field checks after the
 * template's own (so vLLM's messages for e.g. thinking_token_budget come first).
 */
export async function prepareChatGeneration(options: ServerOptions, body: ChatGenerationBody, choices: GenerationChoices, refuseFields: () => void = () => {}): Promise<ChatGeneration> {
  const { tokenizer, maxModelLen } = options.orchestrator;
  const requested = requestSampling(options, { body, maxTokens: choices.maxTokens, logprobs: choices.logprobs });
  const serving = options.chat ?? DEFAULT_CHAT_SERVING;
  const extrasCtx = extrasContext(options);
  // the contents are in the rendered prompt: bound them before the template renders them
  if (!truncates(body)) checkPromptChars(tokenizer, maxModelLen, messageContentChars(body.messages), "messages");
  const imageParts = imagePartsOf(body.messages);
  let encoded: readonly EncodedImage[] = [];
  if (imageParts.length > 0) {
    checkImageParts(options, imageParts, truncates(body));
    // images first (loaded, decoded and encoded on the vision thread): a bad one costs no template or tokenizer work here
    encoded = await encodeImages(options.vision!, imageParts);
    body = { ...body, messages: withTemplateImageParts(body.messages) };
  }
  const chat = prepareChat(tokenizer, body, serving, extrasCtx.structuredOutputs.disableAnyWhitespace);
  refuseFields();
  const extras = await samplingExtras(body, extrasCtx);
  if (chat.grammar !== null && extras.structuredOutputs !== null) {
    throw new ApiError("badRequest", "You can only either use constraints for structured outputs or tools, not both.", "tool_choice");
  }
  // the tools' schemas become a grammar: xgrammar's verdict on them is a 400 before any engine work
  if (chat.grammar !== null) await checkRequestGrammar(extrasCtx.checker, { spec: chat.grammar, param: "tools" });
  const sampling = {
    ...requested,
    ...extras,
    // vLLM's hermes / mistral adjust_request: their tags are special tokens the parser must see
    ...(chat.keepSpecialTokens ? { skipSpecialTokens: false } : {}),
    // tool_choice required / named: vLLM's adjust_request replaces the structured-output constraint with the tools' schema
    ...(chat.grammar !== null ? { structuredOutputs: chat.grammar } : {}),
  };
  // with a single-token reasoning end the grammar starts after it, and the reasoning is split off as for free text
  const gated = sampling.structuredOutputs !== null && chat.reasoningEndTokenIds !== null;
  if (gated) sampling.structuredOutputs = { ...sampling.structuredOutputs!, reasoningEndTokenIds: chat.reasoningEndTokenIds };
  if (!truncates(body)) checkPromptChars(tokenizer, maxModelLen, chat.prompt.length, "messages");
  const textIds = await encodePrompt(tokenizer, chat.prompt, { addSpecial: body.add_special_tokens ?? false, parseSpecial: true });
  // images: encoded on the vision thread (the encoder cache answers repeats), then placed at the template's markers
  const placed = imageParts.length > 0 ? placeImages(tokenizer, textIds, encoded, options.vision!) : null;
  const fitted = fitPrompt(placed?.promptTokenIds ?? textIds, sampling, promptLimits(options, body, choices.maxTokens.param, "messages"));
  // vLLM's thinking_token_budget: the reasoning's start is read from the prompt as fitted (the engine sees that one)
  const budgeted = withThinkingTokenBudget(tokenizer, chat.output.reasoning?.parser ?? null, chat.thinkingTokenBudget, fitted.promptTokenIds, fitted.sampling);
  return { ...fitted, sampling: budgeted, chat, output: outputAfterGrammar(chat.output, sampling.structuredOutputs !== null, gated), ...(placed !== null ? { multimodal: placed.multimodal } : {}) };
}

/** A model with a projector, no more images than --limit-mm-per-prompt, no truncation that could cut an image. */
function checkImageParts(options: ServerOptions, parts: readonly ImagePart[], truncated: boolean): void {
  const vision = options.vision ?? null;
  if (vision === null) {
    throw new ApiError("badRequest", "this model takes no images: it was started without a vision projector (serve it with --mmproj FILE, the model's mmproj GGUF)", parts[0]!.param);
  }
  const limit = vision.media.maxImagesPerPrompt;
  if (parts.length > limit) throw new ApiError("badRequest", `At most ${limit} image(s) may be provided in one prompt.`, "messages");
  if (truncated) throw new ApiError("badRequest", "truncate_prompt_tokens cannot be used with images: it could cut an image's tokens apart", "truncate_prompt_tokens");
}

/** Sampling parameters and structured outputs of a prompt request, once for all its prompts (not yet checked). */
export async function textSampling(options: ServerOptions, body: TextGenerationBody, choices: GenerationChoices): Promise<SamplingParams> {
  return { ...requestSampling(options, { body, maxTokens: choices.maxTokens, logprobs: choices.logprobs }), ...await samplingExtras(body, extrasContext(options)) };
}

/**
 * Every prompt of a text request (text prompts are tokenized with add_special_tokens, default true) made ready for
 * the engine: each text bounded before any is tokenized (unless it is
 * to be truncated: vLLM tokenizes it whole first), then tokenized, and each fitted to the context with `sampling`.
 * `checkPrompt` sees each prompt's full token ids first (the dialect's own refusals: empty, out of vocabulary).
 */
export async function prepareTextGeneration(
  options: ServerOptions, body: TextGenerationBody, inputs: readonly PromptInput[], sampling: SamplingParams,
  how: { readonly maxTokensParam: RequestedMaxTokens["param"]; readonly promptParam: string; readonly checkPrompt?: (input: PromptInput, fullIds: readonly number[]) => void },
): Promise<(TextGeneration & { readonly fullIds: readonly number[] })[]> {
  const { tokenizer, maxModelLen } = options.orchestrator;
  const addSpecial = body.add_special_tokens ?? true;
  if (!truncates(body)) for (const input of inputs) if ("text" in input) checkPromptChars(tokenizer, maxModelLen, input.text.length, how.promptParam);
  const encoded = await Promise.all(inputs.map((input) => ("text" in input ? encodePrompt(tokenizer, input.text, { addSpecial, parseSpecial: true }) : null)));
  const limits = promptLimits(options, body, how.maxTokensParam, how.promptParam);
  return inputs.map((input, i) => {
    const fullIds = encoded[i] ?? ("tokenIds" in input ? input.tokenIds : []);
    how.checkPrompt?.(input, fullIds);
    return { ...fitPrompt(fullIds, sampling, limits), fullIds };
  });
}
