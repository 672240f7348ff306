/**
 * POST /v1/embeddings and /pooling bodies (vllm/entrypoints/pooling/embed/protocol.py EmbeddingCompletionRequest,
 * base/protocol.py PoolingBasicRequestMixin, EmbedRequestMixin, EncodingRequestMixin; vllm/pooling_params.py
 * PoolingParams.verify): the schema (each field's fate is a row of request-fields.ts), and the one preparation step that checks the body and tokenizes every input into
 * the engine's pooling requests. Throws ApiError (400/404) naming the parameter.
 */
import { t } from "elysia";
import { checkDimensions } from "../../../engine/resolve-pooler.ts";
import type { EncodeRequest } from "../../../frontend/orchestrator.ts";
import { ApiError, invalidParam } from "../../errors.ts";
import type { ServerOptions } from "../../server-options.ts";
import type { RequestContext } from "../../request-context.ts";
import { truncatePrompt } from "../../generation/sampling-request.ts";
import { checkPromptChars, encodePrompt } from "../prompt-text.ts";
import { refuseFields } from "../request-fields.ts";
import { checkModel, checkPromptTokenIds, promptsOf, publicRequestId, type PromptInput } from "../wire-to-request.ts";
import { ChatMessage } from "../schemas.ts";
import { DEFAULT_CHAT_SERVING } from "../../chat-serving.ts";
import { renderChatPrompt, resolveToolChoice, templateOptions, toChatMessages } from "../chat-request.ts";

const nullableBoolean = (description: string) => t.Optional(t.Nullable(t.Boolean({ description })));

/** The fields /v1/embeddings and /pooling share (vLLM's mixins). */
export const poolingFields = {
  model: t.Optional(t.Nullable(t.String({ description: "Served model name; empty or null means the served model.", example: "qwen3-embedding" }))),
  input: t.Optional(t.Union([t.String(), t.Array(t.String()), t.Array(t.Integer()), t.Array(t.Array(t.Integer()))], {
    description: "A string, a list of strings, a list of token ids, or a list of token-id lists; each is one embedding. Either this or `messages`.", example: ["The quick brown fox", "jumps over the lazy dog"],
  })),
  // vLLM EmbeddingChatRequest: the conversation rendered with the chat template is one input
  messages: t.Optional(t.Array(ChatMessage, { description: "vLLM's chat form: a conversation rendered with the chat template, embedded as one input (instead of `input`)." })),
  add_generation_prompt: nullableBoolean("Chat form: end the rendered prompt with the assistant turn opener (default false for embeddings)."),
  continue_final_message: nullableBoolean("Chat form: leave the final message open (not together with add_generation_prompt)."),
  chat_template: t.Optional(t.Nullable(t.String({ description: "Chat form: a Jinja chat template for this request; only with --trust-request-chat-template." }))),
  chat_template_kwargs: t.Optional(t.Nullable(t.Record(t.String(), t.Unknown(), { description: "Chat form: extra template variables over --default-chat-template-kwargs." }))),
  encoding_format: t.Optional(t.Nullable(t.String({ description: "`float` (a list of numbers, the default) or `base64` (the float32 bytes, base64).", example: "float" }))),
  dimensions: t.Optional(t.Nullable(t.Integer({ description: "Matryoshka models only: keep the first d values (before normalisation); any other model answers vLLM's 400." }))),
  user: t.Optional(t.Nullable(t.String({ description: "End-user id (accepted, unused)." }))),
  truncate_prompt_tokens: t.Optional(t.Nullable(t.Integer({ description: "vLLM extra: keep only the last k tokens of each input; -1 keeps as many as --max-model-len holds.", example: 256 }))),
  add_special_tokens: nullableBoolean("vLLM extra: add BOS/EOS when tokenizing text inputs (default true)."),
  normalize: nullableBoolean("vLLM extra: L2-normalise the embedding (default: the pooler's, true unless --pooler-config says otherwise)."),
  use_activation: nullableBoolean("vLLM extra (newer name of normalize for embeddings): the same switch."),
  embed_dtype: t.Optional(t.Nullable(t.String({ description: "vLLM extra: the dtype of base64 output; only float32 (the default)." }))),
  endianness: t.Optional(t.Nullable(t.String({ description: "vLLM extra: byte order of base64 output: native (the default; little-endian here), little or big." }))),
  request_id: t.Optional(t.Nullable(t.String({ description: "vLLM extra: id used in the response (`X-Request-Id` header wins)." }))),
  priority: t.Optional(t.Nullable(t.Integer({ description: "vLLM extra: with --scheduling-policy priority, lower runs first; non-zero under fcfs is refused." }))),
  cache_salt: t.Optional(t.Nullable(t.String({ description: "vLLM extra: prefix-cache blocks are reused only by requests with the same salt." }))),
  truncation_side: t.Optional(t.Nullable(t.String({ description: "vLLM extra: only `left` (keep the last tokens) is implemented." }))),
  padding: t.Optional(t.Nullable(t.String({ description: "vLLM extra: only `do_not_pad` (the default) is implemented." }))),
  mm_processor_kwargs: t.Optional(t.Unknown({ description: "Refused: fennec serves text models only." })),
};
// every field's fate is a row of request-fields.ts (docs/request-fields.md); refused ones are declared above too

