/**
 * The vocabulary a tokenizer needs, read once from GGUF metadata (`tokenizer.*` keys), with llama.cpp's load-time
 * rules (llama_vocab::impl::load): per-model defaults for BOS/EOS/UNK and add_bos, special tokens recognised by their
 * text (end-of-turn, FIM), the end-of-generation set, and the special-token list used for parse_special.
 * Bad metadata throws a TokenizerError with one line naming the file and the key.
 */
import { GgufValueType, type GgufFile, type GgufScalar } from "../gguf/gguf-file.ts";
import { getArray, getBool, getString, getU32, optional } from "../gguf/metadata.ts";
import { KEY, type TokenType } from "../gguf/names.ts";
import type { Result } from "../util/result.ts";
import { findPreTokenizer, type PreTokenizerSpec } from "./pretokenize.ts";
import { SPECIAL_ATTRS, TOKEN_TYPE_TO_ATTR, TokenAttr } from "./token-attr.ts";

export class TokenizerError extends Error {
  override readonly name = "TokenizerError";
}

/** tokenizer.ggml.eom_token_id: not in gguf/names.ts KEY (yet), so spelled here once */
const EOM_ID_KEY = "tokenizer.ggml.eom_token_id";

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

/** Optional typed metadata (gguf/metadata.ts accessors); a present key of the wrong type throws TokenizerError. */
class MetadataReader {
  constructor(private readonly gguf: GgufFile) {}

  fail(key: string, problem: string): never {
    throw new TokenizerError(`${this.gguf.source}: ${key}: ${problem}`);
  }

  private get<T>(key: string, getter: (file: GgufFile, key: string) => Result<T>): T | null {
    const value = optional(this.gguf, key, getter);
    if (!value.ok) throw new TokenizerError(value.error);
    return value.value ?? null;
  }

  string(key: string): string | null {
    return this.get(key, getString);
  }

  bool(key: string): boolean | null {
    return this.get(key, getBool);
  }

  uint(key: string): number | null {
    return this.get(key, getU32);
  }

  array(key: string, elementTypes: readonly GgufValueType[]): GgufScalar[] | null {
    const array = this.get(key, (file, k) => getArray(file, k));
    if (array === null) return null;
    if (!elementTypes.includes(array.elementType)) this.fail(key, `unexpected element type ${GgufValueType[array.elementType]?.toLowerCase() ?? array.elementType}`);
    return array.values;
  }
}

export function readVocab(gguf: GgufFile): Vocab {
  const steps = vocabSteps(gguf);
  for (;;) {
    const step = steps.next();
    if (step.done === true) return step.value;
  }
}

/**
 * readVocab with the event loop served every `sliceMs` of work (`pause()` awaited): a 150k-token vocabulary's tables
 * are 100-250 ms of work, which a server loading a model beside others' streams runs on its HTTP thread.
 */
export async function readVocabInSlices(gguf: GgufFile, pause: () => Promise<void>, sliceMs: number): Promise<Vocab> {
  const steps = vocabSteps(gguf);
  let sliceStart = performance.now();
  for (;;) {
    const step = steps.next();
    if (step.done === true) return step.value;
    if (performance.now() - sliceStart >= sliceMs) {
      await pause();
      sliceStart = performance.now();
    }
  }
}

/** the token loops offer a pause after this many tokens (about a millisecond of work) */
const TOKENS_PER_STEP = 2048;

