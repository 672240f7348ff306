/**
 * Chat messages -> one prompt string, the way vLLM hands a conversation to Hugging Face's apply_chat_template.
 *
 * With a chat template (the model's `tokenizer.chat_template`, `--chat-template`, or a trusted request's) it is
 * rendered with @huggingface/jinja and the variables apply_chat_template passes: `messages` (with `tool_calls`,
 * `tool_call_id`, `name`, `reasoning` intact), `tools`, `documents`, `add_generation_prompt`, the special tokens
 * (`bos_token`, `eos_token`) and every chat_template_kwargs key; `raise_exception` and `strftime_now` come with the
 * library. `continue_final_message` cuts the text right after the final message's content (transformers'
 * apply_chat_template, same rules and errors).
 *
 * Without a template (e.g. the default stories260K model, a base model) the documented plain fallback is used:
 *   the BOS token's text (if the model has a BOS token), then each message as "<role>: <content>\n", then
 *   "assistant:" when a generation prompt is asked for.
 * Like real templates that start with `{{ bos_token }}`, the fallback carries BOS as text, so a chat prompt encoded the
 * vLLM way (add_special_tokens=false, parse_special=true) still starts with the BOS id.
 * @example renderPlainChat([{ role: "user", content: "Hi" }], true, "<s>") === "<s>user: Hi\nassistant:"
 */
import { Template } from "@huggingface/jinja";
import type { ChatMessage, ChatTemplateOptions, ContentFormat } from "./tokenizer.ts";
import { TokenizerError } from "./vocab.ts";
import { errorMessage } from "../util/error-message.ts";

/** Text of a message's content: a string as is, text parts joined with "\n" (vLLM's string content format). */
export function contentText(content: ChatMessage["content"]): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  return content.filter((p) => p.type === "text" && typeof p.text === "string").map((p) => p.text).join("\n");
}

function renderPlainChat(messages: readonly ChatMessage[], options: ChatTemplateOptions, bosToken = ""): string {
  let text = bosToken;
  messages.forEach((m, i) => {
    const last = i === messages.length - 1;
    text += options.continueFinalMessage === true && last ? `${m.role}: ${contentText(m.content)}` : `${m.role}: ${contentText(m.content)}\n`;
  });
  return options.addGenerationPrompt ? `${text}assistant:` : text;
}

/**
 * vLLM's _detect_content_format (chat_utils.py): a template that loops over a message's `content` wants OpenAI-style
 * part lists, any other wants strings. Walks the parsed template looking for `{% for x in <something>.content %}`.
 */
export function detectContentFormat(template: Template): Exclude<ContentFormat, "auto"> {
  const stack: unknown[] = [template.parsed];
  const seen = new Set<unknown>();
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== "object" || seen.has(node)) continue;
    seen.add(node);
    const n = node as { type?: string; iterable?: { type?: string; property?: { type?: string; value?: unknown } } };
    if (n.type === "For" && n.iterable?.type === "MemberExpression") {
      const p = n.iterable.property;
      if ((p?.type === "StringLiteral" || p?.type === "Identifier") && p.value === "content") return "openai";
    }
    for (const value of Object.values(node)) if (value !== null && typeof value === "object") stack.push(value);
  }
  return "string";
}

/**
 * Messages as the template sees them (vLLM's _parse_chat_message_content + _postprocess_messages): content as a
 * string or as `{type: "text", text}` parts per the content format (null content: "" or []), tool messages' text parts
 * joined, assistant tool-call arguments parsed from their JSON string into objects ({} when not valid JSON; templates
 * expect mappings), empty `tool_calls` dropped.
 */
export function templateMessages(messages: readonly ChatMessage[], format: Exclude<ContentFormat, "auto">): Record<string, unknown>[] {
  return messages.map((m) => {
    const out: Record<string, unknown> = { ...m };
    const parts = m.content === null || m.content === undefined ? [] : typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content;
    out["content"] = format === "openai" && m.role !== "tool" ? parts.map((p) => ({ ...p })) : contentText(m.content);
    if (m.role === "assistant" && Array.isArray(m.tool_calls)) {
      if (m.tool_calls.length === 0) delete out["tool_calls"];
      else {
        out["tool_calls"] = m.tool_calls.map((call) => {
          const fn = { ...call.function } as Record<string, unknown>;
          const args = fn["arguments"];
          if (typeof args === "string") {
            try { fn["arguments"] = JSON.parse(args); } catch { fn["arguments"] = {}; }
          } else if (args === null || typeof args !== "object") fn["arguments"] = {};
          return { ...call, function: fn };
        });
      }
    } else if (m.tool_calls === undefined || m.tool_calls === null) delete out["tool_calls"];
    for (const key of Object.keys(out)) if (out[key] === undefined) delete out[key];
    return out;
  });
}

