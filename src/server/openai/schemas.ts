/**
 * Request bodies of the OpenAI-compatible API as Elysia `t` (TypeBox) schemas: they validate every request and document
 * it in /openapi.json. Wire names are snake_case (OpenAI / vLLM); handlers map them to camelCase in wire-to-request.ts.
 * Ranges that vLLM reports with its own messages (temperature in [0, 2], ...) are checked in wire-to-request.ts and only
 * described here, so the client gets vLLM's text. Unknown fields are accepted and ignored, as vLLM does, and logged
 * once per request with vLLM's line (request-fields.ts ignoredFieldsLine).
 */
import { t } from "elysia";
import { refusedFieldSchemas } from "./request-fields.ts";

const nullableNumber = (description: string, example?: number) =>
  t.Optional(t.Nullable(t.Number({ description, ...(example === undefined ? {} : { example }) })));
const nullableInteger = (description: string, example?: number) =>
  t.Optional(t.Nullable(t.Integer({ description, ...(example === undefined ? {} : { example }) })));
const nullableBoolean = (description: string) => t.Optional(t.Nullable(t.Boolean({ description })));

const INT64_MIN = -9223372036854775808;
const INT64_MAX = 9223372036854775807;

export const StreamOptions = t.Object({
  include_usage: nullableBoolean("Send a final chunk with `usage` (and `metrics`) and `choices: []` before `[DONE]`."),
  continuous_usage_stats: nullableBoolean("With include_usage: put the running `usage` on every chunk."),
}, { description: "Only allowed with `stream: true`." });

