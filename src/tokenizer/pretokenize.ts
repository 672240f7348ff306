/**
 * Byte-level BPE pre-tokenizers: how text is split into words before merges. ONE table, keyed by the GGUF
 * `tokenizer.ggml.pre` names, with the regexes llama.cpp's llama-vocab.cpp uses (applied in order: each regex splits
 * every piece from the previous one, keeping the unmatched gaps as pieces too, like unicode_regex_split).
 *
 * `\s` / `\S` in these regexes mean llama.cpp's whitespace set (unicode_set_whitespace: Python's str.isspace, which
 * differs from JavaScript's `\s` at U+0085 and U+FEFF); `compileRegex` rewrites them before building a JS `u` regex.
 */

export interface PreTokenizerSpec {
  /** values of tokenizer.ggml.pre that select this row */
  readonly names: readonly string[];
  readonly regexes: readonly string[];
  /** llama.cpp clean_spaces: decode removes the space before ?!., and in contractions (GPT-2 style) */
  readonly cleanSpaces: boolean;
  /** a word that is itself a token is emitted without merging (tiktoken-style vocabularies) */
  readonly ignoreMerges: boolean;
  /** add_bos default before tokenizer.ggml.add_bos_token overrides it */
  readonly addBos: boolean;
}

const GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
const LLAMA3 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;
const QWEN2 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;
const QWEN35 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;

export const PRE_TOKENIZERS: readonly PreTokenizerSpec[] = [
  // llama.cpp's fallback when tokenizer.ggml.pre is missing or "default"
  { names: ["default", ""], regexes: ["[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"], cleanSpaces: true, ignoreMerges: false, addBos: false },
  { names: ["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"], regexes: [LLAMA3], cleanSpaces: true, ignoreMerges: true, addBos: true },
  { names: ["dbrx", "smaug-bpe"], regexes: [LLAMA3], cleanSpaces: true, ignoreMerges: false, addBos: false },
  { names: ["qwen2", "deepseek-r1-qwen", "megrez"], regexes: [QWEN2], cleanSpaces: false, ignoreMerges: false, addBos: false },
  { names: ["qwen35"], regexes: [QWEN35], cleanSpaces: false, ignoreMerges: false, addBos: false },
  { names: ["stablelm2"], regexes: [QWEN2], cleanSpaces: true, ignoreMerges: false, addBos: false },
  { names: ["gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "mellum", "olmo", "jais", "exaone4"], regexes: [GPT2], cleanSpaces: true, ignoreMerges: false, addBos: false },
  { names: ["mpt"], regexes: [GPT2], cleanSpaces: true, ignoreMerges: false, addBos: false },
  { names: ["smollm"], regexes: ["\\p{N}", GPT2], cleanSpaces: false, ignoreMerges: false, addBos: false },
  { names: ["starcoder", "refact", "codeshell", "exaone", "minerva-7b"], regexes: ["\\p{N}", GPT2], cleanSpaces: true, ignoreMerges: false, addBos: false },
  { names: ["command-r"], regexes: ["\\p{N}", GPT2], cleanSpaces: false, ignoreMerges: false, addBos: false },
  { names: ["falcon"], regexes: ["[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"], cleanSpaces: true, ignoreMerges: false, addBos: false },
  { names: ["deepseek-llm"], regexes: ["[\\r\\n]", "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+", "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"], cleanSpaces: false, ignoreMerges: false, addBos: false },
  { names: ["deepseek-coder"], regexes: ["[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"], cleanSpaces: false, ignoreMerges: false, addBos: false },
  // llama.cpp runs the tokenizer.json regex in this form: its std::regex sees every non-ASCII letter as one "letter"
  // byte, so the cased classes become "a letter that is not a-z" / "not A-Z", and combining marks (\p{M}) split words
  // (tiktoken keeps them in the word); in JS the same form gives llama.cpp's splits
  { names: ["gpt-4o", "llama4"], regexes: ["[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"], cleanSpaces: false, ignoreMerges: false, addBos: false },
];

/** llama.cpp's whitespace set (unicode_set_whitespace), as the inside of a character class */
const WHITESPACE_CLASS = "\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

/** Rewrites `\s` / `\S` to llama.cpp's whitespace set (inside and outside character classes) and compiles with `gu`. */
export function compileRegex(expr: string): RegExp {
  let out = "";
  let insideClass = false;
  for (let i = 0; i < expr.length; i++) {
    const c = expr[i]!;
    if (c === "\\") {
      const next = expr[i + 1];
      if (next === "s") out += insideClass ? WHITESPACE_CLASS : `[${WHITESPACE_CLASS}]`;
      else if (next === "S") {
        if (insideClass) throw new Error(`pretokenize: \\S inside a character class is not supported: ${expr}`);
        out += `[^${WHITESPACE_CLASS}]`;
      } else out += c + (next ?? "");
      i++;
      continue;
    }
    if (c === "[" && !insideClass) insideClass = true;
    else if (c === "]" && insideClass) insideClass = false;
    out += c;
  }
  return new RegExp(out, "gu");
}

export function findPreTokenizer(name: string): PreTokenizerSpec | undefined {
  return PRE_TOKENIZERS.find((p) => p.names.includes(name));
}

/** A compiled pre-tokenizer: text in, words out (in order, concatenating back to the text). */
export class PreTokenizer {
  private readonly regexes: readonly RegExp[];

  constructor(readonly spec: PreTokenizerSpec) {
    this.regexes = spec.regexes.map(compileRegex);
  }

  split(text: string): string[] {
    let pieces = [text];
    for (const regex of this.regexes) {
      const next: string[] = [];
      for (const piece of pieces) {
        let last = 0;
        regex.lastIndex = 0;
        for (let m = regex.exec(piece); m !== null; m = regex.exec(piece)) {
          if (m[0].length === 0) { regex.lastIndex++; continue; } // never split on an empty match
          if (m.index > last) next.push(piece.slice(last, m.index));
          next.push(m[0]);
          last = m.index + m[0].length;
        }
        if (last < piece.length) next.push(piece.slice(last));
      }
      pieces = next;
    }
    return pieces;
  }
}
