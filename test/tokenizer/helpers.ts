/**
 * Test helpers for the tokenizer suite: llama.cpp's vocab GGUFs and their .inp/.out vectors, the default model's
 * tokenizer (tok512.bin) and its golden file.
 */
import { readFileSync } from "node:fs";
import { GgufValueType, type GgufFile, type GgufMetadataEntry, type GgufScalar } from "../../src/gguf/gguf-file.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { createTokenizer, type Tokenizer } from "../../src/tokenizer/tokenizer.ts";

/** Reads a GGUF with the project's reader (src/gguf/reader.ts); a bad file fails the test with the reader's message. */
export function readGgufOrThrow(path: string): GgufFile {
  const file = readGguf(path);
  if (!file.ok) throw new Error(file.error);
  return file.value;
}

/** One llama.cpp test case: the input string and the expected ids (add_special=false, parse_special=false). */
export interface VocabCase { readonly text: string; readonly ids: number[] }

export function readVocabCases(name: string): VocabCase[] {
  const inputs = readFileSync(llamaVocabPath(name, ".inp"), "utf8").split("\n__ggml_vocab_test__\n");
  inputs.pop(); // one separator follows the last string
  const outputs = readFileSync(llamaVocabPath(name, ".out"), "utf8").split("\n");
  if (outputs.at(-1) === "") outputs.pop();
  if (inputs.length !== outputs.length) throw new Error(`${name}: ${inputs.length} inputs but ${outputs.length} outputs`);
  return inputs.map((text, i) => ({ text, ids: outputs[i]!.trim() === "" ? [] : outputs[i]!.trim().split(/\s+/).map(Number) }));
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

/** ../shared/models (the default model's source files and golden outputs), relative to the project root */
export const SHARED_MODELS_DIR = new URL("../../../shared/models/", import.meta.url).pathname;

/**
 * The default model's tokenizer metadata built in memory from llama2.c's tok512.bin, following the conversion facts
 * of shared/reference/models-and-tokenizers.md §1 (what the project's converter writes): spaces as "▁", ids 0/1/2
 * renamed <unk>/<s>/</s> with types UNKNOWN/CONTROL/CONTROL, <0xXX> as BYTE, scores copied, BOS 1, EOS 2, UNK 0.
 * Lets the golden tokenizations run before (and independently of) build/default-model.gguf.
 */
export function tok512Gguf(path = `${SHARED_MODELS_DIR}tok512.bin`): GgufFile {
  const bytes = new Uint8Array(readFileSync(path));
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const numTokens = 512;
  const tokens: string[] = [];
  const scores: number[] = [];
  const types: number[] = [];
  let pos = 4; // int32 max_token_length
  const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });
  for (let i = 0; i < numTokens; i++) {
    scores.push(view.getFloat32(pos, true));
    const len = view.getInt32(pos + 4, true);
    const text = utf8.decode(bytes.subarray(pos + 8, pos + 8 + len));
    pos += 8 + len;
    if (i <= 2) {
      tokens.push(["<unk>", "<s>", "</s>"][i]!);
      types.push(i === 0 ? 2 : 3);
    } else {
      tokens.push(text.replaceAll(" ", "\u2581"));
      types.push(/^<0x[0-9A-F]{2}>$/.test(text) ? 6 : 1);
    }
  }
  const arr = (elementType: GgufValueType, values: GgufScalar[]): GgufMetadataEntry => ({ type: GgufValueType.ARRAY, value: { elementType, values } });
  const metadata = new Map<string, GgufMetadataEntry>([
    ["tokenizer.ggml.model", { type: GgufValueType.STRING, value: "llama" }],
    ["tokenizer.ggml.pre", { type: GgufValueType.STRING, value: "default" }],
    ["tokenizer.ggml.tokens", arr(GgufValueType.STRING, tokens)],
    ["tokenizer.ggml.scores", arr(GgufValueType.FLOAT32, scores)],
    ["tokenizer.ggml.token_type", arr(GgufValueType.INT32, types)],
    ["tokenizer.ggml.bos_token_id", { type: GgufValueType.UINT32, value: 1 }],
    ["tokenizer.ggml.eos_token_id", { type: GgufValueType.UINT32, value: 2 }],
    ["tokenizer.ggml.unknown_token_id", { type: GgufValueType.UINT32, value: 0 }],
    ["tokenizer.ggml.add_bos_token", { type: GgufValueType.BOOL, value: true }],
  ]);
  return { source: `${path} (converted in memory)`, version: 3, alignment: 32, metadata, tensors: [], bytes: new Uint8Array(0) };
}

export interface GoldenTokenization { readonly text: string; readonly ids: number[]; readonly idsParseSpecial: number[] }
export interface Golden {
  readonly greedyFromBos: { readonly ids: number[]; readonly text: string };
  readonly tokenize: GoldenTokenization[];
}

export function readGolden(): Golden {
  return JSON.parse(readFileSync(`${SHARED_MODELS_DIR}stories260K-golden.json`, "utf8")) as Golden;
}
