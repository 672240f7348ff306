/**
 * The vocabulary a tokenizer needs, read once from GGUF metadata (`tokenizer.*` keys), with llama.cpp's load-time
 * rules (llama_vocab::impl::load): per-model defaults for BOS/EOS/UNK and add_bos, special tokens recognised by their
 * text (end-of-turn, FIM), the end-of-generation set, and the special-token list used for parse_special.
 * Bad metadata throws a TokenizerError with one line naming the file and the key.
 */
import { GgufValueType, type GgufFile, type GgufScalar } from "../gguf/gguf-file.ts";
import { findPreTokenizer, type PreTokenizerSpec } from "./pretokenize.ts";
import { SPECIAL_ATTRS, TOKEN_TYPE_TO_ATTR, TokenAttr } from "./token-attr.ts";

export class TokenizerError extends Error {
  override readonly name = "TokenizerError";
}

/** The GGUF keys this folder reads (llama-arch.cpp LLM_KV_TOKENIZER_*). */
export const TOKENIZER_KEYS = {
  model: "tokenizer.ggml.model",
  pre: "tokenizer.ggml.pre",
  tokens: "tokenizer.ggml.tokens",
  tokenType: "tokenizer.ggml.token_type",
  scores: "tokenizer.ggml.scores",
  merges: "tokenizer.ggml.merges",
  bosId: "tokenizer.ggml.bos_token_id",
  eosId: "tokenizer.ggml.eos_token_id",
  eotId: "tokenizer.ggml.eot_token_id",
  eomId: "tokenizer.ggml.eom_token_id",
  unkId: "tokenizer.ggml.unknown_token_id",
  padId: "tokenizer.ggml.padding_token_id",
  addBos: "tokenizer.ggml.add_bos_token",
  addEos: "tokenizer.ggml.add_eos_token",
  addSpacePrefix: "tokenizer.ggml.add_space_prefix",
  chatTemplate: "tokenizer.chat_template",
  modelName: "general.name",
} as const;

export type VocabKind = "spm" | "bpe";

export interface Vocab {
  readonly source: string;
  readonly kind: VocabKind;
  /** token texts as stored (SPM: spaces as "▁"; byte-level BPE: GPT-2 byte alphabet) */
  readonly tokens: readonly string[];
  readonly scores: Float32Array; // [numTokens]
  readonly attrs: Uint16Array; // [numTokens] TokenAttr bits
  readonly tokenToId: ReadonlyMap<string, number>;
  /** BPE merge ranks keyed by the merge line "left right" */
  readonly mergeRanks: ReadonlyMap<string, number>;
  readonly pre: PreTokenizerSpec | null;
  readonly bosId: number | null;
  readonly eosId: number | null;
  readonly unkId: number | null;
  readonly addBos: boolean;
  readonly addEos: boolean;
  /** SPM: put a space in front of text that starts the input or follows a special token */
  readonly addSpacePrefix: boolean;
  readonly cleanSpaces: boolean;
  /** ids that end generation, ascending */
  readonly eogIds: readonly number[];
  /** CONTROL / USER_DEFINED / UNKNOWN tokens, longest text first (llama.cpp cache_special_tokens) */
  readonly specialIds: readonly number[];
  readonly chatTemplate: string | null;
}

/** Texts that mark end-of-turn tokens when tokenizer.ggml.eot_token_id is absent (first match wins). */
const EOT_TEXTS = ["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"];
const EOM_TEXTS = ["<|eom_id|>"];
/** Texts of tokens that end generation (llama.cpp special_eog_ids). */
const EOG_TEXTS = new Set([
  "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>",
  "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
  "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
]);
/** FIM pad / repo / file-separator tokens also end generation. */
const FIM_EOG_TEXTS = ["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>"];

/** Per tokenizer model: default special ids and flags before metadata overrides them. */
const MODEL_DEFAULTS: Readonly<Record<string, { kind: VocabKind; bos: number | null; eos: number | null; unk: number | null; addBos: boolean }>> = {
  llama: { kind: "spm", bos: 1, eos: 2, unk: 0, addBos: true },
  gpt2: { kind: "bpe", bos: 11, eos: 11, unk: null, addBos: false },
};

class MetadataReader {
  constructor(private readonly gguf: GgufFile) {}