/** Sampling fields shared by chat and completions: OpenAI's and vLLM's extras. */
const samplingFields = {
  model: t.Optional(t.Nullable(t.String({ description: "Served model name; empty or null means the served model.", example: "stories260K" }))),
  n: nullableInteger("Number of choices to generate (1..16384); must be 1 with greedy sampling.", 1),
  temperature: nullableNumber("Sampling temperature in [0, 2]; 0 is greedy. Default 1.", 0.8),
  top_p: nullableNumber("Nucleus sampling: keep the smallest set of tokens whose probability sums to top_p, in (0, 1].", 1),
  top_k: nullableInteger("vLLM extra: keep the k most likely tokens; 0 or -1 turns it off.", 40),
  min_p: nullableNumber("vLLM extra: drop tokens less likely than min_p times the most likely one, in [0, 1].", 0.05),
  presence_penalty: nullableNumber("Penalty in [-2, 2] for tokens that already appeared.", 0),
  frequency_penalty: nullableNumber("Penalty in [-2, 2] proportional to how often a token appeared.", 0),
  repetition_penalty: nullableNumber("vLLM extra: multiplicative penalty (> 0) for tokens seen in prompt or output; 1 is off.", 1),
  logit_bias: t.Optional(t.Nullable(t.Record(t.String(), t.Number(), {
    description: "Token id (as a string key) -> bias added to its logit, in [-100, 100].", example: { "13": -100 },
  }))),
  seed: t.Optional(t.Nullable(t.Integer({ minimum: INT64_MIN, maximum: INT64_MAX, description: "Seed for reproducible sampling (int64).", example: 42 }))),
  stop: t.Optional(t.Nullable(t.Union([t.String(), t.Array(t.String())], { description: "Up to any number of strings that end generation (not included in the output).", example: ["\n\n", "The end"] }))),
  stop_token_ids: t.Optional(t.Nullable(t.Array(t.Integer(), { description: "vLLM extra: token ids that end generation.", example: [2] }))),
  include_stop_str_in_output: nullableBoolean("vLLM extra: keep the matched stop string in the output text."),
  ignore_eos: nullableBoolean("vLLM extra: keep generating after the end-of-sequence token."),
  min_tokens: nullableInteger("vLLM extra: generate at least this many tokens before EOS or stop ids may end it.", 0),
  skip_special_tokens: nullableBoolean("vLLM extra: leave special tokens out of the output text (default true)."),
  spaces_between_special_tokens: nullableBoolean("vLLM extra: accepted; special tokens are always joined without spaces."),
  stream: nullableBoolean("Stream the answer as server-sent events (`data: {...}` chunks, then `data: [DONE]`)."),
  stream_options: t.Optional(t.Nullable(StreamOptions)),
  user: t.Optional(t.Nullable(t.String({ description: "End-user id (accepted, unused)." }))),
  request_id: t.Optional(t.Nullable(t.String({ description: "vLLM extra: id used in the response (`X-Request-Id` header wins)." }))),
  priority: nullableInteger("vLLM extra: with --scheduling-policy priority, lower runs first (then arrival); any other value than 0 is refused under fcfs.", 0),
  cache_salt: t.Optional(t.Nullable(t.String({ description: "vLLM extra: prefix-cache blocks are reused only by requests with the same salt (a separate namespace per tenant)." }))),
  kv_transfer_params: t.Optional(t.Nullable(t.Record(t.String(), t.Unknown(), { description: "vLLM extra: the KV connector's per-request protocol between a prefill and a decode instance (needs --kv-transfer-config with NixlConnector): {\"do_remote_decode\": true} on the prefill leg; the prefill answer's kv_transfer_params on the decode leg." }))),
  return_tokens_as_token_ids: nullableBoolean("vLLM extra: logprob tokens are written `token_id:{id}` (default: --return-tokens-as-token-ids)."),
  prompt_logprobs: nullableInteger("vLLM extra: log probabilities of the top 0..20 tokens at every prompt position (not with streaming).", 1),
  return_token_ids: nullableBoolean("vLLM extra: also return the generated token ids (`token_ids` per choice) and the prompt's (`prompt_token_ids`)."),
  truncate_prompt_tokens: nullableInteger("vLLM extra: keep only the last k prompt tokens; -1 keeps as many as the context holds.", 64),
  use_beam_search: nullableBoolean("vLLM extra: beam search is not supported; true is refused."),
  length_penalty: nullableNumber("vLLM extra: beam search only; accepted and unused."),
  store: nullableBoolean("OpenAI: accepted; fennec stores nothing."),
  metadata: t.Optional(t.Nullable(t.Record(t.String(), t.String(), { description: "OpenAI: accepted, unused." }))),
  service_tier: t.Optional(t.Nullable(t.String({ description: "OpenAI: accepted, unused." }))),
  response_format: t.Optional(t.Nullable(t.Object({
    type: t.String({ description: "`text`, `json_object` (any JSON object), `json_schema` (the schema in `json_schema.schema`) or `structural_tag` (xgrammar's structural tag in `format`).", example: "json_schema" }),
    json_schema: t.Optional(t.Nullable(t.Object({
      name: t.Optional(t.String({ description: "A name for the schema (OpenAI requires one; unused)." })),
      description: t.Optional(t.Nullable(t.String())),
      schema: t.Optional(t.Nullable(t.Unknown({ description: "The JSON schema every answer follows (enforced token by token with xgrammar)." }))),
      strict: t.Optional(t.Nullable(t.Boolean({ description: "Accepted: the schema is always enforced, as in vLLM." }))),
    }))),
    format: t.Optional(t.Unknown({ description: "structural_tag: the tag's format (xgrammar StructuralTag)." })),
    structures: t.Optional(t.Unknown({ description: "structural_tag, legacy form: [{begin, schema, end}]." })),
    triggers: t.Optional(t.Unknown({ description: "structural_tag, legacy form: trigger prefixes." })),
  }, { description: "Output format; anything but text constrains decoding (vLLM overrides the matching structured_outputs key)." }))),
  structured_outputs: t.Optional(t.Nullable(t.Object({
    json: t.Optional(t.Nullable(t.Unknown({ description: "A JSON schema (object or JSON text)." }))),
    regex: t.Optional(t.Nullable(t.String({ description: "A regular expression the whole answer matches." }))),
    choice: t.Optional(t.Nullable(t.Array(t.String(), { description: "The answer is exactly one of these strings." }))),
    grammar: t.Optional(t.Nullable(t.String({ description: "An EBNF / GBNF grammar (xgrammar syntax, root rule `root`)." }))),
    json_object: t.Optional(t.Nullable(t.Boolean({ description: "true: any JSON object." }))),
    structural_tag: t.Optional(t.Nullable(t.String({ description: "An xgrammar structural tag as JSON text." }))),
    disable_any_whitespace: t.Optional(t.Nullable(t.Boolean({ description: "Compact JSON on one line (no free whitespace)." }))),
    disable_additional_properties: t.Optional(t.Nullable(t.Boolean({ description: "Accepted: xgrammar's strict mode already forbids properties a schema does not name." }))),
    whitespace_pattern: t.Optional(t.Nullable(t.String({ description: "Refused: the xgrammar backend has no custom whitespace pattern." }))),
  }, { description: "vLLM extra: one constraint kind per request, enforced token by token with xgrammar." }))),
  guided_json: t.Optional(t.Unknown({ description: "Pre-0.12 vLLM alias of structured_outputs.json (honoured)." })),
  guided_regex: t.Optional(t.Nullable(t.String({ description: "Pre-0.12 vLLM alias of structured_outputs.regex (honoured)." }))),
  guided_choice: t.Optional(t.Nullable(t.Array(t.String(), { description: "Pre-0.12 vLLM alias of structured_outputs.choice (honoured)." }))),
  guided_grammar: t.Optional(t.Nullable(t.String({ description: "Pre-0.12 vLLM alias of structured_outputs.grammar (honoured)." }))),
  json_schema: t.Optional(t.Unknown({ description: "llama.cpp server's field: alias of structured_outputs.json (honoured)." })),
  grammar: t.Optional(t.Nullable(t.String({ description: "llama.cpp server's GBNF field: alias of structured_outputs.grammar (honoured)." }))),
  guided_decoding_backend: t.Optional(t.Nullable(t.String({ description: "Pre-0.12 vLLM field: only `xgrammar` or `auto`." }))),
  guided_whitespace_pattern: t.Optional(t.Nullable(t.String({ description: "Pre-0.12 vLLM field: refused (xgrammar has no whitespace pattern)." }))),
  allowed_token_ids: t.Optional(t.Nullable(t.Array(t.Integer(), { description: "vLLM extra: only these token ids may be generated.", example: [13, 198] }))),
  bad_words: t.Optional(t.Nullable(t.Array(t.String(), { description: "vLLM extra: words (tokenized with and without a leading space) that are never completed.", example: ["darn"] }))),
};

