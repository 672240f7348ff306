/**
 * Chat messages -> one prompt string.
 *
 * With a `tokenizer.chat_template` in the model, the template is rendered with @huggingface/jinja and the variables
 * Hugging Face's apply_chat_template passes: `messages`, `add_generation_prompt`, `bos_token`, `eos_token`
 * (`raise_exception` and `strftime_now` come with the library).
 *
 * Without one (e.g. the default stories260K model, a base model) the documented plain fallback is used:
 *   the BOS token's text (if the model has a BOS token), then each message as "<role>: <content>\n", then
 *   "assistant:" when a generation prompt is asked for.
 * Like real templates that start with `{{ bos_token }}`, the fallback carries BOS as text, so a chat prompt encoded the
 * vLLM way (add_special_tokens=false, parse_special=true) still starts with the BOS id.
 * @example renderPlainChat([{ role: "user", content: "Hi" }], true, "<s>") === "<s>user: Hi\nassistant:"
 */
import { Template } from "@huggingface/jinja";
import type { ChatMessage } from "./tokenizer.ts";
import { TokenizerError } from "./vocab.ts";
import { errorMessage } from "../util/error-message.ts";

export interface ChatTemplateOptions {
  readonly addGenerationPrompt: boolean;
}

function renderPlainChat(messages: readonly ChatMessage[], addGenerationPrompt: boolean, bosToken = ""): string {
  let text = bosToken;
  for (const m of messages) text += `${m.role}: ${m.content}\n`;
  return addGenerationPrompt ? `${text}assistant:` : text;
}

/** A compiled chat template; compiled on first use so a model with a broken template still loads for completions. */
export class ChatTemplate {
  private compiled: Template | null = null;

  /**
   * @param source the Jinja text, or null for the plain fallback
   * @param where names the model file in error messages
   */
  constructor(
    readonly source: string | null,
    private readonly specialTexts: { readonly bosToken: string; readonly eosToken: string },
    private readonly where: string,
  ) {}

  apply(messages: readonly ChatMessage[], options: ChatTemplateOptions): string {
    if (this.source === null) return renderPlainChat(messages, options.addGenerationPrompt, this.specialTexts.bosToken);
    try {
      this.compiled ??= new Template(this.source);
      return this.compiled.render({
        messages: messages.map((m) => ({ ...m })),
        add_generation_prompt: options.addGenerationPrompt,
        bos_token: this.specialTexts.bosToken,
        eos_token: this.specialTexts.eosToken,
      });
    } catch (e) {
      const message = errorMessage(e);
      throw new TokenizerError(`${this.where}: tokenizer.chat_template: ${message.split("\n")[0]}`);
    }
  }
}
