/**
 * The contract between the engine and the model (vLLM's SchedulerOutput -> ModelRunner -> logits).
 * The engine deals in token ids and block ids; only the runner maps block ids to memory.
 *
 * KV layout: a slot is `blockTable[Math.floor(pos / blockSize)] * blockSize + pos % blockSize`, in each KV cache group's
 * own table (kv-cache-groups.ts; one group without the hybrid KV cache manager).
 */
import type { KvCacheGroups } from "./kv-cache-groups.ts";
import type { ModelConfig } from "./model-config.ts";
import type { LoraAdapter } from "../lora/lora-adapter.ts";

/**
 * A block-table entry a sliding group has freed (vLLM's null block): it lies wholly behind the window of every row of
 * the step, so no kernel reads or writes it.
 */
export const NULL_BLOCK = -1;

export type LogitsWanted = "none" | "last" | "all";

/** One sequence's share of a step: a prefill chunk, or one decode token. */
export interface SequenceChunk {
  /** [numTokens] tokens computed this step */
  readonly tokenIds: Int32Array;
  /** position of tokenIds[0]; positions below it are already in the KV cache */
  readonly startPos: number;
  /** KV block ids covering positions [0, startPos + numTokens): group 0's table (the only one with one group) */
  readonly blockTable: Int32Array;
  /**
   * [numGroups] every KV cache group's table (blockTables[0] is blockTable), required when the runner has several
   * groups; a sliding group's entries behind its window may be NULL_BLOCK
   */
  readonly blockTables?: readonly Int32Array[];
  /** "last" for sampling, "all" for prompt logprobs, "none" for a prefill chunk that is not the last */
  readonly logits: LogitsWanted;
  /** rows whose input is given as embeddings instead of their token's (an image's soft tokens), in row order */
  readonly inputEmbeddings?: readonly ChunkEmbeddings[];
  /** the LoRA slot (ModelRunner.loadLora) whose adapter this sequence's rows read; absent or -1: the base model */
  readonly loraSlot?: number;
  /** M-RoPE (qwen2vl): [4][numTokens] the rows' t, y, x, e positions (model/mrope.ts); absent: startPos + i in all four */
  readonly ropePositions?: Int32Array;
}

/**
 * Input embeddings for rows [row, row + numRows) of a chunk: they replace the token embedding (after the embedding
 * scale, which llama.cpp applies to token inputs only: gemma3.cpp `ubatch.token ? sqrtf(n_embd) : 1`).
 */
export interface ChunkEmbeddings {
  readonly row: number;
  readonly numRows: number;
  /** [numRows][dim] */
  readonly data: Float32Array;
  /**
   * every row of the span also sees the keys of the rows after it in the span (Gemma 3's image tokens, llama.cpp
   * mtmd_decode_use_non_causal); the span must then lie in one chunk
   */
  readonly attendAhead: boolean;
}

/** A ragged batch: prefill chunks and decode tokens of many sequences, computed in one forward pass. */
export interface ModelBatch {
  readonly sequences: readonly SequenceChunk[];
  /** pooling models: the runner returns every token's final hidden state (BatchLogits.hidden) instead of logits */
  readonly hiddenStates?: boolean;
}

export interface BatchLogits {
  /** [numRows, vocabSize], rows in sequence order (1 row for "last", numTokens rows for "all") */
  readonly logits: Float32Array;
  /** [numSequences] first row of each sequence, -1 for "none" */
  readonly rowStart: Int32Array;
  /** with ModelBatch.hiddenStates: [numTokens, dim], every token of every sequence in batch order (after the output norm) */
  readonly hidden?: Float32Array;
}

/**
 * Runs the model on a backend with a paged KV cache. Results for one sequence must not depend on what else is in the
 * batch (batch invariance): per-token math happens in a fixed order whatever the batch size.
 */
export interface ModelRunner {
  readonly config: ModelConfig;
  /**
   * bytes one KV block uses over `numLayers` layers (default all: one group; the hybrid manager's group size), K and V
   * (to size the pool from --kv-cache-memory)
   */
  kvBytesPerBlock(blockSize: number, numLayers?: number): number;
  /** (re)allocate the KV cache; block ids are then 0..numBlocks-1, each holding its group's layers (default: one group) */
  allocateKvCache(numBlocks: number, blockSize: number, groups?: KvCacheGroups): void;
  execute(batch: ModelBatch): Promise<BatchLogits>;
  /**
   * allocate the activation buffers for a step of up to `numTokens` tokens and `numLogitRows` logit rows now (at
   * start-up), throwing with the sizes if they do not fit; steps within them never allocate
   */
  reserveActivations?(numTokens: number, numLogitRows: number): void;
  /**
   * a pooled vector [dim] through the model's own head after pooling (gemma-embedding's sentence-transformers dense
   * projections, llama.cpp build_dense_out), or the vector itself when the model has none
   */
  projectPooled?(pooled: Float32Array): Float32Array;
  /** copy whole blocks out / in (disaggregated prefill -> decode); layout is the runner's own, same model only */
  /** LoRA (optional; a runner without it refuses adapters): `maxLoras` slots on the backend, throwing one line where the backend has no per-row kernel */
  enableLora?(maxLoras: number): void;
  /** uploads an adapter into a slot (replacing what was there; userScale: llama.cpp's per-adapter scale, default 1) / frees a slot */
  loadLora?(slot: number, adapter: LoraAdapter, userScale?: number): void;
  unloadLora?(slot: number): void;
  exportKvBlocks(blockIds: Int32Array): Uint8Array;
  importKvBlocks(blockIds: Int32Array, data: Uint8Array): void;
  dispose(): void;
}
