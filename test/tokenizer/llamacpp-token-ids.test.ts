/**
 * Differential test against llama.cpp itself (node-llama-cpp 3.21.1, vocab-only loads, no threads needed): seeded
 * random strings built from pieces that stress pre-tokenizers and special-token parsing (whitespace runs, CR/LF,
 * contractions, digits, combining marks, non-ASCII spaces, emoji with ZWJ/modifiers, special-token texts) must
 * tokenize to the same ids with parse_special off and on, and llama.cpp's ids must detokenize to the same text.
 */
import { afterAll, describe, expect, test } from "bun:test";
import type { Llama, LlamaModel } from "node-llama-cpp";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { defaultModelPath } from "../../src/gguf/default-model.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { loadVocabTokenizer, readGgufOrThrow } from "./helpers.ts";
import { rng } from "../helpers/prng.ts";
import { disposeLlamaCpp, openLlamaCpp } from "../helpers/llama-cpp.ts";

const PIECES = [
  "a", "b", "Z", "word", " ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", "\r", "1", "23", "456789", "'s", "'LL", "'re", "'ve",
  ".", ",", "!", "?", "...", "é", "ñ", "ß", "Ä", "中", "文", "日本", "한", "Б", "ф", "🦙", "😀", "👍🏽", "\u200d", "\u00a0",
  "\u0085", "\u3000", "\ufeff", "(", ")", "{", "}", "_", "-", "=", "+", "$", "|", "~", "`", "ǅ", "Ⅻ", "½", "٣", "\u0301",
  "x\u0301", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "</s>", "<s>", "<unk>", "<|end|>",
];

function randomStrings(count: number, seed: number): string[] {
  const next = rng(seed);
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    let s = "";
    const numPieces = 1 + Math.floor(next() * 12);
    for (let j = 0; j < numPieces; j++) s += PIECES[Math.floor(next() * PIECES.length)];
    out.push(s);
  }
  return out;
}

// the build's file (converted from the local inputs when build/ is gone); missing inputs fail here, never skip
const DEFAULT_MODEL_GGUF = defaultModelPath();
const MODELS: [string, string, () => Tokenizer][] = [
  ...["llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2"].map((name): [string, string, () => Tokenizer] => [name, llamaVocabPath(name), () => loadVocabTokenizer(name)]),
  ["stories260K", DEFAULT_MODEL_GGUF, () => createTokenizer(readGgufOrThrow(DEFAULT_MODEL_GGUF))],
];

const STRINGS = randomStrings(300, 20261129);
let llama: Llama | null = null;
afterAll(async () => {
  await disposeLlamaCpp(llama);
});

describe.each(MODELS)("%s vs llama.cpp", (_name, path, load) => {
  let model: LlamaModel;
  const ours = load();

  test("loads in llama.cpp", async () => {
    llama ??= await openLlamaCpp(true);
    model = await llama.loadModel({ modelPath: path, vocabOnly: true });
    expect(model.tokens.bos === null || typeof model.tokens.bos === "number").toBe(true);
  }, 60_000);

  test("same ids for 300 random strings, parse_special off and on", () => {
    const failures: string[] = [];
    for (const s of STRINGS) {
      for (const parseSpecial of [false, true]) {
        const want = Array.from(model.tokenize(s, parseSpecial)).map(Number);
        const got = ours.encode(s, { addSpecial: false, parseSpecial });
        if (want.join(" ") !== got.join(" ")) failures.push(`${JSON.stringify(s)} parseSpecial=${parseSpecial}: want [${want}] got [${got}]`);
      }
    }
    expect(failures.slice(0, 5)).toEqual([]);
  }, 30_000);

  test("llama.cpp's ids decode to the same text", () => {
    const failures: string[] = [];
    for (const s of STRINGS) {
      const ids = model.tokenize(s, true);
      const want = model.detokenize(ids, true);
      const got = ours.decode(Array.from(ids).map(Number), { skipSpecialTokens: false });
      if (want !== got) failures.push(`${JSON.stringify(s)}: want ${JSON.stringify(want)} got ${JSON.stringify(got)}`);
    }
    expect(failures.slice(0, 5)).toEqual([]);
  }, 30_000);

  test("dispose", async () => {
    await model.dispose();
  });
});


