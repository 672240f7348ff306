/**
 * Long prompts are tokenized a slice at a time with the event loop free in between, and the ids are
 * exactly those of the whole text. Checked on llama.cpp's vocabularies (SPM and every kind of BPE pre-tokenizer),
 * on their own test strings joined into one long text with chat markup, cut every 16 characters.
 */
import { describe, expect, test } from "bun:test";
import { loadVocabTokenizer, readVocabCases, stories260kGguf } from "./helpers.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";

const VOCABS = ["llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2", "qwen35", "starcoder", "falcon", "mpt", "deepseek-coder", "deepseek-llm", "command-r"];

async function sliced(tokenizer: Tokenizer, text: string, options: { addSpecial: boolean; parseSpecial: boolean }): Promise<{ ids: number[]; pauses: number }> {
  let pauses = 0;
  const ids = await tokenizer.encodeInSlices!(text, options, 16, async () => { pauses++; });
  return { ids, pauses };
}

describe.each(VOCABS)("ggml-vocab-%s", (name) => {
  test("the sliced ids equal encode's on llama.cpp's test strings, one long text, with and without special parsing", async () => {
    const tokenizer = loadVocabTokenizer(name);
    const cases = readVocabCases(name).map((c) => c.text);
    const long = `${cases.join(" and then ")} The quick brown fox jumps over the lazy dog. `.repeat(3);
    // the long text really was cut: its special tokens allow it on every vocabulary here
    expect((await sliced(tokenizer, long, { addSpecial: false, parseSpecial: false })).pauses).toBeGreaterThan(20);
    for (const text of [long, ...cases]) {
      for (const options of [{ addSpecial: false, parseSpecial: false }, { addSpecial: true, parseSpecial: true }]) {
        const { ids } = await sliced(tokenizer, text, options);
        expect(ids).toEqual(tokenizer.encode(text, options));
      }
    }
  });
});

describe("slicing", () => {
  const tokenizer = createTokenizer(stories260kGguf());

  test("a long text is encoded in many slices (the event loop gets a turn between them) and equals encode", async () => {
    const text = "Once upon a time there was a little girl named Lily. She loved to play outside. ".repeat(200);
    const { ids, pauses } = await sliced(tokenizer, text, { addSpecial: true, parseSpecial: true });
    expect(pauses).toBeGreaterThan(500);
    expect(ids).toEqual(tokenizer.encode(text, { addSpecial: true, parseSpecial: true }));
  });

  test("a text with no place to cut (one long word) is encoded whole, still correctly", async () => {
    const text = "a".repeat(5000);
    const { ids, pauses } = await sliced(tokenizer, text, { addSpecial: false, parseSpecial: false });
    expect(pauses).toBe(1);
    expect(ids).toEqual(tokenizer.encode(text, { addSpecial: false, parseSpecial: false }));
  });

  test("maxTokenChars is the longest token text (the prompt-length bound's factor)", () => {
    expect(tokenizer.maxTokenChars).toBeGreaterThan(1);
    const qwen = loadVocabTokenizer("qwen2");
    expect(qwen.maxTokenChars).toBeGreaterThan(tokenizer.maxTokenChars!);
  });
});