export const EmbeddingRequest = t.Object(poolingFields, {
  description: "OpenAI Embeddings request, plus vLLM's extra pooling fields.",
  example: { input: ["The quick brown fox", "jumps over the lazy dog"], encoding_format: "float" },
});

export type EmbeddingBody = typeof EmbeddingRequest.static;

/** How each embedding goes on the wire. */
export interface EmbeddingEncoding {
  readonly format: "float" | "base64";
  readonly bigEndian: boolean;
}

export interface PreparedEmbedding {
  readonly id: string;
  readonly created: number;
  readonly requests: readonly EncodeRequest[];
  readonly encoding: EmbeddingEncoding;
}

/** vLLM's 400 for routes of a task the served model does not have (api_server.py: "The model does not support ... API"). */
export function requirePooler(options: ServerOptions, api: string): NonNullable<ServerOptions["orchestrator"]["pooler"]> {
  const pooler = options.orchestrator.pooler ?? null;
  if (pooler === null || options.orchestrator.encode === undefined) throw new ApiError("badRequest", `The model does not support ${api} API`);
  return pooler;
}

/** vLLM's 400 on the generation routes of an embedding model. */
export function refuseOnPoolingModel(options: ServerOptions, api: string): void {
  if ((options.orchestrator.pooler ?? null) !== null) throw new ApiError("badRequest", `The model does not support ${api} API`);
}

function encodingOf(body: EmbeddingBody): EmbeddingEncoding {
  const format = body.encoding_format ?? "float";
  if (format !== "float" && format !== "base64") {
    if (format === "bytes" || format === "bytes_only") throw invalidParam("encoding_format", `encoding_format ${format} (a binary response) is not supported by fennec; use float or base64.`, format);
    throw invalidParam("encoding_format", `encoding_format must be float or base64, got ${format}.`, format);
  }
  const endianness = body.endianness ?? "native";
  if (endianness !== "native" && endianness !== "little" && endianness !== "big") throw invalidParam("endianness", `endianness must be native, little or big, got ${endianness}.`, endianness);
  return { format, bigEndian: endianness === "big" };
}

/**
 * The preparation step (vLLM serving_embedding.py up to the generators): model, pooling parameters, every input
 * tokenized, truncated and bounded by --max-model-len; one engine pooling request per input.
 * `api` names the route in vLLM's "The model does not support ... API".
 * @example const { requests } = await prepareEmbedding(options, body, context, "embd");
 */