/** readVocab's work, yielding between runs of TOKENS_PER_STEP tokens in its loops over the vocabulary. */
function* vocabSteps(gguf: GgufFile): Generator<void, Vocab> {
  const md: MetadataReader = new MetadataReader(gguf); // annotated so fail() narrows types
  const modelName = md.string(KEY.tokenizerModel);
  if (modelName === null) md.fail(KEY.tokenizerModel, "missing (the file has no tokenizer)");
  const defaults = MODEL_DEFAULTS[modelName];
  if (defaults === undefined) md.fail(KEY.tokenizerModel, `unsupported tokenizer model "${modelName}" (supported: ${Object.keys(MODEL_DEFAULTS).join(", ")})`);

  const tokenValues = md.array(KEY.tokens, [GgufValueType.STRING]);
  if (tokenValues === null || tokenValues.length === 0) md.fail(KEY.tokens, "missing or empty");
  const numTokens = tokenValues.length;
  const tokens = new Array<string>(numTokens);
  const tokenToId = new Map<string, number>();
  for (let i = 0; i < numTokens; i++) {
    const t = tokenValues[i] as string;
    tokens[i] = t === "" ? `[EMPTY_${i}]` : t;
    tokenToId.set(tokens[i]!, i);
    if (i % TOKENS_PER_STEP === TOKENS_PER_STEP - 1) yield;
  }

  const scores = new Float32Array(numTokens);
  const scoreValues = md.array(KEY.scores, [GgufValueType.FLOAT32, GgufValueType.INT32]);
  if (scoreValues !== null) {
    if (scoreValues.length < numTokens) md.fail(KEY.scores, `${scoreValues.length} scores for ${numTokens} tokens`);
    for (let i = 0; i < numTokens; i++) {
      scores[i] = scoreValues[i] as number;
      if (i % TOKENS_PER_STEP === TOKENS_PER_STEP - 1) yield;
    }
  }

  const attrs = new Uint16Array(numTokens).fill(TokenAttr.NORMAL);
  const typeValues = md.array(KEY.tokenType, [GgufValueType.INT32]);
  if (typeValues !== null) {
    if (typeValues.length < numTokens) md.fail(KEY.tokenType, `${typeValues.length} token types for ${numTokens} tokens`);
    for (let i = 0; i < numTokens; i++) {
      attrs[i] = TOKEN_TYPE_TO_ATTR[typeValues[i] as TokenType] ?? TokenAttr.UNDEFINED;
      if (i % TOKENS_PER_STEP === TOKENS_PER_STEP - 1) yield;
    }
  }

  let pre: PreTokenizerSpec | null = null;
  const mergeRanks = new Map<string, number>();
  let addBos = defaults.addBos;
  let addSpacePrefix = defaults.kind === "spm";
  let cleanSpaces = false;
  if (defaults.kind === "bpe") {
    const preName = md.string(KEY.tokenizerPre) ?? "default";
    const spec = findPreTokenizer(preName);
    if (spec === undefined) md.fail(KEY.tokenizerPre, `unsupported pre-tokenizer "${preName}"`);
    pre = spec;
    addBos = spec.addBos;
    cleanSpaces = spec.cleanSpaces;
    const merges = md.array(KEY.merges, [GgufValueType.STRING]);
    if (merges === null) md.fail(KEY.merges, "missing (a gpt2 tokenizer needs merges)");
    for (let i = 0; i < merges.length; i++) {
      if (!mergeRanks.has(merges[i] as string)) mergeRanks.set(merges[i] as string, i);
      if (i % TOKENS_PER_STEP === TOKENS_PER_STEP - 1) yield;
    }
  }
  addSpacePrefix = md.bool(KEY.addSpacePrefix) ?? addSpacePrefix;

  const idOf = (key: string, fallback: number | null): number | null => {
    const dflt = fallback !== null && fallback < numTokens ? fallback : null;
    const id = md.uint(key);
    return id !== null && id < numTokens ? id : dflt;
  };
  const bosId = idOf(KEY.bosId, defaults.bos);
  const eosId = idOf(KEY.eosId, defaults.eos);
  const unkId = idOf(KEY.unkId, defaults.unk);
  let eotId = idOf(KEY.eotId, null);
  let eomId = idOf(EOM_ID_KEY, null);
  addBos = md.bool(KEY.addBos) ?? addBos;
  const addEos = md.bool(KEY.addEos) ?? false;

  // tokens recognised by their text are control tokens, whatever the converter said
  const markControl = (id: number) => { attrs[id]! |= TokenAttr.CONTROL; };
  if (eotId === null) {
    eotId = firstPresent(tokenToId, EOT_TEXTS);
    if (eotId !== null) markControl(eotId);
  }
  if (eomId === null) {
    eomId = firstPresent(tokenToId, EOM_TEXTS);
    if (eomId !== null) markControl(eomId);
  }
  const eog = new Set<number>();
  for (const text of FIM_EOG_TEXTS) {
    const id = tokenToId.get(text);
    if (id !== undefined) { eog.add(id); markControl(id); }
  }
  for (const text of EOG_TEXTS) {
    const id = tokenToId.get(text);
    if (id !== undefined) { eog.add(id); markControl(id); }
  }
  for (const id of [eosId, eotId, eomId]) if (id !== null) eog.add(id);
  // o200k_harmony (gpt-oss): <|end|> closes one message of a turn (the analysis before the answer), so with <|return|>
  // and <|call|> present it does not end generation; the Harmony header tokens always render (llama-vocab.cpp load)
  const harmonyEnd = tokenToId.get("<|end|>");
  if (harmonyEnd !== undefined && eog.has(harmonyEnd) && ["<|return|>", "<|call|>"].every((t) => eog.has(tokenToId.get(t) ?? -1))) {
    eog.delete(harmonyEnd);
    for (const text of ["<|end|>", "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"]) {
      const id = tokenToId.get(text);
      if (id !== undefined) attrs[id] = TokenAttr.USER_DEFINED;
    }
  }

  const specialIds: number[] = [];
  for (let id = 0; id < numTokens; id++) {
    if (attrs[id]! & (TokenAttr.CONTROL | TokenAttr.USER_DEFINED | TokenAttr.UNKNOWN)) specialIds.push(id);
  }
  specialIds.sort((a, b) => tokens[b]!.length - tokens[a]!.length || a - b);

  // phi-3: special tokens swallow the whitespace after them (llama.cpp sets RSTRIP by model name)
  const generalName = (md.string(KEY.name) ?? "").toLowerCase();
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
    chatTemplate: md.string(KEY.chatTemplate),
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