/**
 * transformers' continue_final_message cut: keep the rendered text up to the end of the final message's content, so
 * the model continues that message instead of starting a new turn.
 */
function cutAfterFinalMessage(rendered: string, final: ChatMessage): string {
  let text: string;
  if (Array.isArray(final.content)) {
    const block = [...final.content].reverse().find((p) => typeof p.text === "string");
    if (block === undefined) throw new TokenizerError("continue_final_message is set but we could not find any text to continue in the final message!");
    text = block.text!;
  } else text = contentText(final.content);
  const trimmed = text.trim();
  if (!rendered.includes(trimmed)) {
    throw new TokenizerError("continue_final_message is set but the final message does not appear in the chat after applying the chat template! This can happen if the chat template deletes portions of the final message. Please verify the chat template and final message in your chat to ensure they are compatible.");
  }
  const at = rendered.lastIndexOf(trimmed);
  const leftTrimmed = text.trimStart();
  // the template kept the message's trailing spacing (or it had none): cut after it, else after the trimmed text
  return rendered.slice(at, at + leftTrimmed.length) === leftTrimmed ? rendered.slice(0, at + leftTrimmed.length) : rendered.slice(0, at + trimmed.length);
}

/** Compiled templates by source: the model's, --chat-template's, and a few trusted request templates. */
const MAX_CACHED_TEMPLATES = 16;

/** A chat template; compiled on first use so a model with a broken template still loads for completions. */
export class ChatTemplate {
  private readonly compiled = new Map<string, Template>();

  /**
   * @param source the model's Jinja text, or null for the plain fallback
   * @param specialTexts the special tokens' texts, passed to the template as variables
   * @param where names the model file in error messages
   */
  constructor(
    readonly source: string | null,
    private readonly specialTexts: { readonly bosToken: string; readonly eosToken: string },
    private readonly where: string,
  ) {}

  private compile(source: string): Template {
    let template = this.compiled.get(source);
    if (template === undefined) {
      template = new Template(source);
      if (this.compiled.size >= MAX_CACHED_TEMPLATES) this.compiled.delete(this.compiled.keys().next().value!);
      this.compiled.set(source, template);
    }
    return template;
  }

  /** The content format "auto" resolves to for this template (vLLM logs it once at startup). */
  contentFormat(templateSource: string | null = null): Exclude<ContentFormat, "auto"> {
    const source = templateSource ?? this.source;
    if (source === null) return "string";
    try {
      return detectContentFormat(this.compile(source));
    } catch {
      return "string";
    }
  }

  apply(messages: readonly ChatMessage[], options: ChatTemplateOptions): string {
    if (options.continueFinalMessage === true && options.addGenerationPrompt) {
      throw new TokenizerError("continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when you want the model to continue the final message, and add_generation_prompt when you want to add a header that will prompt it to start a new assistant message instead.");
    }
    const source = options.template ?? this.source;
    if (source === null) return renderPlainChat(messages, options, this.specialTexts.bosToken);
    const where = options.template !== undefined && options.template !== null ? "chat_template" : `${this.where}: tokenizer.chat_template`;
    let rendered: string;
    try {
      const template = this.compile(source);
      const requested = options.contentFormat ?? "auto";
      const format = requested === "auto" ? detectContentFormat(template) : requested;
      const variables: Record<string, unknown> = {
        bos_token: this.specialTexts.bosToken,
        eos_token: this.specialTexts.eosToken,
        ...(options.kwargs ?? {}),
        messages: templateMessages(messages, format),
        add_generation_prompt: options.addGenerationPrompt,
      };
      // transformers passes tools / documents only when given: templates test `tools is defined`
      if (options.tools !== undefined && options.tools !== null) variables["tools"] = options.tools;
      if (options.documents !== undefined && options.documents !== null) variables["documents"] = options.documents;
      if (options.continueFinalMessage !== undefined) variables["continue_final_message"] = options.continueFinalMessage;
      rendered = template.render(variables);
    } catch (e) {
      throw new TokenizerError(`${where}: ${errorMessage(e).split("\n")[0]}`);
    }
    if (options.continueFinalMessage === true && messages.length > 0) return cutAfterFinalMessage(rendered, messages.at(-1)!);
    return rendered;
  }
}

/** Why a template does not compile (one line), or null: for checking --chat-template at start-up. */
export function chatTemplateError(source: string): string | null {
  try {
    new Template(source);
    return null;
  } catch (e) {
    return errorMessage(e).split("\n")[0]!;
  }
}
