/**
 * What every tokenizer is (the contract the server, the front end and the commands use): encode, decode, incremental
 * detokenizing, special tokens, the chat template. The one implementation is gguf-tokenizer.ts (built from GGUF
 * metadata); bad tokenizer metadata throws a TokenizerError (one line naming the file and key).
 */
export { TokenizerError } from "./vocab.ts";

export interface EncodeOptions {
  /** add BOS/EOS as the model's add_bos_token / add_eos_token say (llama.cpp add_special) */
  readonly addSpecial: boolean;
  /** recognise special/control token texts such as "<|im_start|>" in the input (llama.cpp parse_special) */
  readonly parseSpecial: boolean;
}

export interface DecodeOptions {
  /** hide control tokens (BOS, EOS, <|im_end|> ...) and drop a leading BOS / trailing EOS, as vLLM's skip_special_tokens */
  readonly skipSpecialTokens: boolean;
  /**
   * Incremental detokenizer only. Default false: the ids continue a prompt, so the space an SPM token starts with is
   * real text (" time" after "Once upon a"), as vLLM streams it. true: the ids start a text (generation from BOS
   * alone), so the first token's "▁", which the tokenizer itself adds, is dropped as llama.cpp's detokenize and
   * `decode` do.
   */
  readonly stripLeadingSpace?: boolean;
}

/** Turns token ids into text chunk by chunk, never emitting half a UTF-8 character. */
export interface IncrementalDetokenizer {
  /** feed new ids, get the newly completed text */
  push(tokenIds: readonly number[]): string;
  /** whatever is still buffered (invalid bytes as U+FFFD) */
  flush(): string;
}

/** One content part of a chat message (fennec's models read text parts only). */
export interface ChatContentPart {
  readonly type: string;
  readonly text?: string;
}

/** A tool call in an assistant message, as OpenAI sends it (`arguments` a JSON string). */
export interface ChatToolCall {
  readonly id?: string;
  readonly type?: string;
  readonly function: { readonly name: string; readonly arguments?: unknown };
}

/** A chat message with the fields vLLM passes to the template (extra keys pass through). */
export interface ChatMessage {
  readonly role: string;
  readonly content: string | readonly ChatContentPart[] | null;
  readonly name?: string;
  readonly tool_calls?: readonly ChatToolCall[] | null;
  readonly tool_call_id?: string;
  readonly reasoning?: string | null;
}

/** vLLM's --chat-template-content-format: how message content reaches the template. */
export type ContentFormat = "auto" | "string" | "openai";

/** What vLLM passes to apply_chat_template besides the messages. */
export interface ChatTemplateOptions {
  readonly addGenerationPrompt: boolean;
  /** continue the final message instead of closing it (not together with addGenerationPrompt) */
  readonly continueFinalMessage?: boolean;
  /** the request's tools (`{type: "function", function: {...}}`), absent when none */
  readonly tools?: readonly unknown[] | null;
  /** RAG documents */
  readonly documents?: readonly unknown[] | null;
  /** merged chat_template_kwargs: extra template variables (enable_thinking, ...) */
  readonly kwargs?: Readonly<Record<string, unknown>>;
  /** a template that replaces the model's (--chat-template, a trusted request's chat_template) */
  readonly template?: string | null;
  readonly contentFormat?: ContentFormat;
}

/** The vocabulary as xgrammar's TokenizerInfo takes it (grammar/grammar-protocol.ts GrammarVocab). */
export interface GrammarVocabulary {
  /** [vocabSize] token texts as stored; control, unknown and unused tokens as "<...>" so a grammar never emits them */
  readonly encodedVocab: readonly string[];
  readonly vocabType: "byte_fallback" | "byte_level";
  readonly prependSpace: boolean;
}

export interface Tokenizer {
  readonly vocabSize: number;
  readonly bosId: number | null;
  readonly eosId: number | null;
  /** ids that end generation (eos, eot, im_end ...) */
  readonly stopIds: readonly number[];
  encode(text: string, options: EncodeOptions): number[];
  /** encode's ids, `sliceChars` characters at a time, awaiting `pause()` between slices (long prompts) */
  encodeInSlices?(text: string, options: EncodeOptions, sliceChars: number, pause: () => Promise<void>): Promise<number[]>;
  /** the longest token text in characters (a prompt of N tokens has at most N x this many characters) */
  readonly maxTokenChars?: number;
  decode(tokenIds: readonly number[], options?: DecodeOptions): string;
  /** the text of one token (byte tokens as their byte, in latin1 when not valid UTF-8 alone) */
  tokenText(tokenId: number): string;
  isSpecial(tokenId: number): boolean;
  createDetokenizer(options?: DecodeOptions): IncrementalDetokenizer;
  /** the model's tokenizer.chat_template text (null: none, the plain fallback renders); absent: not a GGUF tokenizer */
  readonly chatTemplateSource?: string | null;
  /** tokenizer.chat_template rendered with @huggingface/jinja, or the documented plain fallback */
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions): string;
  /** what "auto" content format resolves to for the model's template (or the given one) */
  chatContentFormat?(template?: string | null): "string" | "openai";
  /** for structured outputs; absent = this tokenizer cannot drive a grammar */
  grammarVocabulary?(): GrammarVocabulary;
}