  fail(key: string, problem: string): never {
    throw new TokenizerError(`${this.gguf.source}: ${key}: ${problem}`);
  }

  has(key: string): boolean {
    return this.gguf.metadata.has(key);
  }

  string(key: string): string | null {
    const entry = this.gguf.metadata.get(key);
    if (entry === undefined) return null;
    if (typeof entry.value !== "string") this.fail(key, "expected a string");
    return entry.value;
  }

  bool(key: string): boolean | null {
    const entry = this.gguf.metadata.get(key);
    if (entry === undefined) return null;
    if (typeof entry.value !== "boolean") this.fail(key, "expected a bool");
    return entry.value;
  }

  uint(key: string): number | null {
    const entry = this.gguf.metadata.get(key);
    if (entry === undefined) return null;
    const v = entry.value;
    const n = typeof v === "bigint" ? Number(v) : v;
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0) this.fail(key, "expected an unsigned integer");
    return n;
  }

  array(key: string, elementTypes: readonly GgufValueType[]): GgufScalar[] | null {
    const entry = this.gguf.metadata.get(key);
    if (entry === undefined) return null;
    const v = entry.value;
    if (typeof v !== "object" || !("elementType" in v)) this.fail(key, "expected an array");
    if (!elementTypes.includes(v.elementType)) this.fail(key, `unexpected element type ${GgufValueType[v.elementType] ?? v.elementType}`);
    return v.values;
  }
}

