/**
 * The tokenizer a GGUF file describes, and its factory. Implementations of the text step: spm.ts
 * (tokenizer.ggml.model = "llama") and bpe.ts ("gpt2"); special-token splitting in special-tokens.ts, ids -> text in
 * detokenizer.ts, chat templates in chat-template.ts. Behaviour follows llama.cpp (src/llama-vocab.cpp:
 * llama_vocab::impl::tokenize / token_to_piece) and is checked against its own test vectors (test/tokenizer/).
 * Bad tokenizer metadata throws a TokenizerError (one line naming the file and key).
 */
import type { GgufFile } from "../gguf/gguf-file.ts";
import { BpeEncoder } from "./bpe.ts";
import { ChatTemplate } from "./chat-template.ts";
import { decodeIds, PieceTable, StreamingDetokenizer } from "./detokenizer.ts";
import { cutRule, slicesOf } from "./encode-slices.ts";
import { partitionSpecial } from "./special-tokens.ts";
import { buildByteTokens, spmEncode } from "./spm.ts";
import type { ChatMessage, ChatTemplateOptions, DecodeOptions, EncodeOptions, GrammarVocabulary, IncrementalDetokenizer, Tokenizer } from "./tokenizer.ts";
import { isSpecialAttr, readVocab, readVocabInSlices, type Vocab } from "./vocab.ts";
import { TokenAttr } from "./token-attr.ts";

/** Default for decode() / createDetokenizer() without options: special tokens are hidden (vLLM's default). */
const DEFAULT_DECODE: DecodeOptions = { skipSpecialTokens: true };

/**
 * Builds the tokenizer a GGUF file describes.
 * @example const tok = createTokenizer(gguf); tok.encode("Hello", { addSpecial: true, parseSpecial: false })
 */
export function createTokenizer(gguf: GgufFile): Tokenizer {
  return new GgufTokenizer(readVocab(gguf));
}

/** createTokenizer with `pause()` awaited every `sliceMs` of work (vocab.ts readVocabInSlices): a server's load. */
export async function createTokenizerInSlices(gguf: GgufFile, pause: () => Promise<void>, sliceMs: number): Promise<Tokenizer> {
  return new GgufTokenizer(await readVocabInSlices(gguf, pause, sliceMs));
}

class GgufTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bosId: number | null;
  readonly eosId: number | null;
  readonly stopIds: readonly number[];
  private readonly pieces: PieceTable;
  private readonly encodeText: (text: string, out: number[]) => void;
  private readonly chatTemplate: ChatTemplate;
  readonly chatTemplateSource: string | null;
  private readonly utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  /** where long texts may be cut (encode-slices.ts), computed on first use; null: nowhere */
  private cut: ((text: string, i: number) => boolean) | null | undefined = undefined;
  private longestToken: number | undefined = undefined;

  constructor(private readonly vocab: Vocab) {
    this.vocabSize = vocab.tokens.length;
    this.bosId = vocab.bosId;
    this.eosId = vocab.eosId;
    this.stopIds = vocab.eogIds;
    this.pieces = new PieceTable(vocab);
    if (vocab.kind === "spm") {
      const byteTokens = buildByteTokens(vocab);
      this.encodeText = (text, out) => spmEncode(vocab, byteTokens, text, out);
    } else {
      const bpe = new BpeEncoder(vocab);
      this.encodeText = (text, out) => bpe.encode(text, out);
    }
    const textOf = (id: number | null) => (id === null ? "" : vocab.tokens[id]!);
    this.chatTemplateSource = vocab.chatTemplate;
    this.chatTemplate = new ChatTemplate(vocab.chatTemplate, { bosToken: textOf(vocab.bosId), eosToken: textOf(vocab.eosId) }, vocab.source);
  }

  encode(text: string, options: EncodeOptions): number[] {
    const { vocab } = this;
    const out: number[] = [];
    if (options.addSpecial && vocab.addBos && vocab.bosId !== null) out.push(vocab.bosId);
    this.encodeSlice(text, options, true, out);
    if (options.addSpecial && vocab.addEos && vocab.eosId !== null) out.push(vocab.eosId);
    return out;
  }

  /**
   * The same ids as encode, computed a slice of about `sliceChars` characters at a time with `pause()` awaited between
   * slices (encode-slices.ts says where a text can be cut without changing its ids).
   */
  async encodeInSlices(text: string, options: EncodeOptions, sliceChars: number, pause: () => Promise<void>): Promise<number[]> {
    const { vocab } = this;
    if (this.cut === undefined) this.cut = cutRule(vocab);
    if (this.cut === null || text.length <= sliceChars) return this.encode(text, options);
    const out: number[] = [];
    if (options.addSpecial && vocab.addBos && vocab.bosId !== null) out.push(vocab.bosId);
    let afterSpecial = true;
    for (const slice of slicesOf(text, sliceChars, this.cut)) {
      afterSpecial = this.encodeSlice(slice, options, afterSpecial, out);
      await pause();
    }
    if (options.addSpecial && vocab.addEos && vocab.eosId !== null) out.push(vocab.eosId);
    return out;
  }

  /** The longest token text in characters: no token covers more of a prompt (for bounding a prompt before encoding). */
  get maxTokenChars(): number {
    this.longestToken ??= this.vocab.tokens.reduce((longest, token) => Math.max(longest, token.length), 1);
    return this.longestToken;
  }

  /** Encodes `text` onto `out`; `afterSpecial`: the text starts the input or follows a special token. Returns it for what follows. */
  private encodeSlice(text: string, options: EncodeOptions, afterSpecial: boolean, out: number[]): boolean {
    const { vocab } = this;
    // SPM: a space goes in front of text that starts the input or follows a special token
    for (const fragment of partitionSpecial(vocab, text, options.parseSpecial)) {
      if (fragment.kind === "token") {
        out.push(fragment.id);
        afterSpecial = true;
        continue;
      }
      const prefix = vocab.kind === "spm" && vocab.addSpacePrefix && afterSpecial ? " " : "";
      this.encodeText(prefix + fragment.text, out);
      afterSpecial = false;
    }
    return afterSpecial;
  }

  decode(tokenIds: readonly number[], options: DecodeOptions = DEFAULT_DECODE): string {
    return decodeIds(this.vocab, this.pieces, tokenIds, options);
  }

  tokenText(tokenId: number): string {
    const bytes = this.pieces.piece(tokenId, true);
    try {
      return this.utf8.decode(bytes);
    } catch {
      return String.fromCharCode(...bytes); // latin1: one char per byte
    }
  }

  isSpecial(tokenId: number): boolean {
    const attr = this.vocab.attrs[tokenId];
    return attr !== undefined && isSpecialAttr(attr);
  }

  createDetokenizer(options: DecodeOptions = DEFAULT_DECODE): IncrementalDetokenizer {
    return new StreamingDetokenizer(this.vocab, this.pieces, options);
  }

  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions): string {
    return this.chatTemplate.apply(messages, options);
  }

  chatContentFormat(template: string | null = null): "string" | "openai" {
    return this.chatTemplate.contentFormat(template);
  }

  /**
   * SentencePiece vocabs are xgrammar's byte_fallback kind ("▁" spaces, "<0xXX>" byte tokens), byte-level BPE its
   * byte_level kind (GPT-2 byte alphabet), as xgrammar's TokenizerInfo.from_huggingface detects them. Tokens that are
   * never text get a "<...>" name, which xgrammar sets apart as special.
   */
  grammarVocabulary(): GrammarVocabulary {
    const { vocab } = this;
    const never = TokenAttr.CONTROL | TokenAttr.UNKNOWN | TokenAttr.UNUSED;
    const encodedVocab = vocab.tokens.map((text, id) => ((vocab.attrs[id]! & never) !== 0 || text === "" ? `<|special_${id}|>` : text));
    return { encodedVocab, vocabType: vocab.kind === "spm" ? "byte_fallback" : "byte_level", prependSpace: vocab.kind === "spm" && vocab.addSpacePrefix };
  }
}
