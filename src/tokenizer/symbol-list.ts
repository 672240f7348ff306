/**
 * The symbols a merge tokenizer (BPE, SentencePiece) works on: the text split into one symbol per code point, each
 * [start, length] in UTF-16 units, linked left/right so that merging two neighbours is O(1). A merged-away symbol has
 * length 0. The caller decides which pairs to merge and in what order.
 * @example const s = new SymbolList("abc"); s.merge(0, 1); [...s.pieces()] // ["ab", "c"]
 */
export class SymbolList {
  readonly starts: number[] = [];
  readonly lengths: number[] = [];
  readonly prev: number[];
  readonly next: number[];

  constructor(readonly text: string) {
    for (let i = 0; i < text.length; ) {
      const len = text.codePointAt(i)! > 0xffff ? 2 : 1;
      this.starts.push(i);
      this.lengths.push(len);
      i += len;
    }
    const n = this.starts.length;
    this.prev = Array.from({ length: n }, (_, i) => i - 1);
    this.next = Array.from({ length: n }, (_, i) => (i + 1 < n ? i + 1 : -1));
  }

  get count(): number {
    return this.starts.length;
  }

  /** The text of symbol i. */
  piece(i: number): string {
    return this.text.substr(this.starts[i]!, this.lengths[i]!);
  }

  /** Merges symbol `right` into its left neighbour `left`; `right` leaves the list. */
  merge(left: number, right: number): void {
    const { lengths, prev, next } = this;
    lengths[left] = lengths[left]! + lengths[right]!;
    lengths[right] = 0;
    next[left] = next[right]!;
    if (next[right]! >= 0) prev[next[right]!] = left;
  }

  /** The remaining symbols' texts, left to right. */
  *pieces(): Generator<string> {
    for (let i = this.count > 0 ? 0 : -1; i !== -1; i = this.next[i]!) yield this.piece(i);
  }
}
