/**
 * The fate of every request field of vLLM's ChatCompletionRequest, CompletionRequest and EmbeddingCompletionRequest
 * (vllm/entrypoints/openai/chat_completion/protocol.py, completion/protocol.py, pooling/embed/protocol.py), plus the OpenAI and llama.cpp fields clients send: implemented,
 * accepted with no effect (and why that is right), or refused with a 400 naming the field. Nothing that changes the
 * output is ignored. docs/request-fields.md is this table (test/server/request-fields.test.ts keeps them equal and
 * sends every row). Refused fields are declared in the request schemas too, so they reach refuseFields.
 */
import { t } from "elysia";
import { ApiError } from "../errors.ts";

export type FieldFate = "implemented" | "no-op" | "refused";
export type Endpoint = "chat" | "completions" | "embeddings";

export interface RequestField {
  readonly name: string;
  readonly endpoints: readonly Endpoint[];
  readonly fate: FieldFate;
  /** what it does, why it has no effect, or why it is refused (and what to do instead) */
  readonly note: string;
  /** refused rows: values that change nothing and so pass (vLLM's defaults) */
  readonly inert?: (value: unknown) => boolean;
}

const BOTH: readonly Endpoint[] = ["chat", "completions"];
const CHAT: readonly Endpoint[] = ["chat"];
const COMPLETIONS: readonly Endpoint[] = ["completions"];
/** /v1/embeddings (and /pooling, which takes the same fields): vLLM's EmbeddingCompletionRequest */
const EMBEDDINGS: readonly Endpoint[] = ["embeddings"];
const ALL: readonly Endpoint[] = ["chat", "completions", "embeddings"];
/** the fields of a conversation: chat completions, and the chat form of /v1/embeddings (vLLM EmbeddingChatRequest) */
const CHAT_FORMS: readonly Endpoint[] = ["chat", "embeddings"];
const empty = (v: unknown): boolean => v === null || v === false || v === 0 || (Array.isArray(v) && v.length === 0) || (typeof v === "object" && v !== null && Object.keys(v).length === 0);

const row = (name: string, endpoints: readonly Endpoint[], fate: FieldFate, note: string, inert?: (v: unknown) => boolean): RequestField =>
  ({ name, endpoints, fate, note, ...(inert ? { inert } : {}) });

