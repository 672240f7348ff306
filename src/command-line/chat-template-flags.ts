/**
 * vLLM's chat-template, tool-calling and reasoning flags of serve and run-batch, as given. commands/chat-flags.ts
 * checks them against the parsers and templates fennec has (vLLM's start-up messages) and builds the server's
 * ChatServingOptions from them.
 */
import type { Options } from "./flags.ts";
import { stringOrNull } from "./flag-values.ts";

export interface ChatTemplateFlags {
  /** --chat-template: a file path or the Jinja text itself; null: the model's */
  readonly chatTemplate: string | null;
  /** --chat-template-content-format: auto, string or openai */
  readonly contentFormat: string;
  /** --default-chat-template-kwargs, the JSON text; null: none */
  readonly defaultChatTemplateKwargs: string | null;
  readonly trustRequestChatTemplate: boolean;
  /** --response-role */
  readonly responseRole: string;
  readonly enableAutoToolChoice: boolean;
  readonly toolCallParser: string | null;
  readonly reasoningParser: string | null;
  readonly excludeToolsWhenToolChoiceNone: boolean;
}

export function chatTemplateFlags(options: Options): ChatTemplateFlags {
  return {
    chatTemplate: stringOrNull(options["chat-template"]),
    contentFormat: stringOrNull(options["chat-template-content-format"]) ?? "auto",
    defaultChatTemplateKwargs: stringOrNull(options["default-chat-template-kwargs"]),
    trustRequestChatTemplate: options["trust-request-chat-template"] === true,
    responseRole: stringOrNull(options["response-role"]) ?? "assistant",
    enableAutoToolChoice: options["enable-auto-tool-choice"] === true,
    toolCallParser: stringOrNull(options["tool-call-parser"]),
    reasoningParser: stringOrNull(options["reasoning-parser"]),
    excludeToolsWhenToolChoiceNone: options["exclude-tools-when-tool-choice-none"] === true,
  };
}
