/**
 * Test helpers for the tokenizer suite: llama.cpp's vocab GGUFs and their .inp/.out vectors, the default model
 * (converted in memory) and its golden file.
 */
import { readFileSync } from "node:fs";
import type { GgufFile } from "../../src/gguf/gguf-file.ts";
import { convertLlama2c } from "../../src/gguf/llama2c.ts";
import { parseGguf, readGguf } from "../../src/gguf/reader.ts";
import { serializeGguf } from "../../src/gguf/writer.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { defaultModelInput } from "../helpers/default-model-files.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { expect } from "bun:test";
import type { LlamaModel } from "node-llama-cpp";

/** Reads a GGUF with the project's reader (src/gguf/reader.ts); a bad file fails the test with the reader's message. */
export function readGgufOrThrow(path: string): GgufFile {
  const file = readGguf(path);
  if (!file.ok) throw new Error(file.error);
  return file.value;
}

/** One llama.cpp test case: the input string and the expected ids (add_special=false, parse_special=false). */
export interface VocabCase { readonly text: string; readonly ids: number[] }

/** llama.cpp's test strings for vocab `name` (its .inp file). */
export function readVocabInputs(name: string): string[] {
  const inputs = readFileSync(llamaVocabPath(name, ".inp"), "utf8").split("\n__ggml_vocab_test__\n");
  inputs.pop(); // one separator follows the last string
  return inputs;
}

export function readVocabCases(name: string): VocabCase[] {
  const inputs = readVocabInputs(name);
  const outputs = readFileSync(llamaVocabPath(name, ".out"), "utf8").split("\n");
  if (outputs.at(-1) === "") outputs.pop();
  if (inputs.length !== outputs.length) throw new Error(`${name}: ${inputs.length} inputs but ${outputs.length} outputs`);
  return inputs.map((text, i) => ({ text, ids: outputs[i]!.trim() === "" ? [] : outputs[i]!.trim().split(/\s+/).map(Number) }));
}

/** fennec's ids equal llama.cpp's (`model`, loaded vocab-only) on every string, with special parsing off and on. */
export function expectLlamaCppIds(tok: Tokenizer, model: LlamaModel, strings: readonly string[]): void {
  let checked = 0;
  for (const s of strings) {
    for (const parseSpecial of [false, true]) {
      expect({ s, parseSpecial, ids: tok.encode(s, { addSpecial: false, parseSpecial }) })
        .toEqual({ s, parseSpecial, ids: [...model.tokenize(s, parseSpecial)].map(Number) });
      checked++;
    }
  }
  expect(checked).toBe(2 * strings.length);
}

/** Tokenizers are immutable apart from caches, so test files in one `bun test` process share them. */
const vocabTokenizers = new Map<string, Tokenizer>();

export function loadVocabTokenizer(name: string): Tokenizer {
  let tokenizer = vocabTokenizers.get(name);
  if (tokenizer === undefined) {
    tokenizer = createTokenizer(readGgufOrThrow(llamaVocabPath(name)));
    vocabTokenizers.set(name, tokenizer);
  }
  return tokenizer;
}

/**
 * The default model as the build makes it: the project's llama2.c -> GGUF converter (src/gguf/llama2c.ts) run in
 * memory on the build's copy of stories260K.bin + tok512.bin (.cache/models/), serialized and parsed back by the project's reader.
 */
export function stories260kGguf(): GgufFile {
  const checkpoint = new Uint8Array(readFileSync(defaultModelInput("stories260K.bin")));
  const tok512 = new Uint8Array(readFileSync(defaultModelInput("tok512.bin")));
  const converted = convertLlama2c(checkpoint, tok512, "stories260K");
  if (!converted.ok) throw new Error(converted.error);
  const file = parseGguf(serializeGguf(converted.value), "<converted stories260K>");
  if (!file.ok) throw new Error(file.error);
  return file.value;
}

export { readGolden, type Golden, type GoldenTokenization } from "../helpers/default-model-files.ts";
