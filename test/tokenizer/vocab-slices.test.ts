/**
 * readVocabInSlices (tokenizer/vocab.ts): the vocabulary built a few ms at a time, the event loop served in between
 * (a server's load), equals readVocab's field by field, for the embedded stories260K (SPM) and llama.cpp's Qwen2
 * vocabulary (byte-level BPE with 151k tokens and merges), and pauses between its slices.
 */
import { describe, expect, test } from "bun:test";
import { openDefaultModel } from "../../src/gguf/default-model.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import type { GgufFile } from "../../src/gguf/gguf-file.ts";
import { readVocab, readVocabInSlices, type Vocab } from "../../src/tokenizer/vocab.ts";
import { createTokenizer, createTokenizerInSlices } from "../../src/tokenizer/gguf-tokenizer.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";

const comparable = (v: Vocab) => ({ ...v, tokenToId: [...v.tokenToId], mergeRanks: [...v.mergeRanks], scores: [...v.scores], attrs: [...v.attrs] });

function qwen2(): GgufFile {
  const file = readGguf(llamaVocabPath("qwen2"));
  if (!file.ok) throw new Error(file.error);
  return file.value;
}

describe("readVocabInSlices", () => {
  for (const [name, open] of [["stories260K", openDefaultModel], ["qwen2", qwen2]] as const) {
    test(`${name}: the same vocabulary as readVocab, built between pauses`, async () => {
      const gguf = open();
      let pauses = 0;
      const sliced = await readVocabInSlices(gguf, async () => { pauses++; await new Promise((resolve) => setImmediate(resolve)); }, 0);
      expect(comparable(sliced)).toEqual(comparable(readVocab(gguf)));
      // a pause is offered every 2048 tokens of each loop
      expect(pauses).toBeGreaterThanOrEqual(Math.floor(sliced.tokens.length / 2048));
      const text = "Hello world, <|im_start|> once upon a time 123";
      const [a, b] = [createTokenizer(gguf), await createTokenizerInSlices(gguf, () => Promise.resolve(), 0)];
      expect(b.encode(text, { addSpecial: true, parseSpecial: true })).toEqual(a.encode(text, { addSpecial: true, parseSpecial: true }));
    });
  }
});
