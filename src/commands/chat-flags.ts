/**
 * vLLM's chat flags -> the server's ChatServingOptions, checked at start-up with vLLM's messages: a --chat-template
 * that looks like a path must exist and compile, --enable-auto-tool-choice needs --tool-call-parser, parser names must
 * be known, --default-chat-template-kwargs must be a JSON object.
 */
import { existsSync, readFileSync } from "node:fs";
import type { ChatTemplateFlags } from "../command-line/chat-template-flags.ts";
import type { ChatServingOptions } from "../server/chat-serving.ts";
import { REASONING_PARSER_NAMES } from "../server/openai/reasoning-parsers/registry.ts";
import { TOOL_PARSER_NAMES } from "../server/openai/tool-parsers/registry.ts";
import { chatTemplateError } from "../tokenizer/chat-template.ts";
import type { ContentFormat } from "../tokenizer/tokenizer.ts";
import { CliError } from "../util/cli-error.ts";
import { errorMessage } from "../util/error-message.ts";

/** vLLM's load_chat_template: inline Jinja when it has {, } or a newline, else a file that must exist. */
export function loadChatTemplate(value: string): string {
  const inline = /[{}\n]/.test(value);
  let source = value;
  if (!inline) {
    if (!existsSync(value)) throw new CliError(`The supplied chat template string (${value}) appears path-like, but doesn't exist! Tried: ${value}`);
    source = readFileSync(value, "utf8");
  }
  const error = chatTemplateError(source);
  if (error !== null) throw new CliError(`--chat-template: the template does not compile: ${error}`);
  return source;
}

export function readChatFlags(flags: ChatTemplateFlags): ChatServingOptions {
  const { toolCallParser, reasoningParser, enableAutoToolChoice } = flags;
  if (toolCallParser !== null && !TOOL_PARSER_NAMES.includes(toolCallParser)) {
    throw new CliError(`invalid tool call parser: ${toolCallParser} (choose from { ${TOOL_PARSER_NAMES.join(", ")} })`);
  }
  if (enableAutoToolChoice && toolCallParser === null) throw new CliError("Error: --enable-auto-tool-choice requires --tool-call-parser");
  if (reasoningParser !== null && !REASONING_PARSER_NAMES.includes(reasoningParser)) {
    throw new CliError(`invalid reasoning parser: ${reasoningParser} (choose from { ${REASONING_PARSER_NAMES.join(", ")} })`);
  }
  let defaultTemplateKwargs: Record<string, unknown> = {};
  const kwargsText = flags.defaultChatTemplateKwargs;
  if (kwargsText !== null) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(kwargsText);
    } catch (e) {
      throw new CliError(`--default-chat-template-kwargs must be a JSON object: ${errorMessage(e)}`);
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new CliError(`--default-chat-template-kwargs must be a JSON object (got ${kwargsText})`);
    defaultTemplateKwargs = parsed as Record<string, unknown>;
  }
  const template = flags.chatTemplate;
  const responseRole = flags.responseRole;
  if (responseRole === "") throw new CliError("--response-role must not be empty");
  return {
    chatTemplate: template === null ? null : loadChatTemplate(template),
    contentFormat: flags.contentFormat as ContentFormat,
    defaultTemplateKwargs,
    trustRequestChatTemplate: flags.trustRequestChatTemplate,
    responseRole,
    enableAutoToolChoice,
    toolCallParser,
    reasoningParser,
    excludeToolsWhenToolChoiceNone: flags.excludeToolsWhenToolChoiceNone,
  };
}
