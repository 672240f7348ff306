/**
 * POST /v1/completions/render and POST /v1/chat/completions/render (vllm/entrypoints/serve/render/api_router.py):
 * the request prepared exactly as /v1/completions and /v1/chat/completions prepare it (model check, template,
 * tokenizer, context budget, sampling checks), then answered with its GenerateRequest instead of run. Completions
 * answer a list (one per prompt), chat one object. Nothing reaches the engine. A KV-aware router calls these to
 * tokenize text prompts for precise prefix-cache routing.
 * @example app.use(renderRoutes(options, contexts));
 */
import { Elysia } from "elysia";
import type { ServerOptions } from "../../server-options.ts";
import { RequestContexts } from "../../request-context.ts";
import { prepareCompletion } from "../completion/prepare.ts";
import { prepareChatCompletion } from "../chat-completion/prepare.ts";
import { ChatCompletionRequest, CompletionRequest } from "../schemas.ts";
import { generateRequestJson } from "./generate-request.ts";

const RENDERED = {
  request_id: "cmpl-3f1c", token_ids: [1, 403, 407, 261, 378], features: null,
  sampling_params: {
    n: 1, presence_penalty: 0, frequency_penalty: 0, repetition_penalty: 1, temperature: 1, top_p: 1, top_k: 0, min_p: 0, seed: null,
    stop: [], stop_token_ids: [], ignore_eos: false, max_tokens: 16, min_tokens: 0, logprobs: null, prompt_logprobs: null,
    include_stop_str_in_output: false, skip_special_tokens: true, structured_outputs: null, logit_bias: null, allowed_token_ids: null, extra_args: null,
  },
  model: null, stream: false, stream_options: null, cache_salt: null, priority: 0, kv_transfer_params: null,
};
const BAD_REQUEST = {
  description: "The request is invalid (the same checks as the generating route).",
  content: { "application/json": { example: { error: { message: "max_tokens must be at least 1, got 0.", type: "BadRequestError", param: "max_tokens", code: 400 } } } },
};
const NOT_FOUND = {
  description: "The model is not served here.",
  content: { "application/json": { example: { error: { message: "The model `gpt-4` does not exist.", type: "NotFoundError", param: "model", code: 404 } } } },
};

export function renderRoutes(options: ServerOptions, contexts = new RequestContexts()) {
  return new Elysia({ name: "vllm-render" })
    .post("/v1/completions/render", async ({ body, request }) => {
      const { requests } = await prepareCompletion(options, body, contexts.of(request));
      return requests.map((r) => generateRequestJson(r, body));
    }, {
      body: CompletionRequest,
      detail: {
        tags: ["vLLM"], summary: "Render a completion request to token ids",
        description: "The completion request prepared as /v1/completions would (tokenized, fitted to the context, sampling checked), returned as a list of vLLM GenerateRequest objects (one per prompt) instead of run.",
        security: [{ bearerAuth: [] }],
        responses: { 200: { description: "One GenerateRequest per prompt.", content: { "application/json": { example: [RENDERED] } } }, 400: BAD_REQUEST, 404: NOT_FOUND },
      },
    })
    .post("/v1/chat/completions/render", async ({ body, request }) => {
      const { request: prepared } = await prepareChatCompletion(options, body, contexts.of(request));
      return generateRequestJson(prepared, body);
    }, {
      body: ChatCompletionRequest,
      detail: {
        tags: ["vLLM"], summary: "Render a chat request to token ids",
        description: "The chat request prepared as /v1/chat/completions would (chat template, tokenizer, context budget, sampling checked), returned as one vLLM GenerateRequest instead of run.",
        security: [{ bearerAuth: [] }],
        responses: { 200: { description: "The GenerateRequest.", content: { "application/json": { example: { ...RENDERED, request_id: "chatcmpl-9a2e" } } } }, 400: BAD_REQUEST, 404: NOT_FOUND },
      },
    });
}
