/**
 * The body of POST /v1/responses as a `t` schema (vLLM's ResponsesRequest, vllm/entrypoints/openai/responses/
 * protocol.py; OpenAI's reference for the shapes). Input items and tools are checked item by item in input-items.ts
 * and prepare.ts, so a bad item gets a 400 naming `input[i]...` or `tools[i]...` rather than a union mismatch.
 * Fields vLLM accepts but fennec cannot honour are declared here too, so prepare.ts can refuse them by name.
 */
import { t } from "elysia";

const nullableNumber = (description: string) => t.Optional(t.Nullable(t.Number({ description })));
const nullableInteger = (description: string) => t.Optional(t.Nullable(t.Integer({ description })));
const nullableBoolean = (description: string) => t.Optional(t.Nullable(t.Boolean({ description })));
const nullableString = (description: string) => t.Optional(t.Nullable(t.String({ description })));
const anyObject = (description: string) => t.Optional(t.Nullable(t.Record(t.String(), t.Unknown(), { description })));

export const ResponsesRequest = t.Object({
  input: t.Union([t.String(), t.Array(t.Record(t.String(), t.Unknown()))], {
    description: "A user message as text, or a list of items: messages (`{role, content}` or `{type: \"message\", ...}`), `function_call`, `function_call_output` and `reasoning` items.",
    example: "Tell me a story.",
  }),
  model: nullableString("Must be the served model name (or empty)."),
  instructions: nullableString("A system message placed before the input (not carried over from previous_response_id)."),
  max_output_tokens: nullableInteger("Most tokens to generate; clamped to what the context has left (vLLM). Default: up to the context."),
  temperature: nullableNumber("In [0, 2]; 0 is greedy."),
  top_p: nullableNumber("In (0, 1]."),
  top_k: nullableInteger("vLLM extra: 0 or -1 off."),
  presence_penalty: nullableNumber("In [-2, 2]."),
  frequency_penalty: nullableNumber("In [-2, 2]."),
  repetition_penalty: nullableNumber("vLLM extra."),
  seed: nullableInteger("vLLM extra: seed for reproducible sampling."),
  stop: t.Optional(t.Nullable(t.Union([t.String(), t.Array(t.String())], { description: "vLLM extra: strings that end the output." }))),
  ignore_eos: nullableBoolean("vLLM extra: keep generating after EOS."),
  skip_special_tokens: nullableBoolean("vLLM extra: leave special tokens out of the text (default true)."),
  include_stop_str_in_output: nullableBoolean("vLLM extra: keep the matched stop string."),
  logit_bias: t.Optional(t.Nullable(t.Record(t.String(), t.Number(), { description: "vLLM extra: token id -> bias, clamped to [-100, 100]." }))),
  stream: nullableBoolean("Stream typed server-sent events (`event: <type>` / `data: {...}`, each with `sequence_number`)."),
  store: nullableBoolean("Keep the response (default true) for GET, previous_response_id and background; the store is bounded (docs/responses.md)."),
  background: nullableBoolean("Answer at once with status `queued` and run in the background (needs store)."),
  previous_response_id: nullableString("Continue from a stored response: its input messages and output messages come before this input."),
  include: t.Optional(t.Nullable(t.Array(t.String(), { description: "`message.output_text.logprobs` turns on logprobs; `reasoning.encrypted_content` is accepted (fennec has no encrypted reasoning: reasoning is returned in clear)." }))),
  top_logprobs: nullableInteger("With include message.output_text.logprobs: the top alternatives per token."),
  tools: t.Optional(t.Nullable(t.Array(t.Record(t.String(), t.Unknown()), { description: "Function tools (`{type: \"function\", name, description, parameters, strict}`) and namespaces of them; built-in tools are refused." }))),
  tool_choice: t.Optional(t.Nullable(t.Union([t.String(), t.Record(t.String(), t.Unknown())], { description: "`auto` (default), `none`, `required` or `{\"type\": \"function\", \"name\": ...}`." }))),
  parallel_tool_calls: nullableBoolean("false keeps only the first tool call (default true)."),
  max_tool_calls: nullableInteger("Refused when set: only built-in tool loops would count against it, and fennec has none."),
  reasoning: t.Optional(t.Nullable(t.Object({
    effort: nullableString("Passed to the chat template as reasoning_effort; `none` also sets enable_thinking false."),
    summary: nullableString("Accepted (Codex sends `auto`): fennec writes no summaries; reasoning items carry the reasoning text itself."),
    generate_summary: nullableString("Deprecated alias of summary."),
  }))),
  include_reasoning: nullableBoolean("vLLM extra: false drops the reasoning item (and logprobs) from the output."),
  text: t.Optional(t.Nullable(t.Object({
    format: t.Optional(t.Nullable(t.Record(t.String(), t.Unknown(), { description: "`{type: \"text\"}`, `{type: \"json_object\"}` or `{type: \"json_schema\", name, schema, strict}`: enforced token by token with xgrammar." }))),
    verbosity: nullableString("Refused unless medium: no model fennec serves reads it."),
  }))),
  truncation: nullableString("`disabled` (default) or `auto` (keep the end of the prompt that fits)."),
  metadata: t.Optional(t.Nullable(t.Record(t.String(), t.String(), { description: "Echoed in the response." }))),
  user: nullableString("Echoed in the response."),
  service_tier: nullableString("Echoed; fennec has one tier."),
  prompt_cache_key: nullableString("Accepted: the prefix cache needs no key (vLLM documents it as ignored)."),
  safety_identifier: nullableString("Accepted: an end-user id, like user."),
  client_metadata: anyObject("Codex's per-turn metadata: accepted, unused (it does not change the output)."),
  prompt: t.Optional(t.Unknown({ description: "Prompt templates: refused (vLLM: prompt template is not supported)." })),
  conversation: t.Optional(t.Unknown({ description: "Conversations API: refused (not served)." })),
  stream_options: anyObject("Refused unless empty or include_obfuscation false: fennec adds no obfuscation."),
  request_id: nullableString("vLLM extra: the response id (X-Request-Id header wins); default resp_<hex>."),
  priority: nullableInteger("vLLM extra: with --scheduling-policy priority, lower runs first."),
  cache_salt: nullableString("vLLM extra: prefix-cache namespace."),
  structured_outputs: anyObject("vLLM extra: json, regex, choice, grammar, ... (not together with text.format)."),
  chat_template_kwargs: anyObject("vLLM extra: extra chat template variables."),
  enable_response_messages: nullableBoolean("vLLM extra: also return input_messages and output_messages (the chat messages)."),
  previous_input_messages: t.Optional(t.Unknown({ description: "vLLM extra for gpt-oss (Harmony) only: refused." })),
  vllm_xargs: anyObject("vLLM extra: refused when not empty (no custom logits processors)."),
  mm_processor_kwargs: anyObject("vLLM extra: refused when not empty (the projector fixes image processing)."),
  media_io_kwargs: anyObject("vLLM extra: refused when not empty (the projector fixes image processing)."),
  kv_transfer_params: anyObject("vLLM extra: refused on /v1/responses (use chat completions for disaggregated prefill)."),
}, {
  description: "OpenAI Responses request as vLLM serves it.",
  example: { input: "Tell me a story.", max_output_tokens: 32 },
});

export type ResponsesBody = typeof ResponsesRequest.static;