export function readVocab(gguf: GgufFile): Vocab {
  const md: MetadataReader = new MetadataReader(gguf); // annotated so fail() narrows types
  const modelName = md.string(TOKENIZER_KEYS.model);
  if (modelName === null) md.fail(TOKENIZER_KEYS.model, "missing (the file has no tokenizer)");
  const defaults = MODEL_DEFAULTS[modelName];
  if (defaults === undefined) md.fail(TOKENIZER_KEYS.model, `unsupported tokenizer model "${modelName}" (supported: ${Object.keys(MODEL_DEFAULTS).join(", ")})`);

  const tokenValues = md.array(TOKENIZER_KEYS.tokens, [GgufValueType.STRING]);
  if (tokenValues === null || tokenValues.length === 0) md.fail(TOKENIZER_KEYS.tokens, "missing or empty");
  const numTokens = tokenValues.length;
  const tokens = tokenValues.map((t, i) => ((t as string) === "" ? `[EMPTY_${i}]` : (t as string)));
  const tokenToId = new Map<string, number>();
  for (let i = 0; i < numTokens; i++) tokenToId.set(tokens[i]!, i);

  const scores = new Float32Array(numTokens);
  const scoreValues = md.array(TOKENIZER_KEYS.scores, [GgufValueType.FLOAT32, GgufValueType.INT32]);
  if (scoreValues !== null) {
    if (scoreValues.length < numTokens) md.fail(TOKENIZER_KEYS.scores, `${scoreValues.length} scores for ${numTokens} tokens`);
    for (let i = 0; i < numTokens; i++) scores[i] = scoreValues[i] as number;
  }

  const attrs = new Uint16Array(numTokens).fill(TokenAttr.NORMAL);
  const typeValues = md.array(TOKENIZER_KEYS.tokenType, [GgufValueType.INT32]);
  if (typeValues !== null) {
    if (typeValues.length < numTokens) md.fail(TOKENIZER_KEYS.tokenType, `${typeValues.length} token types for ${numTokens} tokens`);
    for (let i = 0; i < numTokens; i++) attrs[i] = TOKEN_TYPE_TO_ATTR[typeValues[i] as number] ?? TokenAttr.UNDEFINED;
  }

  let pre: PreTokenizerSpec | null = null;
  const mergeRanks = new Map<string, number>();
  let addBos = defaults.addBos;
  let addSpacePrefix = defaults.kind === "spm";
  let cleanSpaces = false;
  if (defaults.kind === "bpe") {
    const preName = md.string(TOKENIZER_KEYS.pre) ?? "default";
    const spec = findPreTokenizer(preName);
    if (spec === undefined) md.fail(TOKENIZER_KEYS.pre, `unsupported pre-tokenizer "${preName}"`);
    pre = spec;
    addBos = spec.addBos;
    cleanSpaces = spec.cleanSpaces;
    const merges = md.array(TOKENIZER_KEYS.merges, [GgufValueType.STRING]);
    if (merges === null) md.fail(TOKENIZER_KEYS.merges, "missing (a gpt2 tokenizer needs merges)");
    for (let i = 0; i < merges.length; i++) if (!mergeRanks.has(merges[i] as string)) mergeRanks.set(merges[i] as string, i);
  }
  addSpacePrefix = md.bool(TOKENIZER_KEYS.addSpacePrefix) ?? addSpacePrefix;

  const idOf = (key: string, fallback: number | null): number | null => {
    const dflt = fallback !== null && fallback < numTokens ? fallback : null;
    const id = md.uint(key);
    return id !== null && id < numTokens ? id : dflt;
  };
  const bosId = idOf(TOKENIZER_KEYS.bosId, defaults.bos);
  const eosId = idOf(TOKENIZER_KEYS.eosId, defaults.eos);
  const unkId = idOf(TOKENIZER_KEYS.unkId, defaults.unk);
  let eotId = idOf(TOKENIZER_KEYS.eotId, null);
  let eomId = idOf(TOKENIZER_KEYS.eomId, null);
  addBos = md.bool(TOKENIZER_KEYS.addBos) ?? addBos;
  const addEos = md.bool(TOKENIZER_KEYS.addEos) ?? false;

  // tokens recognised by their text are control tokens, whatever the converter said
  const markControl = (id: number) => { attrs[id]! |= TokenAttr.CONTROL; };
  if (eotId === null) eotId = firstPresent(tokenToId, EOT_TEXTS);
  if (eomId === null) eomId = firstPresent(tokenToId, EOM_TEXTS);
  const eog = new Set<number>();
  for (const text of FIM_EOG_TEXTS) {
    const id = tokenToId.get(text);
    if (id !== undefined) { eog.add(id); markControl(id); }
  }
  for (const text of EOG_TEXTS) {
    const id = tokenToId.get(text);
    if (id !== undefined) { eog.add(id); markControl(id); }
  }
  for (const id of [eosId, eotId, eomId]) if (id !== null) { eog.add(id); markControl(id); }

  const specialIds: number[] = [];
  for (let id = 0; id < numTokens; id++) {
    if (attrs[id]! & (TokenAttr.CONTROL | TokenAttr.USER_DEFINED | TokenAttr.UNKNOWN)) specialIds.push(id);
  }
  specialIds.sort((a, b) => tokens[b]!.length - tokens[a]!.length || a - b);

  // phi-3: special tokens swallow the whitespace after them (llama.cpp sets RSTRIP by model name)
  const generalName = (md.string(TOKENIZER_KEYS.modelName) ?? "").toLowerCase();
  if (generalName.includes("phi-3") || generalName.includes("phi3")) {
    for (const id of specialIds) attrs[id]! |= TokenAttr.RSTRIP;
    const setRstrip = (text: string, on: boolean) => {
      const id = tokenToId.get(text);
      if (id !== undefined) attrs[id] = on ? attrs[id]! | TokenAttr.RSTRIP : attrs[id]! & ~TokenAttr.RSTRIP;
    };
    setRstrip("</s>", true);
    for (const text of ["<unk>", "<s>", "<|endoftext|>"]) setRstrip(text, false);
  }

  return {
    source: gguf.source,
    kind: defaults.kind,
    tokens,
    scores,
    attrs,
    tokenToId,
    mergeRanks,
    pre,
    bosId,
    eosId,
    unkId,
    addBos,
    addEos,
    addSpacePrefix,
    cleanSpaces,
    eogIds: [...eog].sort((a, b) => a - b),
    specialIds,
    chatTemplate: md.string(TOKENIZER_KEYS.chatTemplate),
  };
}

function firstPresent(tokenToId: ReadonlyMap<string, number>, texts: readonly string[]): number | null {
  for (const text of texts) {
    const id = tokenToId.get(text);
    if (id !== undefined) return id;
  }
  return null;
}

/** True for tokens hidden when special tokens are not rendered (control and unknown). */
export function isSpecialAttr(attr: number): boolean {
  return (attr & SPECIAL_ATTRS) !== 0;
}
