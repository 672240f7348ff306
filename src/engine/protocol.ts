/**
 * The only module both sides of the engine Worker boundary import: every message, as discriminated unions on `type`.
 * Handlers switch exhaustively (util/result.ts `unreachable`). Keep it the one table of messages.
 */
import type { SamplingParams } from "./sampling-params.ts";
import type { FinishReason, RequestTimes, StepStats } from "./stats.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { GrammarVocab } from "../grammar/grammar-protocol.ts";
import type { ResolvedPooler } from "./resolve-pooler.ts";
import type { EngineArgs } from "../config/engine-args.ts";
import type { KvCacheEvent } from "../kv-events/kv-events.ts";
// the engine's arguments are a configuration record every layer reads (config/engine-args.ts); re-exported for the engine
export type { EngineArgs, KvCacheDtypeName } from "../config/engine-args.ts";

/** What the KV pool holds (vLLM's start-up figures and CacheConfig), from the engine's KV cache groups. */
export interface KvCacheFacts {
  /** tokens the pool holds: blocks / groups x block size (vLLM get_kv_cache_configs) */
  readonly sizeTokens: number;
  /** max-model-len requests that fit at once (vLLM get_max_concurrency_for_kv_cache_config) */
  readonly maxConcurrency: number;
  /** the model's sliding window (vLLM CacheConfig.sliding_window); null without sliding layers */
  readonly slidingWindow: number | null;
}

/** A pooling request's own fields (vLLM PoolingParams for the embed task), the engine's defaults already applied. */
export interface PoolingRequestParams {
  readonly normalize: boolean;
  /** matryoshka: keep the first d values; null: all */
  readonly dimensions: number | null;
}

/** KV blocks handed from a prefill stage to a decode stage (disaggregated prefill, same model). */
export interface KvHandoff {
  readonly numTokens: number;
  readonly blockSize: number;
  readonly data: Uint8Array;
}

export interface EngineRequest {
  readonly requestId: string;
  readonly promptTokenIds: readonly number[];
  readonly sampling: SamplingParams;
  readonly arrivalMs: number;
  /** tokens that end generation unless sampling.ignoreEos (the tokenizer's stop ids; vLLM eos_token_id) */
  readonly eosTokenIds?: readonly number[];
  /** stage 0 of a pd pipeline: stop after the first token and return the prompt's KV blocks */
  readonly exportKv?: boolean;
  /** stage 1 of a pd pipeline: these positions are already computed */
  readonly importKv?: KvHandoff;
  /** a pooling request (pooling engines only): prefill the prompt, return its pooled hidden state, keep no KV */
  readonly pooling?: PoolingRequestParams;
  /** encoded images (or other media) whose embeddings stand in for their placeholder tokens, by offset */
  readonly multimodal?: readonly MultimodalInput[];
  /** the LoRA adapter (by its served name) the request runs with (vLLM LoRARequest); absent: the base model */
  readonly loraName?: string;
}

/**
 * One encoded media item in a prompt (vLLM's MultiModalFeatureSpec): prompt positions [offset, offset + length) take
 * `embeddings` as their input instead of their (placeholder) tokens' embeddings, and their prefix-cache blocks are
 * keyed by `identifier` (the item's content hash, vLLM's mm_hash), since every placeholder is the same token.
 */
export interface MultimodalInput {
  readonly identifier: string;
  readonly offset: number;
  readonly length: number;
  /** [length][dim] */
  readonly embeddings: Float32Array;
  /** the item's positions see each other both ways (Gemma 3's image: llama.cpp mtmd_decode_use_non_causal) */
  readonly attendAhead: boolean;
  /** M-RoPE models (qwen2vl): the image's token grid, cols x rows = length, row-major (model/mrope.ts); absent: 1-D positions */
  readonly mropeGrid?: { readonly cols: number; readonly rows: number };
}

export interface TokenLogprob {
  readonly tokenId: number;
  readonly logprob: number;
  /** 1-based rank in the vocabulary */
  readonly rank: number;
}

export interface PositionLogprobs {
  /** the chosen token (generated, or the actual prompt token) */
  readonly chosen: TokenLogprob;
  readonly top: readonly TokenLogprob[];
}

/** What changed for one request in one step (vLLM EngineCoreOutput). */
export interface RequestDelta {
  readonly requestId: string;
  readonly newTokenIds: readonly number[];
  readonly logprobs?: readonly PositionLogprobs[];
  /** sent once, with the first delta; entry 0 is null (no logprob for the first prompt token) */
  readonly promptLogprobs?: readonly (PositionLogprobs | null)[];
  readonly finishReason?: FinishReason;
  /** the stop token id that ended it, if any */
  readonly stopReason?: number | null;
  readonly numCachedTokens: number;
  readonly times: RequestTimes;
  /** with exportKv, on finish */
  readonly kv?: KvHandoff;
  /** on finish, with a KV connector between instances: the response's kv_transfer_params (vLLM request_finished) */
  readonly kvTransferParams?: Readonly<Record<string, unknown>> | null;
  /** a pooling request, on finish: its embedding (pooled, truncated, normalised as asked) */
  readonly embedding?: Float32Array;
}

