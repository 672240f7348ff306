/**
 * The default model's tokenizer (stories260K / tok512) against the 40 llama.cpp tokenizations and the greedy text in
 * test/fixtures/stories260K-golden.json. Runs on the project's converter output (src/gguf/llama2c.ts, in memory)
 * and, once the build has written it, on build/default-model.gguf.
 */
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { readGgufOrThrow, readGolden, stories260kGguf } from "./helpers.ts";

const DEFAULT_MODEL_GGUF = new URL("../../build/default-model.gguf", import.meta.url).pathname;
const golden = readGolden();

const sources: [string, () => Tokenizer][] = [["convertLlama2c(stories260K.bin, tok512.bin)", () => createTokenizer(stories260kGguf())]];
if (existsSync(DEFAULT_MODEL_GGUF)) sources.push(["build/default-model.gguf", () => createTokenizer(readGgufOrThrow(DEFAULT_MODEL_GGUF))]);

describe.each(sources)("stories260K tokenizer from %s", (_name, load) => {
  const tokenizer = load();

  test("golden file has the 40 tokenizations", () => {
    expect(golden.tokenize.length).toBe(40);
  });

  test.each(golden.tokenize.map((c, i) => [i, c] as const))("case %d encodes like llama.cpp", (_i, c) => {
    expect(tokenizer.encode(c.text, { addSpecial: false, parseSpecial: false })).toEqual(c.ids);
    expect(tokenizer.encode(c.text, { addSpecial: false, parseSpecial: true })).toEqual(c.idsParseSpecial);
  });

  test("BOS is added only with addSpecial", () => {
    expect(tokenizer.bosId).toBe(1);
    expect(tokenizer.encode("Once upon a time", { addSpecial: true, parseSpecial: false })).toEqual([1, 403, 407, 261, 378]);
    expect(tokenizer.encode("", { addSpecial: true, parseSpecial: false })).toEqual([1]);
  });

  test("the greedy ids decode to the golden text", () => {
    expect(tokenizer.decode(golden.greedyFromBos.ids)).toBe(golden.greedyFromBos.text);
  });

  test("EOS stops generation", () => {
    expect(tokenizer.eosId).toBe(2);
    expect(tokenizer.stopIds).toContain(2);
  });
});
