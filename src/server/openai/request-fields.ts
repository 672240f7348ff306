/**
 * The fate of every request field of vLLM's ChatCompletionRequest, CompletionRequest and EmbeddingCompletionRequest
 * (vllm/entrypoints/openai/chat_completion/protocol.py, completion/protocol.py, pooling/embed/protocol.py), of the
 * OpenAI fields clients send, of the fields llama.cpp's server reads on its OpenAI routes (tools/server/server-schema.cpp,
 * server-context.cpp for id_slot) and of Ollama's OpenAI-compatibility extras: implemented, an alias of another field,
 * accepted with no effect (and why that is right), or refused with a 400 naming the field and what to use instead.
 * Nothing that changes the output is ignored. docs/request-fields.md is this table (test/server/request-fields.test.ts
 * and request-fields-fates.test.ts keep them equal and send every row). Refused fields are declared in the request
 * schemas too, so they reach refuseFields; fields in no row are logged as vLLM logs them (ignoredFieldsLine).
 */
import { t } from "elysia";
import { ApiError } from "../errors.ts";
import type { LogLevel } from "../../util/logger.ts";

export type FieldFate = "implemented" | "alias" | "no-op" | "refused";
/** who defines the field: OpenAI's API, vLLM's extras, llama.cpp's server, Ollama's OpenAI routes */
export type FieldSource = "openai" | "vllm" | "llama.cpp" | "ollama";
export type Endpoint = "chat" | "completions" | "embeddings";

