/**
 * Token ids -> text, as llama.cpp's token_to_piece / detokenize: each token becomes bytes (SPM "▁" -> " ",
 * byte-level BPE alphabet -> bytes, <0xXX> -> that byte; control and unknown tokens only when special tokens are
 * rendered), the bytes are concatenated and decoded as UTF-8 (invalid bytes -> U+FFFD).
 * `decode` drops the space an SPM tokenizer put in front of the first token (unless the first id is BOS), the
 * incremental detokenizer only when asked (stripLeadingSpace); GPT-2-style vocabularies tidy spaces before
 * punctuation (llama.cpp clean_spaces) in `decode` only.
 * The incremental detokenizer emits text only up to the last complete UTF-8 character.
 */
import type { DecodeOptions, IncrementalDetokenizer } from "./tokenizer.ts";
import { byteDecode } from "./byte-level.ts";
import { TokenAttr } from "./token-attr.ts";
import { isSpecialAttr, type Vocab } from "./vocab.ts";

const utf8Encoder = new TextEncoder();
const EMPTY = new Uint8Array(0);
const SPACE = 0x20;

/** Pieces of every token, computed on first use (a 150k vocab would otherwise cost ~50 ms up front). */
export class PieceTable {
  private readonly pieces: (Uint8Array | undefined)[];

  constructor(private readonly vocab: Vocab) {
    this.pieces = new Array(vocab.tokens.length);
  }

  /** The bytes of one token; `special` renders control/unknown tokens as their text. Out-of-range ids give nothing. */
  piece(id: number, special: boolean): Uint8Array {
    const attr = this.vocab.attrs[id];
    if (attr === undefined) return EMPTY;
    if (!special && isSpecialAttr(attr)) return EMPTY;
    let piece = this.pieces[id];
    if (piece === undefined) {
      piece = this.compute(id, attr);
      this.pieces[id] = piece;
    }
    return piece;
  }

  private compute(id: number, attr: number): Uint8Array {
    const text = this.vocab.tokens[id]!;
    if (attr & (TokenAttr.UNKNOWN | TokenAttr.CONTROL | TokenAttr.USER_DEFINED)) return utf8Encoder.encode(text);
    if (attr & TokenAttr.NORMAL) {
      return this.vocab.kind === "spm" ? utf8Encoder.encode(text.replaceAll("\u2581", " ")) : byteDecode(text);
    }
    if (attr & TokenAttr.BYTE) {
      const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(text);
      return m ? Uint8Array.of(parseInt(m[1]!, 16)) : utf8Encoder.encode(text);
    }
    return EMPTY; // undefined / unused tokens render as nothing, as in llama.cpp
  }
}

/**
 * Decides per position whether a piece's leading space is dropped: only the first token of an SPM text
 * (llama.cpp remove_space), and not when that first token is BOS.
 */
function stripsLeadingSpace(vocab: Vocab, firstId: number, skipSpecial: boolean): { skipFirst: boolean; strip: boolean } {
  if (!vocab.addSpacePrefix) return { skipFirst: false, strip: false };
  if (skipSpecial && vocab.addBos && firstId === vocab.bosId) return { skipFirst: true, strip: false };
  return { skipFirst: false, strip: true };
}

function withoutLeadingSpace(piece: Uint8Array): Uint8Array {
  return piece.length > 0 && piece[0] === SPACE ? piece.subarray(1) : piece;
}

/** llama.cpp's clean_spaces passes (GPT-2 style): " ?" " !" " ." " ," -> no space; " ' " -> "'"; " 's" " 'm" " 're" " 've". */
function cleanUpSpaces(text: string): string {
  return text
    .replace(/ ([?!.,])/g, "$1")
    .replace(/ ' /g, "'")
    .replace(/ '(s|m|re|ve)/g, "'$1");
}

export function decodeIds(vocab: Vocab, pieces: PieceTable, ids: readonly number[], options: DecodeOptions): string {
  const skipSpecial = options.skipSpecialTokens;
  let list = ids;
  let strip = false;
  if (list.length > 0) {
    const lead = stripsLeadingSpace(vocab, list[0]!, skipSpecial);
    if (lead.skipFirst) list = list.slice(1);
    strip = lead.strip;
  }
  if (skipSpecial && vocab.addEos && list.length > 0 && list.at(-1) === vocab.eosId) list = list.slice(0, -1);
  const parts: Uint8Array[] = [];
  let total = 0;
  for (let i = 0; i < list.length; i++) {
    let piece = pieces.piece(list[i]!, !skipSpecial);
    if (i === 0 && strip) piece = withoutLeadingSpace(piece);
    parts.push(piece);
    total += piece.length;
  }
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.length;
  }
  const text = new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes);
  return vocab.cleanSpaces ? cleanUpSpaces(text) : text;
}

/** Streaming decode: TextDecoder in stream mode holds back an incomplete UTF-8 sequence until its last byte arrives. */
export class StreamingDetokenizer implements IncrementalDetokenizer {
  private readonly decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  private first = true;
  private stripNext = false;

  constructor(
    private readonly vocab: Vocab,
    private readonly pieces: PieceTable,
    private readonly options: DecodeOptions,
  ) {}

  push(tokenIds: readonly number[]): string {
    let text = "";
    const skipSpecial = this.options.skipSpecialTokens;
    for (const id of tokenIds) {
      if (this.first) {
        this.first = false;
        const lead = stripsLeadingSpace(this.vocab, id, skipSpecial);
        if (lead.skipFirst) continue;
        this.stripNext = lead.strip && this.options.stripLeadingSpace === true;
      }
      let piece = this.pieces.piece(id, !skipSpecial);
      if (this.stripNext) {
        piece = withoutLeadingSpace(piece);
        this.stripNext = false;
      }
      if (piece.length > 0) text += this.decoder.decode(piece, { stream: true });
    }
    return text;
  }

  flush(): string {
    return this.decoder.decode();
  }
}
