/**
 * A Phi-4-mini-like vocabulary as a vocab-only GGUF, for make-model's phi-4-mini shape and the tokenizer tests.
 * Phi-4-mini's tokenizer is OpenAI's o200k_base (GPT-4o's) with Microsoft's chat tokens, a byte-level BPE that
 * llama.cpp's converter marks `tokenizer.ggml.pre = "gpt-4o"`. Its tokenizer.json is not reachable here; o200k_base's
 * ranks are, in the npm package js-tiktoken (MIT, a devDependency). The file is written the way llama.cpp's converter
 * writes a GPT2Tokenizer model (conversion/base.py _set_vocab_gpt2 / get_vocab_base, gguf-py SpecialVocab):
 *  - tokenizer.ggml.model "gpt2", pre "gpt-4o"; vocab_size 200,064 (config.json) token texts in id order: the ranks'
 *    bytes in GPT-2's byte-level alphabet, ids no token has written "[PAD<id>]" of type unused, added tokens control;
 *  - merges as transformers' TikTokenConverter derives them from the ranks (convert_slow_tokenizer.py
 *    extract_vocab_merges_from_model: every split of a token into two tokens, by the token's rank, then by the
 *    pieces' ranks), which is how o200k tokenizer.json files (Xenova/gpt-4o, Phi-4-mini's) were made;
 *  - the added tokens, bos / eos / unk / pad and the chat template as Phi-4-mini-instruct's tokenizer_config.json and
 *    generation_config.json give them (transcribed below; those files are not reachable here, so this is
 *    "Phi-4-mini-like": the ranks and the converter's rules are exact, the transcription is the part to trust less).
 * Written once into the gitignored .cache/phi4-mini/ (about 8 MB, a few seconds) and reused.
 * @example const path = phi4MiniVocabPath(); // .../.cache/phi4-mini/ggml-vocab-phi-4-mini.gguf
 */
