/**
 * Phi-4-mini's tokenizer (scripts/phi4-mini-vocab.ts: o200k_base's ranks from js-tiktoken as llama.cpp's converter
 * would write them, `tokenizer.ggml.pre = "gpt-4o"`, 200,064 ids): fennec's ids equal llama.cpp's (node-llama-cpp,
 * vocab only) on llama.cpp's tokenizer test strings plus chat, whitespace, digit and non-Latin cases, with and without
 * special parsing; equal tiktoken's own o200k_base encoder (js-tiktoken) wherever llama.cpp's equal it; and decode
 * round-trips.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Llama, LlamaModel } from "node-llama-cpp";
import { phi4MiniVocabPath } from "../../scripts/phi4-mini-vocab.ts";
import { TokenType } from "../../src/gguf/names.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { disposeLlamaCpp, openLlamaCpp } from "../helpers/llama-cpp.ts";
import { expectLlamaCppIds, readGgufOrThrow, readVocabInputs } from "./helpers.ts";

const EXTRA = [
  "<|system|>You are brief.<|end|><|user|>Hi there<|end|><|assistant|>",
  "    four spaces\n\n\nthree newlines\t\ttabs\r\n",
  "12345678901234567890 3.14159 1,000,000",
  "Überprüfung ÉCOLE naïve café résumé déjà-vu CamelCaseWords HTTPServer iPhone",
  "Привет мир! 你好，世界。 こんにちは 안녕하세요 مرحبا بالعالم שלום",
  "e\u0301 a\u0300\u0301 combining marks, ǅungla ǈ title case, ʰmodifier",
  "I'm you're he'll they'd WE'VE it's DON'T",
  "<|endoftext|> and <|endofprompt|>",
];

let llama: Llama;
let model: LlamaModel;
let tok: Tokenizer;
let strings: string[];
let types: number[];
let tiktoken: { encode(text: string): number[] };

beforeAll(async () => {
  const path = phi4MiniVocabPath();
  const file = readGgufOrThrow(path);
  tok = createTokenizer(file);
  types = (file.metadata.get("tokenizer.ggml.token_type")!.value as { values: number[] }).values;
  const { getEncoding } = await import("js-tiktoken");
  tiktoken = getEncoding("o200k_base");
  llama = await openLlamaCpp(true);
  model = await llama.loadModel({ modelPath: path, vocabOnly: true });
  strings = [...readVocabInputs("llama-bpe"), ...EXTRA];
}, 120_000);

afterAll(async () => {
  await model?.dispose();
  await disposeLlamaCpp(llama);
});

describe("phi-4-mini vocabulary", () => {
  test("200,064 ids: o200k's 199,998 ranks, <|endoftext|> 199999 (bos, eos), the chat tokens, [PAD] ids unused", () => {
    expect(tok.vocabSize).toBe(200064);
    expect([tok.bosId, tok.eosId]).toEqual([199999, 199999]);
    expect(tok.encode("<|system|><|end|><|user|><|assistant|>", { addSpecial: false, parseSpecial: true })).toEqual([200022, 200020, 200021, 200019]);
    expect(types.filter((t) => t === TokenType.NORMAL).length).toBe(199998);
    expect(types[199998]).toBe(TokenType.UNUSED);
    expect(types[200063]).toBe(TokenType.UNUSED);
    const prompt = tok.applyChatTemplate([{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }], { addGenerationPrompt: true });
    expect(prompt).toBe("<|system|>Be brief.<|end|><|user|>Hi<|end|><|assistant|>");
  });

  test("the same ids as llama.cpp on its test strings and more, parsing specials or not", () => {
    expectLlamaCppIds(tok, model, strings);
    expect(strings.length).toBeGreaterThan(45);
  });

  test("the same ids as tiktoken's o200k_base wherever llama.cpp's are (plain text, no special tokens)", () => {
    let same = 0;
    const differs: string[] = [];
    for (const s of strings.filter((x) => !x.includes("<|"))) {
      const theirs = tiktoken.encode(s);
      if (JSON.stringify([...model.tokenize(s, false)].map(Number)) !== JSON.stringify(theirs)) { differs.push(s); continue; }
      expect({ s, ids: tok.encode(s, { addSpecial: false, parseSpecial: false }) }).toEqual({ s, ids: theirs });
      same++;
    }
    console.log(`phi-4-mini: ${same} strings equal tiktoken's ids; llama.cpp differs from tiktoken on ${differs.length}: ${JSON.stringify(differs.map((d) => d.slice(0, 30)))}`);
    expect(same).toBeGreaterThan(40);
  });

  test("decode gives the text back", () => {
    for (const s of strings.filter((x) => !x.includes("<|"))) {
      expect(tok.decode(tok.encode(s, { addSpecial: false, parseSpecial: false }), { skipSpecialTokens: false })).toBe(s);
    }
  });
});