export interface RequestField {
  readonly name: string;
  readonly source: FieldSource;
  readonly endpoints: readonly Endpoint[];
  readonly fate: FieldFate;
  /** what it does, why it has no effect, or why it is refused (and what to do instead) */
  readonly note: string;
  /** refused rows: values that change nothing and so pass (vLLM's defaults) */
  readonly inert?: (value: unknown) => boolean;
  /** alias rows: the field (or field.key) it is read as */
  readonly aliasOf?: string;
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

type Row = Omit<RequestField, "source">;
const row = (name: string, endpoints: readonly Endpoint[], fate: FieldFate, note: string, inert?: (v: unknown) => boolean): Row =>
  ({ name, endpoints, fate, note, ...(inert ? { inert } : {}) });
const alias = (name: string, endpoints: readonly Endpoint[], aliasOf: string, note: string): Row => ({ name, endpoints, fate: "alias", note, aliasOf });
const isNullOr = (...values: unknown[]) => (v: unknown): boolean => v === null || values.includes(v);

/** The fields of OpenAI's own API among the vLLM rows (the rest of those rows are vLLM's extras). */
const OPENAI_NAMES = new Set([
  "messages", "prompt", "input", "encoding_format", "dimensions", "model", "frequency_penalty", "presence_penalty", "logit_bias",
  "logprobs", "top_logprobs", "max_tokens", "max_completion_tokens", "n", "response_format", "seed", "stop", "stream",
  "stream_options", "temperature", "top_p", "tools", "tool_choice", "parallel_tool_calls", "reasoning_effort", "user", "echo",
  "suffix", "best_of", "store", "metadata", "service_tier", "functions", "function_call", "prediction", "modalities", "audio",
  "web_search_options",
]);
/** llama.cpp's fields among the vLLM rows (fennec had them before the llama.cpp table) */
const LLAMA_NAMES_IN_VLLM_ROWS = new Set(["json_schema", "grammar"]);

const VLLM_ROWS: readonly Row[] = [
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
  row("tools", CHAT, "implemented", "Rendered by the chat template; parsed with --tool-call-parser."),
  row("tool_choice", CHAT, "implemented", "none / auto (needs --enable-auto-tool-choice) / required / named (forced with a grammar)."),
  row("parallel_tool_calls", CHAT, "implemented", "false keeps the first tool call only."),
  row("reasoning_effort", CHAT, "implemented", "Passed to the chat template; sets enable_thinking."),
  row("include_reasoning", CHAT, "implemented", "With --reasoning-parser: false leaves reasoning out."),
  row("thinking_token_budget", BOTH, "implemented", "With --reasoning-parser: once the reasoning holds this many tokens (counted from its start), the parser's end string is forced and the answer follows; -1 unlimited."),
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

const LLAMA = "runs llama.cpp's sampler chain (common/sampling.cpp) for the request";
/** llama.cpp's server fields on its OpenAI routes (tools/server/server-schema.cpp), llama.cpp's names and ranges. */
const LLAMA_ROWS: readonly Row[] = [
  row("repeat_penalty", BOTH, "implemented", `llama.cpp's repetition penalty (repetition_penalty's divide / multiply rule) over the last repeat_last_n tokens; ${LLAMA}. Differing from repetition_penalty is a 400.`),
  row("repeat_last_n", BOTH, "implemented", `Tokens the penalties look back over (0 off, -1 the whole context; default 64); ${LLAMA}.`),
  row("typical_p", BOTH, "implemented", `Locally typical sampling, in [0, 1] (1 off); ${LLAMA}.`),
  row("mirostat", BOTH, "implemented", `0 off, 1 Mirostat, 2 Mirostat 2.0 (then only logit bias, temperature and mirostat run); ${LLAMA}.`),
  row("mirostat_tau", BOTH, "implemented", `Mirostat's target surprise (default 5); ${LLAMA}.`),
  row("mirostat_eta", BOTH, "implemented", `Mirostat's learning rate (default 0.1); ${LLAMA}.`),
  row("dry_multiplier", BOTH, "implemented", `DRY repetition penalty strength (0 off); ${LLAMA}.`),
  row("dry_base", BOTH, "implemented", `DRY's exponent base (below 1 becomes 1.75, as llama.cpp); ${LLAMA}.`),
  row("dry_allowed_length", BOTH, "implemented", `Repeats up to this length are not penalised by DRY (default 2); ${LLAMA}.`),
  row("dry_penalty_last_n", BOTH, "implemented", `Tokens DRY scans (0 off, -1 the whole context; default 64); ${LLAMA}.`),
  row("dry_sequence_breakers", BOTH, "implemented", `Strings that end a DRY match (default ["\\n", ":", "\\"", "*"]), tokenized as llama.cpp does; ${LLAMA}.`),
  row("xtc_probability", BOTH, "implemented", `Chance in [0, 1] that XTC removes the top choices (0 off); ${LLAMA}.`),
  row("xtc_threshold", BOTH, "implemented", `XTC's probability threshold in [0, 1] (above 0.5 off); ${LLAMA}.`),
  row("top_n_sigma", BOTH, "implemented", `Keep tokens within n standard deviations of the top logit (<= 0 off); ${LLAMA}.`),
  row("dynatemp_range", BOTH, "implemented", `Dynamic temperature in [temperature - range, temperature + range] from the entropy (0 off); ${LLAMA}.`),
  row("dynatemp_exponent", BOTH, "implemented", `How entropy maps to the dynamic temperature (default 1); ${LLAMA}.`),
  row("min_keep", BOTH, "implemented", `Samplers keep at least this many tokens (0 no floor); ${LLAMA}.`),
  row("samplers", BOTH, "implemented", `The chain's order: names (llama.cpp's spellings) or one-letter codes ("kt"); an unknown one is a 400 (llama.cpp skips it); ${LLAMA}.`),
  alias("n_predict", BOTH, "max_tokens", "llama.cpp's output budget: -1 is no limit (up to the context); 0 (prompt only) is a 400; differing from max_tokens is a 400."),
  alias("n_probs", BOTH, "top_logprobs", "llama.cpp reads it as its logprobs (server-schema.cpp alias): chat logprobs true + top_logprobs n, completions logprobs n, in OpenAI's shape as llama.cpp's OpenAI routes answer; differing from those is a 400."),
  alias("n_cmpl", BOTH, "n", "llama.cpp's completions per prompt; differing from n is a 400."),
  row("cache_prompt", BOTH, "implemented", "true (default): prefix caching as for every request; false: the request gets a cache namespace of its own (as a fresh cache_salt), so no cached block is reused for it."),
  row("id_slot", BOTH, "refused", "fennec has no slots (its scheduler batches every request); only -1 (any slot) is accepted.", isNullOr(-1)),
  row("post_sampling_probs", BOTH, "refused", "Probabilities after the sampler chain are not returned; use logprobs / top_logprobs (before sampling, as vLLM).", isNullOr(false)),
  row("timings_per_token", BOTH, "implemented", "true adds llama.cpp's `timings` object (cache_n, prompt_n, prompt_ms, prompt_per_token_ms, prompt_per_second, predicted_n, predicted_ms, predicted_per_token_ms, predicted_per_second) from the engine's own timestamps to the answer and to every streamed chunk."),
  row("response_fields", BOTH, "refused", "llama.cpp filters only its native /completion answer with it (server-task.cpp to_json_non_oaicompat); OpenAI answers are never filtered, here or there.", empty),
  row("return_tokens", BOTH, "refused", "llama.cpp's `tokens` field: use return_token_ids (vLLM's token_ids).", isNullOr(false)),
  row("return_progress", BOTH, "refused", "Prompt-progress events are not streamed.", isNullOr(false)),
  row("verbose", BOTH, "refused", "llama.cpp's __verbose debug field is not returned.", isNullOr(false)),
  row("n_indent", BOTH, "refused", "Code-completion indentation stops are not implemented.", isNullOr(0)),
  row("n_keep", BOTH, "refused", "No context shifting: a prompt that does not fit is a 400 (use truncate_prompt_tokens).", isNullOr(0)),
  row("n_discard", BOTH, "refused", "No context shifting (see n_keep).", isNullOr(0)),
  row("n_cache_reuse", BOTH, "refused", "KV shifting for cache reuse is not implemented; the prefix cache reuses whole blocks.", isNullOr(0)),
  row("t_max_predict_ms", BOTH, "refused", "No time limit on generation; use max_tokens.", isNullOr(0)),
  row("sse_ping_interval", BOTH, "refused", "No SSE comment pings are sent.", isNullOr(-1)),
  row("adaptive_target", BOTH, "refused", "llama.cpp's adaptive sampler is not implemented.", (v) => v === null || (typeof v === "number" && v < 0)),
  row("adaptive_decay", BOTH, "refused", "llama.cpp's adaptive sampler is not implemented.", (v) => v === null),
  row("backend_sampling", BOTH, "refused", "Sampling always runs in fennec's own sampler.", isNullOr(false)),
  row("lora", BOTH, "refused", "No LoRA adapters are loaded.", empty),
  row("grammar_lazy", BOTH, "refused", "Lazy grammars (grammar_triggers) are not implemented; use tool_choice or structured_outputs.", isNullOr(false)),
  row("grammar_triggers", BOTH, "refused", "Lazy grammars are not implemented; use tool_choice or structured_outputs.", empty),
  row("preserved_tokens", BOTH, "refused", "llama.cpp's tool-call grammar helper: fennec builds tool grammars itself.", empty),
  row("grammar_type", BOTH, "refused", "Use structured_outputs (json, regex, choice, grammar).", (v) => v === null),
  row("chat_format", BOTH, "refused", "Internal llama.cpp chat-parser field: fennec parses with --tool-call-parser / --reasoning-parser.", (v) => v === null),
  row("chat_parser", BOTH, "refused", "Internal llama.cpp chat-parser field: fennec parses with --tool-call-parser / --reasoning-parser.", (v) => v === null),
  row("reasoning_format", BOTH, "refused", "fennec returns reasoning as vLLM does (with --reasoning-parser); use include_reasoning.", (v) => v === null),
  row("generation_prompt", BOTH, "refused", "Use add_generation_prompt / continue_final_message.", (v) => v === null),
  row("parse_tool_calls", BOTH, "refused", "Tool calls are parsed by --tool-call-parser; use tool_choice none to turn them off.", (v) => v === null),
  row("reasoning_control", BOTH, "refused", "The reasoning budget is not implemented.", isNullOr(false)),
  row("reasoning_budget_tokens", BOTH, "refused", "llama.cpp's per-request budget is not read: use vLLM's thinking_token_budget.", isNullOr(-1)),
  row("reasoning_budget_start_tag", BOTH, "refused", "The reasoning budget is not implemented.", (v) => v === null),
  row("reasoning_budget_end_tags", BOTH, "refused", "The reasoning budget is not implemented.", empty),
  row("reasoning_budget_end_tag", BOTH, "refused", "The reasoning budget is not implemented.", (v) => v === null),
  row("reasoning_budget_message", BOTH, "refused", "The reasoning budget is not implemented.", (v) => v === null),
  // llama.cpp reads these dotted keys as they are (server-schema.cpp); speculation here is the server's --speculative-config
  ...["n_max", "n_min", "p_min", "type", "ngram_size_n", "ngram_size_m", "ngram_min_hits"].map((k) =>
    row(`speculative.${k}`, BOTH, "refused", "Speculative decoding is configured for the server (--speculative-config), not per request.", (v) => v === null)),
];

/** Ollama's extras on its OpenAI-compatible routes (ollama openai/openai.go); its own dialect is /api/chat. */
const OLLAMA_ROWS: readonly Row[] = [
  alias("think", CHAT, "chat_template_kwargs.enable_thinking", "true / false turn the model's thinking on / off (differing from chat_template_kwargs.enable_thinking is a 400); Ollama's \"high\" / \"medium\" / \"low\" are reasoning_effort."),
  alias("reasoning", CHAT, "reasoning_effort", "{\"effort\": ...} is reasoning_effort (\"none\" turns thinking off, exactly as reasoning_effort \"none\"); differing from reasoning_effort is a 400."),
  row("options", BOTH, "refused", "Ollama's model options belong to its native API: use /api/chat or /api/generate, or the OpenAI fields (temperature, top_p, ...).", empty),
  row("format", BOTH, "refused", "Ollama's output format belongs to /api/chat; on the OpenAI routes use response_format.", (v) => v === null || v === ""),
  row("raw", BOTH, "refused", "Ollama's raw prompts belong to /api/generate; on the OpenAI routes use /v1/completions (no template).", isNullOr(false)),
  row("num_ctx", BOTH, "refused", "The context length is the server's (--max-model-len), not a request's; Ollama's native API is /api/chat.", (v) => v === null),
];

const sourceOf = (name: string): FieldSource => (OPENAI_NAMES.has(name) ? "openai" : LLAMA_NAMES_IN_VLLM_ROWS.has(name) ? "llama.cpp" : "vllm");

export const REQUEST_FIELDS: readonly RequestField[] = [
  ...VLLM_ROWS.map((r) => ({ ...r, source: sourceOf(r.name) })),
  ...LLAMA_ROWS.map((r) => ({ ...r, source: "llama.cpp" as const })),
  ...OLLAMA_ROWS.map((r) => ({ ...r, source: "ollama" as const })),
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

/**
 * vLLM's line for the fields of a request that no row names (vllm/entrypoints/openai/protocol.py OpenAIBaseModel
 * __log_extra_fields__, the set in Python's repr), or null when there are none. The request is answered.
 * @example ignoredFieldsLine(["messages", "foo"], "chat") // "The following fields were present in the request but ignored: {'foo'}"
 */
export function ignoredFieldsLine(keys: readonly string[], endpoint: Endpoint): string | null {
  const unknown = keys.filter((k) => !KNOWN[endpoint].has(k));
  return unknown.length === 0 ? null : `The following fields were present in the request but ignored: {${unknown.map((k) => `'${k}'`).join(", ")}}`;
}

/** vLLM's level for the line: its current OpenAIBaseModel logs it at DEBUG (older releases warned) */
const IGNORED_FIELDS_LEVEL: LogLevel = "DEBUG";

/** Logs ignoredFieldsLine once for the request; nothing when the keys are unknown or all known. */
export function logIgnoredFields(log: (line: string, level?: LogLevel) => void, keys: readonly string[] | null, endpoint: Endpoint): void {
  const line = keys === null ? null : ignoredFieldsLine(keys, endpoint);
  if (line !== null) log(line, IGNORED_FIELDS_LEVEL);
}

const KNOWN: Readonly<Record<Endpoint, ReadonlySet<string>>> = {
  chat: new Set(REQUEST_FIELDS.filter((f) => f.endpoints.includes("chat")).map((f) => f.name)),
  completions: new Set(REQUEST_FIELDS.filter((f) => f.endpoints.includes("completions")).map((f) => f.name)),
  embeddings: new Set(REQUEST_FIELDS.filter((f) => f.endpoints.includes("embeddings")).map((f) => f.name)),
};
