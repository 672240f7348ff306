/**
 * A stand-in SmolVLM vocabulary as a vocab-only GGUF, for make-model's smolvlm shapes. SmolVLM's own tokenizer (SmolLM2's
 * 49,152 byte-level BPE pieces plus its image tokens) is in no package or file here, so the pieces are those of
 * llama.cpp's ggml-vocab-gpt-2.gguf (the stand-in the smollm2-135m shape already uses: the same byte-level BPE kind and
 * pre-tokenizer family), followed by the added tokens SmolVLM's processor and llama.cpp's mtmd use (<global-img>,
 * <row_1_col_1> ... <row_6_col_6>, <fake_token_around_image>, <image>, <end_of_utterance>; their ids here are not
 * SmolVLM's, which only the real vocabulary fixes), plus
 * SmolLM2's <|im_start|> and <|im_end|> (its ids 1 and 2), all control tokens as the converter types special added
 * tokens. bos <|im_start|> (the template writes it; add_bos false), eos <end_of_utterance>, pad <|im_end|>, and
 * SmolVLM-Instruct's chat template (chat_template.json), which writes `<image>` for each image part.
 *
 * Written once into the gitignored .cache/smolvlm/ (a few MB) and reused.
 * @example const path = smolvlmVocabPath(); // .../.cache/smolvlm/ggml-vocab-smolvlm.gguf
 */
import { existsSync, mkdirSync, renameSync } from "node:fs";
import { join, resolve } from "node:path";
import { GgufValueType, type GgufMetadataEntry } from "../src/gguf/gguf-file.ts";
import { mdArray, mdBool, mdString, mdU32 } from "../src/gguf/metadata.ts";
import { KEY, TokenType } from "../src/gguf/names.ts";
import { readGguf } from "../src/gguf/reader.ts";
import { writeGgufFile } from "../src/gguf/writer.ts";
import { llamaVocabPath } from "./llama-vocab.ts";

const ROOT = resolve(import.meta.dirname, "..");
const CACHE_DIR = join(ROOT, ".cache/smolvlm");
const VOCAB_PATH = join(CACHE_DIR, "ggml-vocab-smolvlm.gguf");

/** SmolVLM's added tokens past the text pieces, then SmolLM2's chat tokens. */
export const SMOLVLM_ADDED_TOKENS: readonly string[] = [
  "<global-img>",
  ...Array.from({ length: 36 }, (_, i) => `<row_${Math.floor(i / 6) + 1}_col_${(i % 6) + 1}>`),
  "<fake_token_around_image>", "<image>", "<end_of_utterance>", "<|im_start|>", "<|im_end|>",
];

/** HuggingFaceTB/SmolVLM-256M-Instruct chat_template.json */
export const SMOLVLM_CHAT_TEMPLATE =
  "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}" +
  "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}" +
  "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}";

/** The tokenizer.* metadata: gpt-2's, extended by the added tokens, with SmolVLM's special ids and template. */
export function smolvlmTokenizerMetadata(): Map<string, GgufMetadataEntry> {
  const base = readGguf(llamaVocabPath("gpt-2"));
  if (!base.ok) throw new Error(base.error);
  const array = (key: string): unknown[] => {
    const entry = base.value.metadata.get(key);
    if (entry?.type !== GgufValueType.ARRAY) throw new Error(`smolvlm-vocab: ${base.value.source} has no ${key}`);
    return [...(entry.value as { values: unknown[] }).values];
  };
  const tokens = array(KEY.tokens) as string[];
  const types = array(KEY.tokenType) as number[];
  const first = tokens.length;
  for (const t of SMOLVLM_ADDED_TOKENS) {
    tokens.push(t);
    types.push(TokenType.CONTROL);
  }
  const idOf = (t: string): number => first + SMOLVLM_ADDED_TOKENS.indexOf(t);
  return new Map<string, GgufMetadataEntry>([
    [KEY.tokenizerModel, mdString("gpt2")],
    [KEY.tokenizerPre, mdString("gpt-2")],
    [KEY.tokens, mdArray(GgufValueType.STRING, tokens)],
    [KEY.tokenType, mdArray(GgufValueType.INT32, types)],
    [KEY.merges, mdArray(GgufValueType.STRING, array(KEY.merges) as string[])],
    [KEY.bosId, mdU32(idOf("<|im_start|>"))],
    [KEY.eosId, mdU32(idOf("<end_of_utterance>"))],
    [KEY.padId, mdU32(idOf("<|im_end|>"))],
    [KEY.addBos, mdBool(false)],
    [KEY.chatTemplate, mdString(SMOLVLM_CHAT_TEMPLATE)],
  ]);
}

/** The vocab-only GGUF (no tensors), written on first use; it carries gpt-2's hyperparameters as its source does. */
export function smolvlmVocabPath(): string {
  if (existsSync(VOCAB_PATH)) return VOCAB_PATH;
  mkdirSync(CACHE_DIR, { recursive: true });
  const base = readGguf(llamaVocabPath("gpt-2"));
  if (!base.ok) throw new Error(base.error);
  const metadata = new Map<string, GgufMetadataEntry>([...base.value.metadata].filter(([key]) => !key.startsWith("tokenizer.")));
  metadata.set(KEY.name, mdString("smolvlm stand-in vocab"));
  for (const [key, value] of smolvlmTokenizerMetadata()) metadata.set(key, value);
  // parallel test processes: each writes its own file and renames it into place
  const tmp = `${VOCAB_PATH}.tmp-${process.pid}-${Date.now()}`;
  writeGgufFile(tmp, { metadata, tensors: [] });
  renameSync(tmp, VOCAB_PATH);
  return VOCAB_PATH;
}
