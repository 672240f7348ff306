/**
 * Where a long text may be cut into slices that tokenize to exactly the ids of the whole (so that a 15 MB prompt can
 * be tokenized a few milliseconds at a time, yielding to the event loop between slices). A cut goes before a space
 * that sits between two letters ("word| word"):
 * - byte-level BPE: every pre-tokenizer regex of pretokenize.ts ends a letter run before a space and starts the next
 *   word with it (" ?\p{L}+", "[^\r\n\p{L}\p{N}]?\p{L}+", "\s?\p{L}+"), so the cut is a pre-token boundary and merges
 *   never cross it;
 * - SPM: the merges join adjacent symbols into vocabulary tokens; a token across the cut would contain the letter and
 *   the "▁" after it, so cuts after letters that some token has before a "▁" are not used;
 * - special tokens: cuts are only used when no special token text has "letter space letter" (none can span a cut) and
 *   none ending in a letter strips the spaces after it (RSTRIP would reach into the next slice; LSTRIP stays inside
 *   the slice that starts with the space).
 * Text with no such place (one 15 MB word) is not cut: correct ids come before latency.
 */
import { TokenAttr } from "./token-attr.ts";
import type { Vocab } from "./vocab.ts";

const LETTER = /^\p{L}$/u;
const LETTER_SPACE_LETTER = /\p{L} \p{L}/u;
const SPM_SPACE = "\u2581";

/** null when this vocabulary's special tokens make cutting unsafe; otherwise the test for a cut before index i. */
export function cutRule(vocab: Vocab): ((text: string, i: number) => boolean) | null {
  for (const id of vocab.specialIds) {
    const special = vocab.tokens[id]!;
    // one that spans "letter space letter" could span a cut; one ending in a letter that eats the spaces after it
    // (RSTRIP) would reach into the next slice
    if (LETTER_SPACE_LETTER.test(special) || (LETTER.test(special.at(-1) ?? "") && (vocab.attrs[id]! & TokenAttr.RSTRIP) !== 0)) return null;
  }
  // SPM: the characters some token has right before a "▁" (a cut after one of them could split that token)
  const beforeSpace = new Set<string>();
  if (vocab.kind === "spm") {
    for (const token of vocab.tokens) {
      for (let at = token.indexOf(SPM_SPACE, 1); at > 0; at = token.indexOf(SPM_SPACE, at + 1)) beforeSpace.add(token[at - 1]!);
    }
  }
  return (text, i) => text[i] === " " && LETTER.test(text[i - 1] ?? "") && LETTER.test(text[i + 1] ?? "") && !beforeSpace.has(text[i - 1]!);
}

/** The text in slices of about `sliceChars` (each cut at the first allowed place after that many characters). */
export function* slicesOf(text: string, sliceChars: number, canCut: (text: string, i: number) => boolean): Generator<string> {
  let start = 0;
  while (text.length - start > sliceChars) {
    let cut = start + sliceChars;
    while (cut < text.length && !canCut(text, cut)) cut++;
    if (cut >= text.length) break;
    yield text.slice(start, cut);
    start = cut;
  }
  yield text.slice(start);
}
