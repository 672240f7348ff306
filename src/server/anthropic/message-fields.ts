/**
 * The fate of every top-level field of Anthropic's Messages request (docs.claude.com/en/api/messages, vLLM
 * vllm/entrypoints/anthropic/protocol.py AnthropicMessagesRequest for its extras): implemented, accepted with no
 * effect (and why that is right), or refused with an `invalid_request_error` naming it. Any other field is refused
 * too, as Anthropic's API does ("Extra inputs are not permitted"). docs/anthropic.md is this table.
 */
import { ApiError } from "../errors.ts";

export type MessageFieldFate = "implemented" | "no-op" | "refused";

export interface MessageField {
  readonly name: string;
  readonly fate: MessageFieldFate;
  readonly note: string;
  /** refused rows: values that change nothing and so pass */
  readonly inert?: (value: unknown) => boolean;
  /** also read by POST /v1/messages/count_tokens */
  readonly countTokens?: boolean;
}

const none = (v: unknown): boolean => v === null || (Array.isArray(v) && v.length === 0);

export const MESSAGE_FIELDS: readonly MessageField[] = [
  { name: "model", fate: "implemented", note: "Must be the served model name (or an alias); anything else is a 404 not_found_error.", countTokens: true },
  { name: "messages", fate: "implemented", note: "user / assistant turns (vLLM also takes inline system turns); blocks text, tool_use, tool_result, thinking, redacted_thinking (dropped), image (user turns, with a vision projector: base64 or url sources); document blocks are refused.", countTokens: true },
  { name: "system", fate: "implemented", note: "A string or text blocks, joined (vLLM); a Claude Code billing-header block is dropped so the prefix cache works.", countTokens: true },
  { name: "max_tokens", fate: "implemented", note: "Required; the output budget, thinking included." },
  { name: "stop_sequences", fate: "implemented", note: "Strings that end the output; stop_reason stop_sequence names the one that matched." },
  { name: "stream", fate: "implemented", note: "Server-sent events: message_start, ping, content blocks, message_delta, message_stop." },
  { name: "temperature", fate: "implemented", note: "Sampling temperature (0 = greedy)." },
  { name: "top_p", fate: "implemented", note: "Nucleus sampling." },
  { name: "top_k", fate: "implemented", note: "Top-k sampling." },
  { name: "tools", fate: "implemented", note: "Client tools (name, description, input_schema), rendered by the chat template and parsed with --tool-call-parser; server tools (a `type` other than custom) are refused.", countTokens: true },
  { name: "tool_choice", fate: "implemented", note: "auto (needs --enable-auto-tool-choice), any / tool (forced with a grammar), none; disable_parallel_tool_use keeps one call.", countTokens: true },
  { name: "thinking", fate: "implemented", note: "enabled (needs --reasoning-parser; budget_tokens >= 1024 and < max_tokens, enforced by closing the reasoning when it is spent), disabled, adaptive (the template's default); display omitted leaves the thinking out of the answer.", countTokens: true },
  { name: "output_config", fate: "implemented", note: "effort -> reasoning_effort; format {type: json_schema, schema} -> a JSON schema grammar (vLLM)." },
  { name: "metadata", fate: "no-op", note: "user_id is an end-user id for the provider's abuse checks; fennec has none (vLLM ignores it too)." },
  { name: "service_tier", fate: "no-op", note: "One tier here (auto and standard_only mean the same)." },
  { name: "chat_template_kwargs", fate: "implemented", note: "vLLM extra: template variables over --default-chat-template-kwargs.", countTokens: true },
  { name: "cache_salt", fate: "implemented", note: "vLLM extra: separates prefix-cache namespaces." },
  { name: "container", fate: "refused", note: "Code-execution containers are an Anthropic-hosted tool.", inert: none },
  { name: "mcp_servers", fate: "refused", note: "Remote MCP servers are called by Anthropic's platform; fennec calls no tools itself.", inert: none },
  { name: "context_management", fate: "implemented", note: "clear_thinking_20251015 edits (keep all, or the last N thinking turns) drop older assistant thinking from the prompt; other edit types are refused.", countTokens: true },
];

const FIELDS = new Map(MESSAGE_FIELDS.map((f) => [f.name, f]));

/** A 400 naming the first field that is unknown, refused, or (count_tokens) not part of that request. */
export function refuseMessageFields(body: Readonly<Record<string, unknown>>, countTokens: boolean): void {
  for (const [name, value] of Object.entries(body)) {
    const field = FIELDS.get(name);
    if (field === undefined || (countTokens && field.countTokens !== true)) throw new ApiError("badRequest", `${name}: Extra inputs are not permitted`, name);
    if (field.fate === "refused" && value !== undefined && !(field.inert?.(value) ?? false)) {
      throw new ApiError("badRequest", `${name}: not supported by fennec: ${field.note}`, name);
    }
  }
}
