/**
 * Byte-level BPE (tokenizer.ggml.model = "gpt2"), as llama.cpp's llm_tokenizer_bpe: the pre-tokenizer splits text
 * into words, each word's UTF-8 bytes are written in GPT-2's byte alphabet, and adjacent symbols are merged by merge
 * rank (lowest first; ties: leftmost) through a priority queue. Results are cached per word: prompts repeat words a lot.
 */
import { byteEncode } from "./byte-level.ts";
import { PreTokenizer } from "./pretokenize.ts";
import { PriorityQueue } from "./priority-queue.ts";
import { SymbolList } from "./symbol-list.ts";
import type { Vocab } from "./vocab.ts";

interface Bigram {
  readonly left: number;
  readonly right: number;
  readonly rank: number;
  readonly leftLength: number;
  readonly rightLength: number;
}

const byRank = (a: Bigram, b: Bigram) => a.rank < b.rank || (a.rank === b.rank && a.left < b.left);
const WORD_CACHE_MAX_ENTRIES = 50_000;

export class BpeEncoder {
  private readonly preTokenizer: PreTokenizer;
  private readonly wordCache = new Map<string, readonly number[]>();

  constructor(private readonly vocab: Vocab) {
    if (vocab.pre === null) throw new Error("bpe: vocab has no pre-tokenizer");
    this.preTokenizer = new PreTokenizer(vocab.pre);
  }

  /** Tokenizes one raw-text fragment, appending ids to `out`. */
  encode(text: string, out: number[]): void {
    for (const word of this.preTokenizer.split(text)) {
      const encoded = byteEncode(word);
      let ids = this.wordCache.get(encoded);
      if (ids === undefined) {
        ids = this.encodeWord(encoded);
        if (this.wordCache.size >= WORD_CACHE_MAX_ENTRIES) this.wordCache.clear();
        this.wordCache.set(encoded, ids);
      }
      for (const id of ids) out.push(id);
    }
  }

  /** One byte-encoded word -> ids. */
  private encodeWord(word: string): number[] {
    const { tokenToId, mergeRanks } = this.vocab;
    const whole = tokenToId.get(word);
    if (this.vocab.pre!.ignoreMerges && whole !== undefined) return [whole];

    const symbols = new SymbolList(word);
    const { lengths, prev, next } = symbols;
    const queue = new PriorityQueue<Bigram>(byRank);
    const tryAdd = (left: number, right: number) => {
      if (left < 0 || right < 0) return;
      const rank = mergeRanks.get(`${symbols.piece(left)} ${symbols.piece(right)}`);
      if (rank === undefined) return;
      queue.push({ left, right, rank, leftLength: lengths[left]!, rightLength: lengths[right]! });
    };
    for (let i = 1; i < symbols.count; i++) tryAdd(i - 1, i);

    for (let bigram = queue.pop(); bigram !== undefined; bigram = queue.pop()) {
      const { left, right } = bigram;
      // stale: one side has grown or been merged away since this pair was queued
      if (lengths[left] !== bigram.leftLength || lengths[right] !== bigram.rightLength || lengths[right] === 0) continue;
      symbols.merge(left, right);
      tryAdd(prev[left]!, left);
      tryAdd(left, next[left]!);
    }

    const ids: number[] = [];
    for (const piece of symbols.pieces()) {
      const id = tokenToId.get(piece);
      if (id !== undefined) {
        ids.push(id);
        continue;
      }
      // llama.cpp looks up each UTF-8 byte alone; only ASCII bytes can be tokens on their own
      for (const ch of piece) {
        const byteId = ch.charCodeAt(0) < 0x80 ? tokenToId.get(ch) : undefined;
        if (byteId !== undefined) ids.push(byteId);
      }
    }
    return ids;
  }
}
