/**
 * Splitting input text around special-token texts before the model tokenizer sees it (llama.cpp
 * tokenizer_st_partition). User-defined tokens are always split out; control and unknown tokens only when
 * parse_special is on. Longer special texts are matched first. LSTRIP / RSTRIP tokens eat ASCII whitespace
 * on their side.
 */
import { TokenAttr } from "./token-attr.ts";
import type { Vocab } from "./vocab.ts";

/** A piece of input: raw text still to tokenize, or an already-known token id. */
export type Fragment = { readonly kind: "text"; readonly text: string } | { readonly kind: "token"; readonly id: number };

const isAsciiSpace = (c: string) => c === " " || c === "\t" || c === "\n" || c === "\v" || c === "\f" || c === "\r";

export function partitionSpecial(vocab: Vocab, text: string, parseSpecial: boolean): Fragment[] {
  if (text === "") return [];
  let fragments: Fragment[] = [{ kind: "text", text }];
  for (const id of vocab.specialIds) {
    const attr = vocab.attrs[id]!;
    if (!parseSpecial && attr & (TokenAttr.CONTROL | TokenAttr.UNKNOWN)) continue;
    const special = vocab.tokens[id]!;
    let changed = false;
    const next: Fragment[] = [];
    for (const fragment of fragments) {
      if (fragment.kind !== "text" || !fragment.text.includes(special)) {
        next.push(fragment);
        continue;
      }
      changed = true;
      let rest = fragment.text;
      for (let at = rest.indexOf(special); at >= 0; at = rest.indexOf(special)) {
        let left = rest.slice(0, at);
        if (attr & TokenAttr.LSTRIP) left = left.replace(/[ \t\n\v\f\r]+$/, "");
        if (left !== "") next.push({ kind: "text", text: left });
        next.push({ kind: "token", id });
        rest = rest.slice(at + special.length);
        if (attr & TokenAttr.RSTRIP) {
          let skip = 0;
          while (skip < rest.length && isAsciiSpace(rest[skip]!)) skip++;
          rest = rest.slice(skip);
        }
      }
      if (rest !== "") next.push({ kind: "text", text: rest });
    }
    if (changed) fragments = next;
  }
  return fragments;
}
