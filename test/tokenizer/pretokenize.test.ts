/**
 * The pre-tokenizer table: every row compiles, names are unique, the required variants exist, and a few splits that
 * follow from llama.cpp's regexes (digit grouping differs per model; whitespace is llama.cpp's set, not JavaScript's).
 */
import { describe, expect, test } from "bun:test";
import { compileRegex, findPreTokenizer, PRE_TOKENIZERS, PreTokenizer } from "../../src/tokenizer/pretokenize.ts";

describe("PRE_TOKENIZERS table", () => {
  test.each(PRE_TOKENIZERS.map((p) => [p.names[0]!, p] as const))("%s compiles", (_name, spec) => {
    for (const regex of spec.regexes) expect(() => compileRegex(regex)).not.toThrow();
  });

  test("names are unique", () => {
    const names = PRE_TOKENIZERS.flatMap((p) => p.names);
    expect(new Set(names).size).toBe(names.length);
  });

  test.each(["default", "llama-bpe", "llama3", "qwen2", "gpt-2", "smollm"])("has %s", (name) => {
    expect(findPreTokenizer(name)).toBeDefined();
  });
});

const split = (pre: string, text: string) => new PreTokenizer(findPreTokenizer(pre)!).split(text);

describe("splits", () => {
  const cases: [string, string, string[]][] = [
    ["gpt-2", "Hello world's 123  x", ["Hello", " world", "'s", " 123", " ", " x"]],
    ["llama-bpe", "1234567 apples", ["123", "456", "7", " apples"]],
    ["llama-bpe", "I'LL go\n\n", ["I", "'LL", " go", "\n\n"]],
    ["qwen2", "x1234", ["x", "1", "2", "3", "4"]],
    ["smollm", "a 12", ["a", " ", "1", "2"]],
    ["default", "a+b 1234", ["a", "+", "b", " ", "123", "4"]], // four regexes in turn, the last splits 3-digit runs
  ];
  test.each(cases)("%s: %j", (pre, text, words) => {
    expect(split(pre, text)).toEqual(words);
  });

  test("words always concatenate back to the input", () => {
    const text = "  Hello,\tworld!! 🦙 x=1_000_000 中文 \u0085 end\r\n";
    for (const spec of PRE_TOKENIZERS) expect(split(spec.names[0]!, text).join("")).toBe(text);
  });

  test("whitespace is llama.cpp's set: U+0085 is a space, U+FEFF is not", () => {
    // as whitespace, a run before a letter gives all but its last char to \s+(?!\S); as a symbol it would be one piece
    expect(split("gpt-2", "a\u0085\u0085b")).toEqual(["a", "\u0085", "\u0085", "b"]);
    expect(split("gpt-2", "\uFEFF\uFEFFb")).toEqual(["\uFEFF\uFEFF", "b"]);
  });
});
