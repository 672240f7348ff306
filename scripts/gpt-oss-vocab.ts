/**
 * gpt-oss's vocabulary (o200k_harmony) as a vocab-only GGUF, for make-model's gpt-oss-20b shape: OpenAI's o200k_base
 * ranks (js-tiktoken, as phi4-mini-vocab.ts reads them) and the Harmony special tokens at their ids, written the way
 * llama.cpp's converter writes gpt-oss (convert_hf_to_gguf.py GptOssModel: _set_vocab_gpt2, pre "gpt-4o"):
 *  - 201,088 tokens (gpt-oss-20b config.json vocab_size): ranks 0..199997, then <|startoftext|> 199998,
 *    <|endoftext|> 199999, <|return|> 200002, <|constrain|> 200003, <|channel|> 200005, <|start|> 200006,
 *    <|end|> 200007, <|message|> 200008, <|call|> 200012, <|endofprompt|> 200018 and <|reserved_N|> for every other
 *    id from 200000 on (tiktoken's o200k_harmony), all control tokens;
 *  - bos <|startoftext|>, eos <|return|>, pad <|endoftext|> (tokenizer_config.json), no BOS added;
 *  - the chat template: llama.cpp's models/templates/openai-gpt-oss-120b.jinja (the Harmony template gpt-oss-20b
 *    ships too).
 * Written once into the gitignored .cache/gpt-oss/ and reused.
 * @example const path = gptOssVocabPath(); // .../.cache/gpt-oss/ggml-vocab-gpt-oss.gguf
 */
import { existsSync, mkdirSync, readFileSync, renameSync } from "node:fs";
import { join, resolve } from "node:path";
import { GgufValueType, type GgufMetadataEntry } from "../src/gguf/gguf-file.ts";
import { mdArray, mdBool, mdF32, mdString, mdU32 } from "../src/gguf/metadata.ts";
import { archKey, KEY, TokenType } from "../src/gguf/names.ts";
import { writeGgufFile } from "../src/gguf/writer.ts";
import { byteEncodeBytes } from "../src/tokenizer/byte-level.ts";
import { llamaTemplatePath } from "./llama-vocab.ts";
import { o200kRanks, tiktokenMerges } from "./phi4-mini-vocab.ts";

const ROOT = resolve(import.meta.dirname, "..");
const CACHE_DIR = join(ROOT, ".cache/gpt-oss");
const VOCAB_PATH = join(CACHE_DIR, "ggml-vocab-gpt-oss.gguf");
/** gpt-oss-20b config.json vocab_size */
const VOCAB_SIZE = 201088;
/** the first special id (o200k_base has 199,998 ranks) */
const FIRST_SPECIAL = 199998;

/** o200k_harmony's named special tokens; the other ids from 200000 on are <|reserved_N|> */
const HARMONY_TOKENS: Readonly<Record<number, string>> = {
  199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>", 200003: "<|constrain|>", 200005: "<|channel|>",
  200006: "<|start|>", 200007: "<|end|>", 200008: "<|message|>", 200012: "<|call|>", 200018: "<|endofprompt|>",
};

/** The tokenizer.* metadata of gpt-oss's vocabulary (see the file comment for each rule). */
export function gptOssTokenizerMetadata(): Map<string, GgufMetadataEntry> {
  const ranks = o200kRanks();
  if (ranks.length !== FIRST_SPECIAL) throw new Error(`gpt-oss-vocab: o200k_base has ${ranks.length} ranks, expected ${FIRST_SPECIAL}`);
  const rankText = ranks.map((b) => byteEncodeBytes(b));
  const tokens = Array.from({ length: VOCAB_SIZE }, (_, id) => (id < FIRST_SPECIAL ? rankText[id]! : HARMONY_TOKENS[id] ?? `<|reserved_${id}|>`));
  const types = Array.from({ length: VOCAB_SIZE }, (_, id) => (id < FIRST_SPECIAL ? TokenType.NORMAL : TokenType.CONTROL));
  return new Map<string, GgufMetadataEntry>([
    [KEY.tokenizerModel, mdString("gpt2")],
    [KEY.tokenizerPre, mdString("gpt-4o")],
    [KEY.tokens, mdArray(GgufValueType.STRING, tokens)],
    [KEY.tokenType, mdArray(GgufValueType.INT32, types)],
    [KEY.merges, mdArray(GgufValueType.STRING, tiktokenMerges(ranks, rankText))],
    [KEY.bosId, mdU32(199998)],
    [KEY.eosId, mdU32(200002)],
    [KEY.padId, mdU32(199999)],
    [KEY.addBos, mdBool(false)],
    [KEY.addEos, mdBool(false)],
    [KEY.chatTemplate, mdString(readFileSync(llamaTemplatePath("openai-gpt-oss-120b"), "utf8"))],
  ]);
}

/** The vocab-only GGUF, written on first use, with gpt-oss-20b's hyperparameters (as llama.cpp's vocab files carry theirs). */
export function gptOssVocabPath(): string {
  if (existsSync(VOCAB_PATH)) return VOCAB_PATH;
  mkdirSync(CACHE_DIR, { recursive: true });
  const a = (key: Parameters<typeof archKey>[1]) => archKey("gpt-oss", key);
  const metadata = new Map<string, GgufMetadataEntry>([
    [KEY.architecture, mdString("gpt-oss")], [KEY.name, mdString("gpt-oss vocab")],
    [a("contextLength"), mdU32(131072)], [a("embeddingLength"), mdU32(2880)], [a("blockCount"), mdU32(24)],
    [a("feedForwardLength"), mdU32(2880)], [a("headCount"), mdU32(64)], [a("headCountKv"), mdU32(8)],
    [a("rmsEps"), mdF32(1e-5)], [a("ropeFreqBase"), mdF32(150000)],
    ...gptOssTokenizerMetadata(),
  ]);
  // parallel test processes: each writes its own file and renames it into place
  const tmp = `${VOCAB_PATH}.tmp-${process.pid}-${Date.now()}`;
  writeGgufFile(tmp, { metadata, tensors: [] });
  renameSync(tmp, VOCAB_PATH);
  return VOCAB_PATH;
}

if (import.meta.main) console.log(gptOssVocabPath());