/** llama.cpp server's fields on its OpenAI routes (tools/server/server-schema.cpp): its sampler chain and aliases. */
const llamaCppFields = {
  repeat_penalty: nullableNumber("llama.cpp: repetition penalty (> 0, 1 off) over the last repeat_last_n tokens; selects llama.cpp's sampler chain.", 1.1),
  repeat_last_n: nullableInteger("llama.cpp: tokens the penalties look back over (0 off, -1 the whole context; default 64).", 64),
  typical_p: nullableNumber("llama.cpp: locally typical sampling in [0, 1] (1 off).", 1),
  mirostat: nullableInteger("llama.cpp: 0 off, 1 Mirostat, 2 Mirostat 2.0.", 0),
  mirostat_tau: nullableNumber("llama.cpp: Mirostat target surprise (default 5).", 5),
  mirostat_eta: nullableNumber("llama.cpp: Mirostat learning rate (default 0.1).", 0.1),
  dry_multiplier: nullableNumber("llama.cpp: DRY penalty multiplier (0 off).", 0),
  dry_base: nullableNumber("llama.cpp: DRY base (below 1: 1.75).", 1.75),
  dry_allowed_length: nullableInteger("llama.cpp: repeats up to this length are not penalised by DRY (default 2).", 2),
  dry_penalty_last_n: nullableInteger("llama.cpp: tokens DRY scans (0 off, -1 the whole context; default 64).", 64),
  dry_sequence_breakers: t.Optional(t.Nullable(t.Array(t.String(), { description: "llama.cpp: strings that end a DRY match (non-empty).", example: ["\n", ":"] }))),
  xtc_probability: nullableNumber("llama.cpp: chance in [0, 1] that XTC removes the top choices (0 off).", 0),
  xtc_threshold: nullableNumber("llama.cpp: XTC threshold in [0, 1] (above 0.5 off; default 0.1).", 0.1),
  top_n_sigma: nullableNumber("llama.cpp: keep tokens within n standard deviations of the top logit (<= 0 off).", -1),
  dynatemp_range: nullableNumber("llama.cpp: dynamic temperature range (0 off).", 0),
  dynatemp_exponent: nullableNumber("llama.cpp: dynamic temperature exponent (default 1).", 1),
  min_keep: nullableInteger("llama.cpp: samplers keep at least this many tokens.", 0),
  samplers: t.Optional(t.Nullable(t.Union([t.String(), t.Array(t.String())], { description: "llama.cpp: the sampler chain's order, names or one-letter codes.", example: ["top_k", "temperature"] }))),
  n_predict: nullableInteger("llama.cpp: alias of max_tokens (-1: up to the context).", 32),
  n_probs: nullableInteger("llama.cpp: alias of logprobs / top_logprobs (top-N alternatives per token).", 2),
  n_cmpl: nullableInteger("llama.cpp: alias of n.", 1),
  timings_per_token: nullableBoolean("llama.cpp: add llama.cpp's `timings` object (prompt and generation speed) to the answer and to every streamed chunk."),
  cache_prompt: nullableBoolean("llama.cpp: false keeps this request out of the prefix cache (default true)."),
};