import { existsSync, mkdirSync, renameSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { GgufValueType, type GgufMetadataEntry } from "../src/gguf/gguf-file.ts";
import { mdArray, mdBool, mdF32, mdString, mdU32 } from "../src/gguf/metadata.ts";
import { archKey, KEY, TokenType } from "../src/gguf/names.ts";
import { writeGgufFile } from "../src/gguf/writer.ts";
import { byteEncodeBytes } from "../src/tokenizer/byte-level.ts";

const ROOT = resolve(import.meta.dirname, "..");
const CACHE_DIR = join(ROOT, ".cache/phi4-mini");
const VOCAB_PATH = join(CACHE_DIR, "ggml-vocab-phi-4-mini.gguf");
/** Phi-4-mini-instruct config.json vocab_size */
const VOCAB_SIZE = 200064;

/** Phi-4-mini-instruct's added tokens (tokenizer_config.json added_tokens_decoder; all special) */
const ADDED_TOKENS: Readonly<Record<number, string>> = {
  199999: "<|endoftext|>", 200018: "<|endofprompt|>", 200019: "<|assistant|>", 200020: "<|end|>", 200021: "<|user|>",
  200022: "<|system|>", 200023: "<|tool|>", 200024: "<|/tool|>", 200025: "<|tool_call|>", 200026: "<|/tool_call|>",
  200027: "<|tool_response|>", 200028: "<|tag|>",
};
/** tokenizer_config.json chat_template */
const CHAT_TEMPLATE = "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}";

interface TiktokenRanks {
  readonly bpe_ranks: string;
  readonly special_tokens: Record<string, number>;
}

/** o200k_base's mergeable ranks: rank -> bytes (js-tiktoken's format: lines of "<prefix> <first rank> <base64 tokens>...") */
export function o200kRanks(): Uint8Array[] {
  // loaded only when the vocab is written (2.3 MB of JavaScript)
  const ranks = createRequire(import.meta.url)("js-tiktoken/ranks/o200k_base") as TiktokenRanks;
  const out: Uint8Array[] = [];
  for (const line of ranks.bpe_ranks.split("\n")) {
    if (line === "") continue;
    const [, first, ...tokens] = line.split(" ");
    tokens.forEach((b64, i) => (out[Number(first) + i] = Uint8Array.from(Buffer.from(b64, "base64"))));
  }
  for (let r = 0; r < out.length; r++) if (out[r] === undefined) throw new Error(`phi4-mini-vocab: o200k_base has no rank ${r}`);
  return out;
}

/** transformers extract_vocab_merges_from_model: (left, right) token texts, ordered by the merged token's rank */
export function tiktokenMerges(ranks: readonly Uint8Array[], text: readonly string[]): string[] {
  const rankOf = new Map<string, number>(text.map((t, r) => [t, r]));
  const merges: string[] = [];
  for (let rank = 0; rank < ranks.length; rank++) {
    const bytes = ranks[rank]!;
    if (bytes.length === 1) continue;
    const local: [number, number][] = [];
    for (let i = 1; i < bytes.length; i++) {
      const l = rankOf.get(byteEncodeBytes(bytes.subarray(0, i)));
      const r = rankOf.get(byteEncodeBytes(bytes.subarray(i)));
      if (l !== undefined && r !== undefined) local.push([l, r]);
    }
    local.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    for (const [l, r] of local) merges.push(`${text[l]} ${text[r]}`);
  }
  return merges;
}

/** The tokenizer.* metadata of the Phi-4-mini-like vocabulary (see the file comment for each rule). */
export function phi4MiniTokenizerMetadata(): Map<string, GgufMetadataEntry> {
  const ranks = o200kRanks();
  const rankText = ranks.map((b) => byteEncodeBytes(b));
  const tokens = Array.from({ length: VOCAB_SIZE }, (_, id) => ADDED_TOKENS[id] ?? rankText[id] ?? `[PAD${id}]`);
  const types = Array.from({ length: VOCAB_SIZE }, (_, id) => (ADDED_TOKENS[id] !== undefined ? TokenType.CONTROL : id < ranks.length ? TokenType.NORMAL : TokenType.UNUSED));
  const endoftext = 199999;
  return new Map<string, GgufMetadataEntry>([
    [KEY.tokenizerModel, mdString("gpt2")],
    [KEY.tokenizerPre, mdString("gpt-4o")],
    [KEY.tokens, mdArray(GgufValueType.STRING, tokens)],
    [KEY.tokenType, mdArray(GgufValueType.INT32, types)],
    [KEY.merges, mdArray(GgufValueType.STRING, tiktokenMerges(ranks, rankText))],
    // bos, eos, unk and pad are all <|endoftext|>; add_bos_token / add_eos_token false
    [KEY.bosId, mdU32(endoftext)],
    [KEY.eosId, mdU32(endoftext)],
    [KEY.unkId, mdU32(endoftext)],
    [KEY.padId, mdU32(endoftext)],
    [KEY.addBos, mdBool(false)],
    [KEY.addEos, mdBool(false)],
    [KEY.chatTemplate, mdString(CHAT_TEMPLATE)],
  ]);
}

/**
 * The vocab-only GGUF, written on first use, with Phi-4-mini's hyperparameters (llama.cpp reads a vocab-only file's
 * too, as its own ggml-vocab-*.gguf files carry their model's).
 */
export function phi4MiniVocabPath(): string {
  if (existsSync(VOCAB_PATH)) return VOCAB_PATH;
  mkdirSync(CACHE_DIR, { recursive: true });
  const a = (key: Parameters<typeof archKey>[1]) => archKey("phi3", key);
  const metadata = new Map<string, GgufMetadataEntry>([
    [KEY.architecture, mdString("phi3")], [KEY.name, mdString("phi-4-mini vocab")],
    [a("contextLength"), mdU32(131072)], [a("embeddingLength"), mdU32(3072)], [a("blockCount"), mdU32(32)],
    [a("feedForwardLength"), mdU32(8192)], [a("headCount"), mdU32(24)], [a("headCountKv"), mdU32(8)],
    [a("ropeDimensionCount"), mdU32(96)], [a("rmsEps"), mdF32(1e-5)], [a("ropeFreqBase"), mdF32(10000)],
    ...phi4MiniTokenizerMetadata(),
  ]);
  // parallel test processes: each writes its own file and renames it into place
  const tmp = `${VOCAB_PATH}.tmp-${process.pid}-${Date.now()}`;
  writeGgufFile(tmp, { metadata, tensors: [] });
  renameSync(tmp, VOCAB_PATH);
  return VOCAB_PATH;
}

if (import.meta.main) console.log(phi4MiniVocabPath());
