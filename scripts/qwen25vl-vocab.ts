/**
 * A Qwen2.5-VL vocabulary as a vocab-only GGUF, for make-model's qwen2.5-vl shapes. Qwen2.5(-VL)'s byte-level BPE is
 * the one in llama.cpp's models/ggml-vocab-qwen2.gguf (the same 151,643 ranks, merges and pre-tokenizer), but that file
 * stops its added tokens at <|im_end|> and carries Qwen2's text-only chat template. This one is that file with what
 * Qwen2.5-VL-*-Instruct's tokenizer_config.json adds, as llama.cpp's converter writes it (conversion/base.py
 * _set_vocab_gpt2 / get_vocab_base: special added tokens CONTROL, the others USER_DEFINED; gguf-py SpecialVocab: eos
 * <|im_end|>, pad <|endoftext|>, no add_bos): the added tokens 151646..151664 (<|vision_start|> ... <|file_sep|>) in
 * place of their [PAD<id>] fillers, and the chat template of chat_template.json, which writes
 * <|vision_start|><|image_pad|><|vision_end|> for each image part (transcribed below: those files are not reachable
 * here; the token ids and texts are Qwen2.5's published ones). Written once into the gitignored .cache/qwen25vl/.
 * @example const path = qwen25vlVocabPath(); // .../.cache/qwen25vl/ggml-vocab-qwen2.5-vl.gguf
 */
import { existsSync, mkdirSync, renameSync } from "node:fs";
import { join, resolve } from "node:path";
import { GgufValueType, type GgufMetadataEntry } from "../src/gguf/gguf-file.ts";
import { mdArray, mdString, mdU32 } from "../src/gguf/metadata.ts";
import { KEY, TokenType } from "../src/gguf/names.ts";
import { readGguf } from "../src/gguf/reader.ts";
import { writeGgufFile } from "../src/gguf/writer.ts";
import { llamaVocabPath } from "./llama-vocab.ts";

const ROOT = resolve(import.meta.dirname, "..");
const CACHE_DIR = join(ROOT, ".cache/qwen25vl");
const VOCAB_PATH = join(CACHE_DIR, "ggml-vocab-qwen2.5-vl.gguf");

/** tokenizer_config.json added_tokens_decoder from 151646 on: [text, special] */
const ADDED_TOKENS: readonly (readonly [number, string, boolean])[] = [
  [151646, "<|object_ref_start|>", true], [151647, "<|object_ref_end|>", true], [151648, "<|box_start|>", true],
  [151649, "<|box_end|>", true], [151650, "<|quad_start|>", true], [151651, "<|quad_end|>", true],
  [151652, "<|vision_start|>", true], [151653, "<|vision_end|>", true], [151654, "<|vision_pad|>", true],
  [151655, "<|image_pad|>", true], [151656, "<|video_pad|>", true], [151657, "<tool_call>", false],
  [151658, "</tool_call>", false], [151659, "<|fim_prefix|>", false], [151660, "<|fim_middle|>", false],
  [151661, "<|fim_suffix|>", false], [151662, "<|fim_pad|>", false], [151663, "<|repo_name|>", false],
  [151664, "<|file_sep|>", false],
];
const ENDOFTEXT = 151643;
const IM_END = 151645;

/** Qwen2.5-VL-*-Instruct chat_template.json */
const CHAT_TEMPLATE = "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/** The vocab GGUF's path, written on first use from llama.cpp's qwen2 vocab. */
export function qwen25vlVocabPath(): string {
  if (existsSync(VOCAB_PATH)) return VOCAB_PATH;
  const base = readGguf(llamaVocabPath("qwen2"));
  if (!base.ok) throw new Error(base.error);
  const tokens = [...(base.value.metadata.get(KEY.tokens)!.value as { values: string[] }).values];
  const types = [...(base.value.metadata.get(KEY.tokenType)!.value as { values: number[] }).values];
  for (const [id, text, special] of ADDED_TOKENS) {
    if (!tokens[id]!.startsWith("[PAD")) throw new Error(`qwen25vl-vocab: token ${id} is "${tokens[id]}", not a filler`);
    tokens[id] = text;
    types[id] = special ? TokenType.CONTROL : TokenType.USER_DEFINED;
  }
  const metadata = new Map<string, GgufMetadataEntry>(base.value.metadata);
  metadata.set(KEY.tokens, mdArray(GgufValueType.STRING, tokens));
  metadata.set(KEY.tokenType, mdArray(GgufValueType.INT32, types));
  metadata.set(KEY.eosId, mdU32(IM_END));
  metadata.set(KEY.padId, mdU32(ENDOFTEXT));
  metadata.set(KEY.chatTemplate, mdString(CHAT_TEMPLATE));
  mkdirSync(CACHE_DIR, { recursive: true });
  const tmp = `${VOCAB_PATH}.tmp-${process.pid}`;
  writeGgufFile(tmp, { metadata, tensors: [] });
  renameSync(tmp, VOCAB_PATH);
  return VOCAB_PATH;
}