export async function prepareEmbedding(options: ServerOptions, body: EmbeddingBody, context: RequestContext, idPrefix: string, api = idPrefix === "pool" ? "Pooling" : "Embeddings"): Promise<PreparedEmbedding> {
  const arrivalMs = context.arrivalMs;
  const pooler = requirePooler(options, api);
  const { orchestrator } = options;
  const { tokenizer, maxModelLen } = orchestrator;
  checkModel(body.model, options.servedModelName);
  refuseFields(body, "embeddings");
  const encoding = encodingOf(body);
  if (body.normalize !== undefined && body.normalize !== null && body.use_activation !== undefined && body.use_activation !== null && body.normalize !== body.use_activation) {
    throw new ApiError("badRequest", "normalize and use_activation disagree; give one of them.", "normalize");
  }
  const normalize = body.normalize ?? body.use_activation ?? pooler.normalize;
  const dimensions = body.dimensions ?? pooler.dimensions;
  if (body.dimensions !== undefined && body.dimensions !== null) {
    const refused = checkDimensions(body.dimensions, pooler, options.servedModelName);
    if (refused !== null) throw invalidParam("dimensions", refused, body.dimensions);
  }
  const keep = body.truncate_prompt_tokens;
  if (keep !== undefined && keep !== null) {
    if (keep < -1) throw invalidParam("truncate_prompt_tokens", `truncate_prompt_tokens must be -1 or at least 0, got ${keep}.`, keep);
    if (keep > maxModelLen) {
      throw invalidParam("truncate_prompt_tokens", `truncate_prompt_tokens value (${keep}) is greater than max_model_len (${maxModelLen}). Please, select a smaller truncation size.`, keep);
    }
  }
  const inputs = inputsOf(options, body);
  if (inputs.length === 0) throw new ApiError("badRequest", "Input cannot be empty: give a string, a list of strings or token ids.", "input");
  const truncates = keep !== undefined && keep !== null;
  if (!truncates) for (const input of inputs) if ("text" in input) checkPromptChars(tokenizer, maxModelLen, input.text.length, "input");
  // vLLM: the chat form adds no special tokens by default (the template has them)
  const addSpecial = body.add_special_tokens ?? body.messages === undefined;
  const encoded = await Promise.all(inputs.map((input) => ("text" in input ? encodePrompt(tokenizer, input.text, { addSpecial, parseSpecial: true }) : null)));
  const id = `${idPrefix}-${publicRequestId(context.requestIdHeader, body.request_id)}`;
  const suffix = crypto.randomUUID().slice(0, 8);
  const requests = inputs.map((input, i): EncodeRequest => {
    const fullIds = encoded[i] ?? ("tokenIds" in input ? input.tokenIds : []);
    if (!("text" in input)) checkPromptTokenIds(fullIds, tokenizer.vocabSize);
    // pooling produces no output token: -1 keeps all of max_model_len
    const tokenIds = truncatePrompt(fullIds, keep, maxModelLen, 0);
    if (tokenIds.length === 0) throw new ApiError("badRequest", "The decoder prompt cannot be empty", "input");
    if (tokenIds.length > maxModelLen) {
      throw invalidParam("input", `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${tokenIds.length} tokens in the input for embedding generation. Please reduce the length of the input.`, tokenIds.length);
    }
    return {
      requestId: `${id}-${i}-${suffix}`, externalRequestId: inputs.length === 1 ? id : `${id}-${i}`, promptTokenIds: tokenIds,
      pooling: { normalize, dimensions }, priority: body.priority ?? 0, cacheSalt: body.cache_salt ?? null, arrivalMs,
    };
  });
  return { id, created: Math.floor(arrivalMs / 1000), requests, encoding };
}

/**
 * The inputs of the completion form, or the one rendered conversation of the chat form (vLLM EmbeddingChatRequest:
 * add_generation_prompt defaults to false; tools are not part of it).
 */
function inputsOf(options: ServerOptions, body: EmbeddingBody): PromptInput[] {
  if ((body.input === undefined) === (body.messages === undefined)) {
    throw new ApiError("badRequest", "Either `input` or `messages` must be given, not both.", body.input === undefined ? "input" : "messages");
  }
  if (body.input !== undefined) {
    for (const key of ["add_generation_prompt", "continue_final_message", "chat_template", "chat_template_kwargs"] as const) {
      if (body[key] !== undefined && body[key] !== null) throw new ApiError("badRequest", `${key} applies to the chat form (messages) only.`, key);
    }
    return promptsOf(body.input);
  }
  const chat = options.chat ?? DEFAULT_CHAT_SERVING;
  const fields = { ...body, messages: body.messages!, add_generation_prompt: body.add_generation_prompt ?? false, tool_choice: "none" as const };
  resolveToolChoice(fields, chat);
  const { tokenizer } = options.orchestrator;
  return [{ text: renderChatPrompt(tokenizer, toChatMessages(body.messages!), templateOptions(fields, { ...chat, excludeToolsWhenToolChoiceNone: false }, "none")) }];
}

/** One embedding as the wire carries it: numbers, or the float32 bytes in base64 (vLLM encoding_format="base64"). */
export function encodeEmbedding(embedding: Float32Array, encoding: EmbeddingEncoding): number[] | string {
  if (encoding.format === "float") return Array.from(embedding);
  const bytes = new Uint8Array(embedding.length * 4);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < embedding.length; i++) view.setFloat32(i * 4, embedding[i]!, !encoding.bigEndian);
  return Buffer.from(bytes).toString("base64");
}
