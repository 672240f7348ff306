/**
 * The tokenizer interface and its factory from GGUF metadata. OWNER: tokenizer helper.
 * Implementations: spm.ts (tokenizer.ggml.model = "llama") and bpe.ts ("gpt2").
 */
import type { GgufFile } from "../gguf/gguf-file.ts";

export interface EncodeOptions {
  /** add BOS/EOS as the model's add_bos_token / add_eos_token say (llama.cpp add_special) */
  readonly addSpecial: boolean;
  /** recognise special/control token texts such as "<|im_start|>" in the input (llama.cpp parse_special) */
  readonly parseSpecial: boolean;
}

export interface DecodeOptions {
  readonly skipSpecialTokens: boolean;
}

/** Turns token ids into text chunk by chunk, never emitting half a UTF-8 character. */
export interface IncrementalDetokenizer {
  /** feed new ids, get the newly completed text */
  push(tokenIds: readonly number[]): string;
  /** whatever is still buffered (invalid bytes as U+FFFD) */
  flush(): string;
}

export interface ChatMessage {
  readonly role: string;
  readonly content: string;
}

export interface Tokenizer {
  readonly vocabSize: number;
  readonly bosId: number | null;
  readonly eosId: number | null;
  /** ids that end generation (eos, eot, im_end ...) */
  readonly stopIds: readonly number[];
  encode(text: string, options: EncodeOptions): number[];
  decode(tokenIds: readonly number[], options?: DecodeOptions): string;
  /** the text of one token (byte tokens as their byte, in latin1 when not valid UTF-8 alone) */
  tokenText(tokenId: number): string;
  isSpecial(tokenId: number): boolean;
  createDetokenizer(options?: DecodeOptions): IncrementalDetokenizer;
  /** tokenizer.chat_template rendered with @huggingface/jinja, or the documented plain fallback */
  applyChatTemplate(messages: readonly ChatMessage[], options: { addGenerationPrompt: boolean }): string;
}

export function createTokenizer(_gguf: GgufFile): Tokenizer {
  throw new Error("tokenizer: not implemented yet");
}
