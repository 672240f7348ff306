/**
 * llama.cpp's own tokenizer test vectors (models/ggml-vocab-*.gguf + .inp/.out, from node-llama-cpp's bundle):
 * tokenize with add_special=false, parse_special=false and compare ids exactly; then detokenize the expected ids and
 * compare with the input where llama.cpp itself round-trips (SPM and Qwen2 vocabularies: all cases; GPT-2-style
 * vocabularies clean up spaces before punctuation, so only the cases without that pattern).
 */
import { describe, expect, test } from "bun:test";
import { loadVocabTokenizer, readVocabCases } from "./helpers.ts";

/** name -> does llama.cpp's decode give every input back exactly? */
const VOCABS: readonly { name: string; roundTripsAll: boolean }[] = [
  { name: "llama-spm", roundTripsAll: true },
  { name: "phi-3", roundTripsAll: true },
  { name: "gpt-2", roundTripsAll: false },
  { name: "llama-bpe", roundTripsAll: false },
  { name: "qwen2", roundTripsAll: true },
  // beyond the required five: other pre-tokenizer rows of the table, checked the same way
  { name: "qwen35", roundTripsAll: true },
  { name: "starcoder", roundTripsAll: false },
  { name: "refact", roundTripsAll: false },
  { name: "falcon", roundTripsAll: false },
  { name: "mpt", roundTripsAll: false },
  { name: "deepseek-coder", roundTripsAll: true },
  { name: "deepseek-llm", roundTripsAll: true },
];

/** GPT-2 clean_spaces rewrites these; llama.cpp does not round-trip such inputs either */
const CLEANED_UP = / [?!.,]| ' | '(s|m|re|ve)/;

describe.each(VOCABS)("ggml-vocab-$name", ({ name, roundTripsAll }) => {
  const tokenizer = loadVocabTokenizer(name);
  const cases = readVocabCases(name);

  test("has test cases", () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
  });

  test("tokenizes every case exactly like llama.cpp", () => {
    const failures: string[] = [];
    for (const { text, ids } of cases) {
      const got = tokenizer.encode(text, { addSpecial: false, parseSpecial: false });
      if (got.join(" ") !== ids.join(" ")) failures.push(`${JSON.stringify(text)}: got [${got}] want [${ids}]`);
    }
    expect(failures).toEqual([]);
  });

  test("detokenizes back to the input where llama.cpp does", () => {
    const failures: string[] = [];
    let checked = 0;
    for (const { text, ids } of cases) {
      if (!roundTripsAll && CLEANED_UP.test(text)) continue;
      checked++;
      const got = tokenizer.decode(ids, { skipSpecialTokens: false });
      if (got !== text) failures.push(`${JSON.stringify(text)} -> ${JSON.stringify(got)}`);
    }
    expect(failures).toEqual([]);
    expect(checked).toBeGreaterThan(cases.length * 0.8);
  });
});