export const REQUEST_FIELDS: readonly RequestField[] = [
  row("messages", CHAT_FORMS, "implemented", "The conversation, rendered with the chat template (embeddings: vLLM's chat form, one embedding of the rendered conversation, instead of input)."),
  row("prompt", COMPLETIONS, "implemented", "Text, texts, token ids or lists of token ids."),
  row("input", EMBEDDINGS, "implemented", "Text, texts, token ids or lists of token ids: one embedding each, pooled by the engine's scheduler in one batch."),
  row("encoding_format", EMBEDDINGS, "implemented", "float (numbers) or base64 (the float32 bytes); bytes / bytes_only (binary responses) are a 400."),
  row("dimensions", EMBEDDINGS, "implemented", "Matryoshka models only: the first d values, before normalisation; on any other model vLLM's 400 (a GGUF does not say it is matryoshka, so every GGUF is one of those)."),
  row("normalize", EMBEDDINGS, "implemented", "L2-normalise the pooled vector (default: the pooler's, true unless --pooler-config says normalize false)."),
  row("use_activation", EMBEDDINGS, "implemented", "vLLM's newer name of normalize for embeddings (a disagreement between the two is a 400)."),
  row("embed_dtype", EMBEDDINGS, "refused", "Only float32 output is implemented (vLLM also rounds to float16 / bfloat16 / fp8 for base64).", (v) => v === null || v === "float32"),
  row("endianness", EMBEDDINGS, "implemented", "Byte order of base64 output: native (little-endian here), little or big."),
  row("padding", EMBEDDINGS, "refused", "Inputs are never padded (max_length padding is for models trained without an attention mask).", (v) => v === null || v === "do_not_pad"),
  row("model", ALL, "implemented", "Must be the served model name (or empty); anything else is vLLM's 404."),
  row("frequency_penalty", BOTH, "implemented", "Subtracted per occurrence in the output, in [-2, 2]."),
  row("presence_penalty", BOTH, "implemented", "Subtracted once per token present in the output, in [-2, 2]."),
  row("repetition_penalty", BOTH, "implemented", "Divides (or multiplies) the logits of tokens seen in prompt or output."),
  row("logit_bias", BOTH, "implemented", "Token id -> bias, clamped to [-100, 100], chat and completions."),
  row("logprobs", BOTH, "implemented", "Chat: true/false; completions: number of top alternatives."),
  row("top_logprobs", CHAT, "implemented", "With logprobs: the top alternatives per position (at most --max-logprobs)."),
  row("max_tokens", BOTH, "implemented", "The output budget (completions default 16; chat: up to the context)."),
  row("max_completion_tokens", CHAT, "implemented", "Wins over max_tokens."),
  row("n", BOTH, "implemented", "Choices per prompt (child sequences sharing the prompt's KV blocks)."),
  row("response_format", BOTH, "implemented", "text, json_object, json_schema, structural_tag: enforced token by token with xgrammar. With `--reasoning-parser qwen3` / `deepseek_r1` the grammar starts after the `</think>` token (the reasoning is free and returned as `reasoning`), as vLLM; with `granite` / `openai_gptoss` (no single end token) it holds from the first token and the output is content."),
  row("structured_outputs", BOTH, "implemented", "json, regex, choice, grammar, json_object, structural_tag, disable_any_whitespace; disable_additional_properties is accepted (xgrammar's strict mode already forbids unnamed properties); whitespace_pattern is refused (outlines only)."),
  row("guided_json", BOTH, "implemented", "vLLM < 0.12 spelling of structured_outputs.json, honoured (vLLM now ignores it, which would silently drop the constraint)."),
  row("guided_regex", BOTH, "implemented", "Alias of structured_outputs.regex."),
  row("guided_choice", BOTH, "implemented", "Alias of structured_outputs.choice."),
  row("guided_grammar", BOTH, "implemented", "Alias of structured_outputs.grammar."),
  row("guided_decoding_backend", BOTH, "no-op", "Only xgrammar or auto are accepted (fennec's one backend); anything else is a 400."),
  row("guided_whitespace_pattern", BOTH, "refused", "The xgrammar backend has no whitespace pattern; use structured_outputs.disable_any_whitespace.", (v) => v === null),
  row("json_schema", BOTH, "implemented", "llama.cpp server's field: alias of structured_outputs.json."),
  row("grammar", BOTH, "implemented", "llama.cpp server's GBNF field: alias of structured_outputs.grammar (xgrammar reads GBNF-style EBNF)."),
  row("seed", BOTH, "implemented", "Per-request generator; children of n > 1 use seed + i."),
  row("stop", BOTH, "implemented", "Strings that end the output (not included unless include_stop_str_in_output)."),
  row("stop_token_ids", BOTH, "implemented", "Token ids that end the output; stop_reason is the id; the token's text is left out, as vLLM."),
  row("include_stop_str_in_output", BOTH, "implemented", "Keeps the matched stop string (or stop token's text)."),
  row("ignore_eos", BOTH, "implemented", "Generation goes on past EOS."),
  row("min_tokens", BOTH, "implemented", "EOS and stop ids are masked until this many tokens were generated."),
  row("stream", BOTH, "implemented", "Server-sent events in vLLM's chunk order."),
  row("stream_options", BOTH, "implemented", "include_usage, continuous_usage_stats (only with stream)."),
  row("temperature", BOTH, "implemented", "In [0, 2]; 0 is greedy."),
  row("top_p", BOTH, "implemented", "In (0, 1]."),
  row("top_k", BOTH, "implemented", "0 or -1 off."),
  row("min_p", BOTH, "implemented", "In [0, 1]."),
  row("tools", CHAT, "implemented", "Rendered by the chat template; parsed with --tool-call-parser (issue 15)."),
  row("tool_choice", CHAT, "implemented", "none / auto (needs --enable-auto-tool-choice) / required / named (forced with a grammar)."),
  row("parallel_tool_calls", CHAT, "implemented", "false keeps the first tool call only."),
  row("reasoning_effort", CHAT, "implemented", "Passed to the chat template; sets enable_thinking."),
  row("include_reasoning", CHAT, "implemented", "With --reasoning-parser: false leaves reasoning out."),
  row("thinking_token_budget", BOTH, "refused", "Needs vLLM's reasoning budget (forcing the end-of-thinking tokens), which fennec does not implement yet.", (v) => v === null || v === -1),
  row("user", ALL, "no-op", "An end-user id for the provider's logs; vLLM ignores it too."),
  row("use_beam_search", BOTH, "refused", "Beam search is not implemented (vLLM V1 runs it outside the engine).", (v) => v === null || v === false),
  row("length_penalty", BOTH, "no-op", "Only read by beam search, which is refused."),
  row("skip_special_tokens", BOTH, "implemented", "false shows control tokens in the text."),
  row("spaces_between_special_tokens", BOTH, "no-op", "fennec's byte-level / SentencePiece detokenizer joins special tokens without spaces either way; the text only differs for WordPiece-style tokenizers fennec does not load."),
  row("truncate_prompt_tokens", ALL, "implemented", "Keeps the last k prompt tokens; -1 as many as fit (embeddings: all of --max-model-len; more than it is vLLM's 400)."),
  row("truncation_side", ALL, "refused", "Only left truncation (keep the end) is implemented; right is refused.", (v) => v === null || v === "left"),
  row("prompt_logprobs", BOTH, "implemented", "Logprobs of every prompt position (not with stream)."),
  row("logprob_token_ids", BOTH, "refused", "Logprobs of chosen token ids are not implemented; use top_logprobs / logprobs.", (v) => v === null),
  row("allowed_token_ids", BOTH, "implemented", "Only these ids may be sampled (empty or out of vocabulary: vLLM's 400)."),
  row("bad_words", BOTH, "implemented", "Each word (with and without a leading space) is never completed."),
  row("echo", BOTH, "implemented", "Completions: the prompt first; chat: the last message's content when it has the answer's role."),
  row("add_generation_prompt", CHAT_FORMS, "implemented", "Ends the prompt with the assistant turn opener (default true; embeddings false)."),
  row("continue_final_message", CHAT_FORMS, "implemented", "Leaves the last message open (not with add_generation_prompt true)."),
  row("add_special_tokens", ALL, "implemented", "BOS/EOS when tokenizing (chat default false, completions and embeddings true)."),
  row("documents", CHAT, "implemented", "Passed to the chat template (RAG templates)."),
  row("chat_template", CHAT_FORMS, "implemented", "Only with --trust-request-chat-template (vLLM's 400 otherwise)."),
  row("chat_template_kwargs", CHAT_FORMS, "implemented", "Extra template variables over --default-chat-template-kwargs."),
  row("media_io_kwargs", CHAT, "refused", "fennec serves text models only.", empty),
  row("mm_processor_kwargs", [...CHAT, ...EMBEDDINGS], "refused", "fennec serves text models only.", empty),
  row("priority", ALL, "implemented", "With --scheduling-policy priority, lower first; non-zero under fcfs is a 400."),
  row("request_id", ALL, "implemented", "The response id (the X-Request-Id header wins)."),
  row("session_id", BOTH, "no-op", "A routing hint for multi-replica deployments; one fennec process has nothing to route.", (v) => v === null || typeof v === "string"),
  row("return_tokens_as_token_ids", BOTH, "implemented", "Logprob tokens as token_id:{id}."),
  row("return_token_ids", BOTH, "implemented", "Adds token_ids per choice and prompt_token_ids."),
  row("routed_experts_prompt_start", BOTH, "refused", "MoE routing export: fennec runs no mixture-of-experts model.", (v) => v === null || v === 0),
  row("return_token_offsets", BOTH, "refused", "Render endpoints only in vLLM; fennec has none.", (v) => v === null || v === false),
  row("return_prompt_text", BOTH, "refused", "prompt_text in the answer is not implemented yet.", (v) => v === null || v === false),
  row("return_assistant_tokens_mask", CHAT, "refused", "Render endpoint only in vLLM; fennec has none.", (v) => v === null || v === false),
  row("cache_salt", ALL, "implemented", "Separates prefix-cache namespaces: blocks are reused only under the same salt."),
  row("kv_transfer_params", BOTH, "implemented", "With --kv-transfer-config NixlConnector (fennec's TCP transport): do_remote_decode pins the prompt's blocks and the answer carries the params; do_remote_prefill reads them from the prefill instance. Without a connector it is refused (400)."),
  row("ec_transfer_params", BOTH, "refused", "Encoder-cache disaggregation: fennec runs no encoder.", (v) => v === null),
  row("vllm_xargs", BOTH, "refused", "Extra arguments for custom logits processors, which fennec cannot load.", empty),
  row("repetition_detection", BOTH, "refused", "Early stop on repeated n-grams is not implemented.", (v) => v === null),
  row("stream_interval", BOTH, "refused", "Tokens per streamed chunk above 1 are not implemented (every token is sent).", (v) => v === null || v === 1),
  row("suffix", COMPLETIONS, "refused", "Fill-in-the-middle suffixes are not supported (vLLM accepts and ignores it).", (v) => v === null || v === ""),
  row("best_of", COMPLETIONS, "implemented", "Only equal to n (vLLM V1 dropped best_of too); anything else is a 400."),
  row("prompt_embeds", COMPLETIONS, "refused", "Prompt embeddings need --enable-prompt-embeds, which fennec does not have.", (v) => v === null),
  row("store", BOTH, "no-op", "OpenAI's stored completions: fennec stores nothing, and says so in the field's docs."),
  row("metadata", BOTH, "no-op", "OpenAI's tags for stored completions: nothing is stored."),
  row("service_tier", BOTH, "no-op", "OpenAI's processing tier: one tier here; answers carry service_tier null as vLLM's."),
  row("functions", CHAT, "refused", "OpenAI's deprecated function calling: use tools.", (v) => v === null),
  row("function_call", CHAT, "refused", "OpenAI's deprecated function calling: use tool_choice.", (v) => v === null),
  row("prediction", BOTH, "refused", "OpenAI's predicted outputs are not implemented.", (v) => v === null),
  row("modalities", CHAT, "refused", "Only text output.", (v) => v === null || (Array.isArray(v) && v.every((m) => m === "text"))),
  row("audio", CHAT, "refused", "No audio output.", (v) => v === null),
  row("web_search_options", CHAT, "refused", "No web search.", (v) => v === null),
  row("logits_processors", BOTH, "refused", "Per-request logits processors (removed from vLLM): fennec cannot load code.", empty),
];

/** Schema entries for the refused fields (any JSON value), so they reach refuseFields instead of being stripped. */
export function refusedFieldSchemas(endpoint: Endpoint, declared: readonly string[]): Record<string, ReturnType<typeof t.Optional>> {
  const out: Record<string, ReturnType<typeof t.Optional>> = {};
  for (const f of REQUEST_FIELDS) {
    if (f.fate === "refused" && f.endpoints.includes(endpoint) && !declared.includes(f.name)) out[f.name] = t.Optional(t.Unknown({ description: `Refused: ${f.note}` }));
  }
  return out;
}

/** A 400 naming the first refused field the body sets to something other than its inert default. */
export function refuseFields(body: Readonly<Record<string, unknown>>, endpoint: Endpoint): void {
  for (const f of REQUEST_FIELDS) {
    if (f.fate !== "refused" || !f.endpoints.includes(endpoint)) continue;
    const value = body[f.name];
    if (value === undefined || (f.inert?.(value) ?? false)) continue;
    throw new ApiError("badRequest", `${f.name} is not supported by fennec: ${f.note}`, f.name);
  }
}
