/** POST /tokenize and POST /detokenize (vLLM extras: vllm/entrypoints/openai/serving_tokenization.py): completion or chat form. */
import { Elysia } from "elysia";
import { ApiError } from "../errors.ts";
import type { ServerOptions } from "../server-options.ts";
import { DEFAULT_CHAT_SERVING } from "../chat-serving.ts";
import { renderChatPrompt, resolveToolChoice, templateOptions, toChatMessages } from "./chat-request.ts";
import { DetokenizeRequest, TokenizeRequest, type DetokenizeBody, type TokenizeBody } from "./schemas.ts";
import { DETOKENIZE_RESPONSES, TOKENIZE_RESPONSES } from "./response-docs.ts";
import { encodePrompt } from "./prompt-text.ts";
import { checkModel } from "./wire-to-request.ts";
import { jsonPreview } from "../../util/json-limits.ts";

export async function tokenize(options: ServerOptions, body: TokenizeBody) {
  const { tokenizer } = options.orchestrator;
  checkModel(body.model, options.servedModelName);
  if (body.prompt === undefined && body.messages === undefined) {
    // vLLM's body is a union of TokenizeCompletionRequest and TokenizeChatRequest: pydantic says each one's field is missing
    throw new ApiError("invalidBody", "2 validation errors: 'prompt' is required (completion form), 'messages' is required (chat form)", "prompt");
  }
  if (body.prompt !== undefined && body.messages !== undefined) {
    throw new ApiError("badRequest", "Either `prompt` or `messages` must be given, not both.", "messages");
  }
  let tokens: number[];
  if (body.messages !== undefined) {
    // the same template fields as chat completions (vLLM's TokenizeChatRequest); tool_choice is not part of it
    const chat = options.chat ?? DEFAULT_CHAT_SERVING;
    const fields = { ...body, messages: body.messages, tool_choice: "none" as const };
    resolveToolChoice(fields, chat);
    const text = renderChatPrompt(tokenizer, toChatMessages(body.messages), templateOptions(fields, { ...chat, excludeToolsWhenToolChoiceNone: false }, "none"));
    tokens = await encodePrompt(tokenizer, text, { addSpecial: body.add_special_tokens ?? false, parseSpecial: true });
  } else {
    // any length, as vLLM's /tokenize (the body limit bounds it); a long one in slices, the event loop free meanwhile
    tokens = await encodePrompt(tokenizer, body.prompt ?? "", { addSpecial: body.add_special_tokens ?? true, parseSpecial: true });
  }
  return {
    count: tokens.length,
    max_model_len: options.orchestrator.maxModelLen,
    tokens,
    // vLLM serializes the whole response model: null when not asked for
    token_strs: body.return_token_strs === true ? tokens.map((id) => tokenizer.tokenText(id)) : null,
  };
}

export function detokenize(options: ServerOptions, body: DetokenizeBody) {
  const { tokenizer } = options.orchestrator;
  checkModel(body.model, options.servedModelName);
  const bad = body.tokens.filter((id) => id < 0 || id >= tokenizer.vocabSize);
  if (bad.length > 0) throw new ApiError("badRequest", `token id(s) ${jsonPreview(bad, 200)} are out of vocabulary (size ${tokenizer.vocabSize}).`, "tokens");
  return { prompt: tokenizer.decode(body.tokens, { skipSpecialTokens: false }) };
}

export function tokenizeRoutes(options: ServerOptions) {
  return new Elysia({ name: "vllm-tokenize" })
    .post("/tokenize", ({ body }) => tokenize(options, body), {
      body: TokenizeRequest,
      detail: { tags: ["vLLM"], summary: "Tokenize a prompt or a chat", description: "Returns the token ids (and with `return_token_strs` their texts) the model would see.", responses: TOKENIZE_RESPONSES },
    })
    .post("/detokenize", ({ body }) => detokenize(options, body), {
      body: DetokenizeRequest,
      detail: { tags: ["vLLM"], summary: "Turn token ids back into text", responses: DETOKENIZE_RESPONSES },
    });
}
