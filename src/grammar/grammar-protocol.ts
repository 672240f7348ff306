/**
 * Messages between the engine Worker and its grammar thread (grammar-worker.ts), discriminated on `type`. The grammar
 * thread owns every xgrammar object (tokenizer info, compiler, compiled grammars, one matcher per request); the
 * engine only ever sees bitmasks. vLLM's StructuredOutputManager split in two: compile and fill here, apply in the
 * engine's sampler.
 */
import type { GrammarSpec } from "./grammar-spec.ts";

/** A model's vocabulary as xgrammar's TokenizerInfo takes it (built on the main thread from the tokenizer). */
export interface GrammarVocab {
  /** [numTokens] token texts as stored, by id; control tokens as "<...>" so xgrammar never emits them as text */
  readonly encodedVocab: readonly string[];
  /** SentencePiece byte-fallback ("▁" spaces, "<0x0A>" bytes) or byte-level BPE (GPT-2 byte alphabet) */
  readonly vocabType: "byte_fallback" | "byte_level" | "raw";
  /** the tokenizer puts a space in front of the text (SentencePiece add_dummy_prefix) */
  readonly prependSpace: boolean;
}

export interface GrammarThreadInit {
  readonly vocab: GrammarVocab;
  /** the logits width (may exceed the vocabulary: padded embeddings); tokens past the vocabulary are masked */
  readonly vocabSize: number;
  /** compiled grammars kept for reuse (least recently used dropped first) */
  readonly cacheSize: number;
}

/**
 * One request's share of a fill: bring its matcher up to date, then write its bitmask at each of `drafts.length + 1`
 * positions, advancing through the drafts to get there and rolling them back afterwards (vLLM
 * StructuredOutputManager.grammar_bitmask with scheduled_spec_decode_tokens). A draft the grammar refuses ends the
 * row there: it and every later draft are invalid (vLLM XgrammarGrammar.validate_tokens keeps the longest valid prefix).
 */
export interface FillRow {
  readonly requestId: string;
  /** undo this many accepted tokens first */
  readonly rollBack: number;
  /** tokens sampled since the last fill, in order */
  readonly accept: readonly number[];
  /** speculative decoding: the drafted tokens after them (empty without drafts) */
  readonly drafts: readonly number[];
}

/**
 * Where row r's bitmasks start in a fill's masks: each row takes `drafts.length + 1` rows of words (only the first
 * numValidDrafts + 1 of them are written).
 */
export function fillRowStarts(rows: readonly { readonly drafts: readonly number[] }[]): number[] {
  const starts = [0];
  for (const row of rows) starts.push(starts[starts.length - 1]! + row.drafts.length + 1);
  return starts;
}

export type ToGrammar =
  | { readonly type: "init"; readonly init: GrammarThreadInit }
  /** compile (or take from the cache) and start a matcher for the request; stopTokenIds end the grammar */
  | { readonly type: "compile"; readonly requestId: string; readonly spec: GrammarSpec; readonly stopTokenIds: readonly number[] }
  /** withMasks false: validate the drafts only (vLLM validates them when the proposer hands them to the scheduler) */
  | { readonly type: "fill"; readonly fillId: number; readonly rows: readonly FillRow[]; readonly withMasks: boolean }
  | { readonly type: "free"; readonly requestIds: readonly string[] };

/** Per fill row: "ok" (bitmasks written for the valid drafts and the position after them), or why the request cannot go on. */
export type FillStatus =
  | { readonly kind: "ok"; readonly numValidDrafts: number }
  /** a token the mask allowed was refused (a bug, or a mask that was not applied): vLLM ends the request */
  | { readonly kind: "rejected"; readonly tokenId: number };

export type FromGrammar =
  | { readonly type: "ready"; readonly tokenizerInfoMs: number }
  | { readonly type: "compiled"; readonly requestId: string; readonly compileMs: number; readonly cached: boolean }
  /** poisoned: xgrammar aborted inside WASM, so this thread must be replaced (its memory may be corrupt) */
  | { readonly type: "compileFailed"; readonly requestId: string; readonly message: string; readonly poisoned: boolean }
  /** masks: [fillRowStarts(rows).at(-1), words] packed int32 bitmasks, bit set = token allowed (xgrammar's layout); empty without masks */
  | { readonly type: "filled"; readonly fillId: number; readonly words: number; readonly masks: Int32Array; readonly status: readonly FillStatus[] }
  | { readonly type: "fatal"; readonly message: string };
