/**
 * SentencePiece-style tokenization from scores (tokenizer.ggml.model = "llama"), as llama.cpp's llm_tokenizer_spm:
 * spaces become "▁", the text starts as one symbol per character, and the adjacent pair whose concatenation is the
 * highest-scoring token is merged first (ties: leftmost). Symbols that end up as no token fall back to byte tokens
 * <0xXX> of their UTF-8 bytes.
 */
import { PriorityQueue } from "./priority-queue.ts";
import { SymbolList } from "./symbol-list.ts";
import type { Vocab } from "./vocab.ts";

interface Bigram {
  readonly left: number;
  readonly right: number;
  readonly score: number;
  /** length of the merged text, to detect stale entries */
  readonly length: number;
}

const byScore = (a: Bigram, b: Bigram) => a.score > b.score || (a.score === b.score && a.left < b.left);
const utf8Encoder = new TextEncoder();

/** Byte-fallback ids for each byte value, or null where the vocab has none. */
export function buildByteTokens(vocab: Vocab): (number | null)[] {
  const ids: (number | null)[] = new Array(256).fill(null);
  for (let b = 0; b < 256; b++) {
    const hex = b.toString(16).toUpperCase().padStart(2, "0");
    ids[b] = vocab.tokenToId.get(`<0x${hex}>`) ?? (b < 0x80 ? vocab.tokenToId.get(String.fromCharCode(b)) ?? null : null);
  }
  return ids;
}

/** Tokenizes one raw-text fragment (the caller has already added the prefix space if any). Appends to `out`. */
export function spmEncode(vocab: Vocab, byteTokens: readonly (number | null)[], rawText: string, out: number[]): void {
  const text = rawText.replaceAll(" ", "\u2581");
  const symbols = new SymbolList(text);
  const { starts, lengths, prev, next } = symbols;

  const queue = new PriorityQueue<Bigram>(byScore);
  const tryAdd = (left: number, right: number) => {
    if (left < 0 || right < 0) return;
    const length = lengths[left]! + lengths[right]!;
    const id = vocab.tokenToId.get(text.substr(starts[left]!, length));
    if (id === undefined) return;
    queue.push({ left, right, score: vocab.scores[id]!, length });
  };
  for (let i = 1; i < symbols.count; i++) tryAdd(i - 1, i);

  for (let bigram = queue.pop(); bigram !== undefined; bigram = queue.pop()) {
    const { left, right } = bigram;
    if (lengths[left] === 0 || lengths[right] === 0 || lengths[left]! + lengths[right]! !== bigram.length) continue;
    symbols.merge(left, right);
    tryAdd(prev[left]!, left);
    tryAdd(left, next[left]!);
  }

  for (const piece of symbols.pieces()) {
    const id = vocab.tokenToId.get(piece);
    if (id !== undefined) {
      out.push(id);
      continue;
    }
    for (const b of utf8Encoder.encode(piece)) {
      const byteId = byteTokens[b] ?? vocab.unkId;
      if (byteId !== null) out.push(byteId);
    }
  }
}