export const ChatContentPart = t.Object({
  type: t.String({ description: "`text`, or `image_url` when the model has a vision projector (--mmproj).", example: "text" }),
  text: t.Optional(t.String()),
  image_url: t.Optional(t.Object({
    url: t.String({ description: "A data URL (data:image/png;base64,...), an http(s) URL (--allowed-media-domains) or a file:// URL under --allowed-local-media-path. PNG, JPEG, WebP or GIF (first frame)." }),
    detail: t.Optional(t.String({ description: "Accepted; the projector fixes the resolution." })),
  })),
});

export const ToolCallBody = t.Object({
  id: t.Optional(t.String()),
  type: t.Optional(t.String({ example: "function" })),
  function: t.Object({
    name: t.String(),
    arguments: t.Optional(t.Union([t.String(), t.Record(t.String(), t.Unknown())], { description: "The arguments as a JSON string (OpenAI); an object is accepted too." })),
  }),
}, { description: "A tool call the assistant made." });

export const ChatMessage = t.Object({
  role: t.String({ description: "system, user, assistant, tool, developer, or any custom role.", example: "user" }),
  content: t.Optional(t.Nullable(t.Union([t.String(), t.Array(ChatContentPart)], { description: "Text, or a list of text parts." }))),
  name: t.Optional(t.String()),
  tool_calls: t.Optional(t.Nullable(t.Array(ToolCallBody, { description: "Assistant messages: the tool calls made (passed to the template)." }))),
  tool_call_id: t.Optional(t.Nullable(t.String({ description: "Tool messages: the call this result answers." }))),
  reasoning: t.Optional(t.Nullable(t.String({ description: "Assistant messages: the reasoning of an earlier turn (interleaved thinking)." }))),
  reasoning_content: t.Optional(t.Nullable(t.String({ description: "Older name of `reasoning`, accepted on input." }))),
});

export const ToolBody = t.Object({
  type: t.String({ description: "Only `function`.", example: "function" }),
  function: t.Object({
    name: t.String({ example: "get_weather" }),
    description: t.Optional(t.Nullable(t.String())),
    parameters: t.Optional(t.Nullable(t.Record(t.String(), t.Unknown(), { description: "JSON schema of the arguments." }))),
    strict: t.Optional(t.Nullable(t.Boolean())),
  }),
}, { description: "A function the model may call." });

/** Fields that reach the chat template (chat completions and the /tokenize chat form). */
const chatTemplateFields = {
  add_generation_prompt: nullableBoolean("vLLM extra: end the rendered prompt with the assistant turn opener (default true); without it the answer continues the last message, in its role."),
  continue_final_message: nullableBoolean("vLLM extra: leave the final message open so the model continues it (not together with add_generation_prompt: true)."),
  tools: t.Optional(t.Nullable(t.Array(ToolBody, { description: "OpenAI: tools the model may call; rendered into the prompt by the chat template." }))),
  documents: t.Optional(t.Nullable(t.Array(t.Record(t.String(), t.Unknown()), { description: "vLLM extra: documents for RAG templates (e.g. Granite, Command R)." }))),
  chat_template: t.Optional(t.Nullable(t.String({ description: "vLLM extra: a Jinja chat template for this request; only with --trust-request-chat-template." }))),
  chat_template_kwargs: t.Optional(t.Nullable(t.Record(t.String(), t.Unknown(), { description: "vLLM extra: extra template variables (e.g. {\"enable_thinking\": false}); override --default-chat-template-kwargs.", example: { enable_thinking: false } }))),
};

const THINKING_TOKEN_BUDGET = "vLLM extra: with --reasoning-parser, once the reasoning holds this many tokens (counted from its start) its end is forced and the answer follows; -1 unlimited.";