/** How the engine Worker gets its model runner. */
export type RunnerSpec =
  /** load a GGUF file (null = the embedded default model) on the kernel backend */
  | {
    readonly kind: "model"; readonly modelPath: string | null;
    /** the model file's bytes already in memory (sleep level 1's host copy, moved to the Worker): read instead of the file */
    readonly hostBytes?: ArrayBuffer;
  }
  /** import a module exporting `createRunner(options)` (tests: a fake model behind the same contract) */
  | { readonly kind: "module"; readonly moduleUrl: string; readonly options: unknown };

/** Everything an engine Worker needs to start: sent once, as its first message. */
export interface EngineWorkerSpec {
  readonly engineIndex: number;
  readonly engineArgs: EngineArgs;
  readonly runner: RunnerSpec;
  /** the tokenizer's vocabulary for structured outputs (xgrammar's TokenizerInfo), packed; absent = none possible */
  readonly grammarVocab?: PackedGrammarVocab | null;
}

/**
 * A GrammarVocab as it crosses to the Worker: the token texts joined into one string, with each one's end. Cloning an
 * array of 150k strings copies them one by one on the sending thread (100-170 ms for Qwen2.5's vocabulary, measured),
 * a stall of the main thread on every engine start; one string and one typed array clone in about a millisecond.
 */
export interface PackedGrammarVocab {
  readonly text: string;
  /** [numTokens] the end of each token's text in `text` (UTF-16 units) */
  readonly ends: Uint32Array;
  readonly vocabType: GrammarVocab["vocabType"];
  readonly prependSpace: boolean;
}

/** Packs a vocabulary for the Worker (main thread, once per tokenizer: the engine-frontend keeps it). */
export function packGrammarVocab(vocab: GrammarVocab): PackedGrammarVocab {
  const ends = new Uint32Array(vocab.encodedVocab.length);
  let end = 0;
  vocab.encodedVocab.forEach((text, id) => { end += text.length; ends[id] = end; });
  return { text: vocab.encodedVocab.join(""), ends, vocabType: vocab.vocabType, prependSpace: vocab.prependSpace };
}

/** The vocabulary back from its packed form (the Worker's side). */
export function unpackGrammarVocab(packed: PackedGrammarVocab): GrammarVocab {
  const encodedVocab = new Array<string>(packed.ends.length);
  let start = 0;
  for (let id = 0; id < encodedVocab.length; id++) {
    const end = packed.ends[id]!;
    encodedVocab[id] = packed.text.slice(start, end);
    start = end;
  }
  return { encodedVocab, vocabType: packed.vocabType, prependSpace: packed.prependSpace };
}

/** One step's KV cache events (vLLM KVEventBatch before the publisher stamps it): `ts` in seconds, like time.time(). */
export interface StepKvEvents {
  readonly ts: number;
  readonly events: readonly KvCacheEvent[];
}

export type ToEngine =
  | { readonly type: "init"; readonly spec: EngineWorkerSpec }
  | { readonly type: "add"; readonly request: EngineRequest }
  | { readonly type: "abort"; readonly requestIds: readonly string[] }
  /** vLLM's reset_prefix_cache; answered by `prefixCacheReset` with the same id */
  | { readonly type: "resetPrefixCache"; readonly id: number; readonly resetRunningRequests: boolean }
  /** register (read and check) or forget a LoRA adapter by name; answered by loraResult with the same id */
  | { readonly type: "loadLora"; readonly id: number; readonly name: string; readonly path: string; readonly loraIntId: number }
  | { readonly type: "unloadLora"; readonly id: number; readonly name: string }
  | { readonly type: "shutdown" };

export type FromEngine =
  | { readonly type: "ready"; readonly config: ModelConfig; readonly numKvBlocks: number; readonly kvCache?: KvCacheFacts; readonly numCpuBlocks?: number | null; readonly startupLines?: readonly string[]; readonly maxModelLen: number; readonly backend: string; readonly pooler?: ResolvedPooler | null }
  | { readonly type: "step"; readonly deltas: readonly RequestDelta[]; readonly stats: StepStats; readonly kvEvents?: StepKvEvents }
  | { readonly type: "requestError"; readonly requestId: string; readonly code: string; readonly message: string }
  | { readonly type: "prefixCacheReset"; readonly id: number; readonly success: boolean }
  /** a loadLora / unloadLora's outcome: error null on success (its one-line reason otherwise) */
  | { readonly type: "loraResult"; readonly id: number; readonly error: string | null }
  | { readonly type: "fatal"; readonly message: string };
