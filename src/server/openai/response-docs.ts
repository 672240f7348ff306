/**
 * Response documentation for /openapi.json (Swagger UI shows them under "Responses"): examples of every answer and
 * the error object. Documentation only: responses are built in the handlers and are not validated against these.
 */
const errorExample = (status: number, type: string, message: string, param: string | null) =>
  ({ description: type, content: { "application/json": { example: { error: { message, type, param, code: status } } } } });

const ERRORS = {
  400: errorExample(400, "BadRequestError", "temperature must be in [0, 2], got 3.0. (parameter=temperature, value=3)", "temperature"),
  401: errorExample(401, "AuthenticationError", "Unauthorized: a valid API key is required (Authorization: Bearer <key>, or x-api-key: <key>).", null),
  404: errorExample(404, "NotFoundError", "The model `gpt-4` does not exist.", "model"),
  413: errorExample(413, "PayloadTooLargeError", "Request body of 20000000 bytes is larger than the limit of 16777216 bytes.", null),
  500: errorExample(500, "InternalServerError", "Internal server error", null),
} as const;

const usage = { prompt_tokens: 6, completion_tokens: 5, total_tokens: 11, prompt_tokens_details: null };
const metrics = { time_to_first_token_ms: 3.2, generation_time_ms: 5.6, queue_time_ms: 0.4, mean_itl_ms: 1.4, tokens_per_second: 568.2 };

const sseExample = (chunks: readonly unknown[]) => `${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("")}data: [DONE]\n\n`;

export const CHAT_COMPLETION_RESPONSES = {
  200: {
    description: "The completion (JSON), or with `stream: true` server-sent events ending in `data: [DONE]`. `metrics` is null unless the server runs with --enable-per-request-metrics.",
    content: {
      "application/json": {
        example: {
          id: "chatcmpl-8f1c", object: "chat.completion", created: 1764400000, model: "stories260K",
          choices: [{ index: 0, message: { role: "assistant", content: " there was a little girl", refusal: null, annotations: null, audio: null, function_call: null, tool_calls: [], reasoning: null }, logprobs: null, finish_reason: "length", stop_reason: null, token_ids: null }],
          service_tier: null, system_fingerprint: "fennec-0.2.0-1a2b3c4d", usage, prompt_logprobs: null, prompt_token_ids: null, kv_transfer_params: null, metrics,
        },
      },
      "text/event-stream": {
        example: sseExample([
          { id: "chatcmpl-8f1c", object: "chat.completion.chunk", created: 1764400000, model: "stories260K", choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }] },
          { id: "chatcmpl-8f1c", object: "chat.completion.chunk", created: 1764400000, model: "stories260K", choices: [{ index: 0, delta: { content: " there" }, logprobs: null, finish_reason: null }] },
          { id: "chatcmpl-8f1c", object: "chat.completion.chunk", created: 1764400000, model: "stories260K", choices: [{ index: 0, delta: { content: " was" }, logprobs: null, finish_reason: "length", stop_reason: null }] },
          { id: "chatcmpl-8f1c", object: "chat.completion.chunk", created: 1764400000, model: "stories260K", choices: [], usage, metrics },
        ]),
      },
    },
  },
  ...ERRORS,
};

export const COMPLETION_RESPONSES = {
  200: {
    description: "The completion (JSON), or with `stream: true` server-sent events ending in `data: [DONE]`.",
    content: {
      "application/json": {
        example: {
          id: "cmpl-5a2e", object: "text_completion", created: 1764400000, model: "stories260K",
          choices: [{ index: 0, text: ", there was a little girl", logprobs: null, finish_reason: "length", stop_reason: null, token_ids: null, prompt_logprobs: null, prompt_token_ids: null }],
          service_tier: null, system_fingerprint: "fennec-0.2.0-1a2b3c4d", usage, kv_transfer_params: null, metrics: null,
        },
      },
    },
  },
  ...ERRORS,
};

export const MODELS_RESPONSES = {
  200: {
    description: "The served model.",
    content: { "application/json": { example: { object: "list", data: [{ id: "stories260K", object: "model", created: 1764400000, owned_by: "fennec", root: "embedded:stories260K", parent: null, max_model_len: 512, permission: [] }] } } },
  },
  401: ERRORS[401],
};

export const MODEL_RESPONSES = {
  200: {
    description: "The served model under this name.",
    content: { "application/json": { example: { id: "stories260K", object: "model", created: 1764400000, owned_by: "fennec", root: "embedded:stories260K", parent: null, max_model_len: 512, permission: [] } } },
  },
  401: ERRORS[401],
  404: ERRORS[404],
};

export const TOKENIZE_RESPONSES = {
  200: { description: "Token ids.", content: { "application/json": { example: { count: 5, max_model_len: 512, tokens: [1, 403, 407, 261, 560], token_strs: ["<s>", "▁Once", "▁upon", "▁a", "▁time"] } } } },
  400: ERRORS[400],
  404: ERRORS[404],
};

export const DETOKENIZE_RESPONSES = {
  200: { description: "The text.", content: { "application/json": { example: { prompt: "Once upon a time" } } } },
  400: ERRORS[400],
};