export const ChatCompletionRequest = t.Object({
  // refused fields first: a declaration below wins (request-fields.ts keeps every field's fate)
  ...refusedFieldSchemas("chat", []),
  messages: t.Array(ChatMessage, { description: "The conversation so far.", example: [{ role: "user", content: "Once upon a time" }] }),
  ...samplingFields,
  ...llamaCppFields,
  think: t.Optional(t.Nullable(t.Union([t.Boolean(), t.String()], { description: "Ollama: true / false turn thinking on / off (chat_template_kwargs.enable_thinking); \"high\" / \"medium\" / \"low\" are reasoning_effort." }))),
  reasoning: t.Optional(t.Nullable(t.Unknown({ description: "Ollama / OpenAI Responses: {\"effort\": ...}, read as reasoning_effort (\"none\" turns thinking off)." }))),
  max_tokens: nullableInteger("Deprecated alias of max_completion_tokens.", 32),
  max_completion_tokens: nullableInteger("Most tokens to generate; default: up to the context length.", 32),
  logprobs: nullableBoolean("Return the log probability of each generated token."),
  top_logprobs: nullableInteger("With logprobs: also return the top 0..20 alternatives per position.", 2),
  ...chatTemplateFields,
  echo: nullableBoolean("vLLM extra: prefix the answer with the last message's content when that message has the answer's role."),
  add_special_tokens: nullableBoolean("vLLM extra: add BOS/EOS when tokenizing the rendered chat (default false: the template adds them)."),
  tool_choice: t.Optional(t.Nullable(t.Union([t.String(), t.Record(t.String(), t.Unknown())], { description: "`none`, `auto` (needs --enable-auto-tool-choice and --tool-call-parser; the default when tools are given), `required` or `{\"type\": \"function\", \"function\": {\"name\": ...}}`." }))),
  parallel_tool_calls: nullableBoolean("OpenAI: false keeps only the first tool call (default true)."),
  reasoning_effort: t.Optional(t.Nullable(t.String({ description: "OpenAI: passed to the chat template as `reasoning_effort`; also sets enable_thinking (false for `none`) unless chat_template_kwargs sets it." }))),
  thinking_token_budget: nullableInteger(THINKING_TOKEN_BUDGET),
  include_reasoning: nullableBoolean("vLLM extra: with --reasoning-parser, false leaves `reasoning` out (null) of the answer (default true)."),
}, {
  description: "OpenAI Chat Completions request, plus vLLM's extra sampling fields.",
  example: { messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 32, temperature: 0.8 },
});

export const CompletionRequest = t.Object({
  ...refusedFieldSchemas("completions", []),
  prompt: t.Union([
    t.String(),
    t.Array(t.String()),
    t.Array(t.Integer()),
    t.Array(t.Array(t.Integer())),
  ], { description: "A string, a list of strings, a list of token ids, or a list of token-id lists.", example: "Once upon a time" }),
  ...samplingFields,
  ...llamaCppFields,
  max_tokens: nullableInteger("Most tokens to generate (default 16).", 16),
  logprobs: nullableInteger("Return the log probabilities of the top 0..20 tokens at each position.", 2),
  echo: nullableBoolean("Prefix each choice's text with its prompt."),
  suffix: t.Optional(t.Nullable(t.String({ description: "Accepted, not supported: must be empty." }))),
  add_special_tokens: nullableBoolean("vLLM extra: add BOS/EOS when tokenizing the prompt (default true)."),
  thinking_token_budget: nullableInteger(THINKING_TOKEN_BUDGET),
  best_of: nullableInteger("OpenAI: only best_of = n (or unset) is accepted; vLLM's V1 engine dropped best_of too."),
}, {
  description: "OpenAI (legacy) Completions request, plus vLLM's extra sampling fields.",
  example: { prompt: "Once upon a time", max_tokens: 32, temperature: 0 },
});

export const TokenizeRequest = t.Object({
  model: t.Optional(t.Nullable(t.String())),
  prompt: t.Optional(t.String({ description: "Completion form: the text to tokenize.", example: "Once upon a time" })),
  messages: t.Optional(t.Array(ChatMessage, { description: "Chat form: rendered with the chat template, then tokenized." })),
  add_special_tokens: nullableBoolean("Add BOS/EOS (default true for prompt, false for messages)."),
  ...chatTemplateFields,
  return_token_strs: nullableBoolean("Also return each token's text."),
}, { description: "vLLM /tokenize: either `prompt` or `messages`.", example: { prompt: "Once upon a time", return_token_strs: true } });

export const DetokenizeRequest = t.Object({
  model: t.Optional(t.Nullable(t.String())),
  tokens: t.Array(t.Integer(), { description: "Token ids to turn back into text.", example: [1, 403, 407] }),
}, { description: "vLLM /detokenize.", example: { tokens: [1, 403, 407] } });

export type ChatCompletionBody = typeof ChatCompletionRequest.static;
export type CompletionBody = typeof CompletionRequest.static;
export type TokenizeBody = typeof TokenizeRequest.static;
export type DetokenizeBody = typeof DetokenizeRequest.static;
export type ChatMessageBody = typeof ChatMessage.static;
export type ToolDefinitionBody = typeof ToolBody.static;
export type StreamOptionsBody = typeof StreamOptions.static;
