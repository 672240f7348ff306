/**
 * The server-wide chat settings vLLM takes on its command line (vllm/entrypoints/openai/cli_args.py: --chat-template, --chat-template-content-format, --enable-auto-tool-choice, --tool-call-parser, --reasoning-parser): the template and how content
 * reaches it, default template kwargs, whether requests may bring their own template, the response role, and the
 * tool-call and reasoning parsers. Built once by `fennec serve` / `run-batch` (commands/chat-flags.ts).
 */
import type { ContentFormat } from "../tokenizer/tokenizer.ts";

export interface ChatServingOptions {
  /** --chat-template (file contents or inline Jinja); null = the model's own */
  readonly chatTemplate: string | null;
  /** --chat-template-content-format */
  readonly contentFormat: ContentFormat;
  /** --default-chat-template-kwargs */
  readonly defaultTemplateKwargs: Readonly<Record<string, unknown>>;
  /** --trust-request-chat-template */
  readonly trustRequestChatTemplate: boolean;
  /** --response-role */
  readonly responseRole: string;
  /** --enable-auto-tool-choice */
  readonly enableAutoToolChoice: boolean;
  /** --tool-call-parser (a name in tool-parsers/registry.ts) */
  readonly toolCallParser: string | null;
  /** --reasoning-parser (a name in reasoning-parsers/registry.ts) */
  readonly reasoningParser: string | null;
  /** --exclude-tools-when-tool-choice-none */
  readonly excludeToolsWhenToolChoiceNone: boolean;
}

export const DEFAULT_CHAT_SERVING: ChatServingOptions = {
  chatTemplate: null,
  contentFormat: "auto",
  defaultTemplateKwargs: {},
  trustRequestChatTemplate: false,
  responseRole: "assistant",
  enableAutoToolChoice: false,
  toolCallParser: null,
  reasoningParser: null,
  excludeToolsWhenToolChoiceNone: false,
};
