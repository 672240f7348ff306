/**
 * GET /tokenizer_info, served only with --enable-tokenizer-info-endpoint (vLLM: serving_tokenization.py TokenizerInfo,
 * which answers the tokenizer's config: its init kwargs with the special tokens as text, the chat template in use and
 * `tokenizer_class`). fennec's tokenizer is the GGUF file's, so the fields are those the GGUF gives: the special
 * tokens, the context length as model_max_length, the chat template (--chat-template when given, else the model's).
 */
import { Elysia } from "elysia";
import type { ServerOptions } from "../server-options.ts";

/** vLLM's TokenizerInfoResponse: tokenizer_class plus the tokenizer config fields (extra keys allowed). */
export function tokenizerInfo(options: ServerOptions): Record<string, unknown> {
  const { tokenizer, maxModelLen } = options.orchestrator;
  const text = (id: number | null): string | null => (id === null ? null : tokenizer.tokenText(id));
  return {
    // what transformers builds from a GGUF tokenizer (vLLM with a GGUF model reports the same class)
    tokenizer_class: "PreTrainedTokenizerFast",
    bos_token: text(tokenizer.bosId),
    eos_token: text(tokenizer.eosId),
    model_max_length: maxModelLen,
    vocab_size: tokenizer.vocabSize,
    // the template in use, as vLLM's: --chat-template when given, else the model's own
    chat_template: options.chat?.chatTemplate ?? tokenizer.chatTemplateSource ?? null,
  };
}

export function tokenizerInfoRoutes(options: ServerOptions) {
  return new Elysia().get("/tokenizer_info", () => tokenizerInfo(options), {
    detail: { summary: "The tokenizer's config (with --enable-tokenizer-info-endpoint)", tags: ["tokenize"] },
  });
}
