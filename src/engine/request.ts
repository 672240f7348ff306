/**
 * One request as the engine Worker sees it (vLLM Request): its tokens, how many are in the KV cache, its blocks, its
 * own random generator and the timestamps the stats are computed from. n > 1 is split into child requests on the main
 * thread (vLLM ParentRequest), so each state here is one sequence.
 */
import type { EngineRequest, MultimodalInput, PoolingRequestParams, PositionLogprobs } from "./protocol.ts";
import type { SequencePooler } from "./pooler.ts";
import type { SamplingParams } from "./sampling-params.ts";
import type { RequestTimes } from "./stats.ts";
import type { BlockHash } from "./block-pool.ts";
import { createRng, type Rng } from "./rng.ts";
import { BlockHasher, blockExtraKeys, noneHash, type BlockHashBytes, type HashKey } from "../kv-events/block-hash.ts";

/** "loading": its prefix blocks are being read back from the KV offload tier; not scheduled until they are in */
export type RequestStatus = "waiting" | "loading" | "running" | "finished";

/** A structured request waits in the queue until its grammar is compiled (vLLM WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR). */
export type GrammarStatus = "none" | "compiling" | "ready";

/** Mutable mirror of RequestTimes, owned by the engine. */
export interface MutableRequestTimes {
  arrivalMs: number;
  queuedMs: number | null;
  scheduledMs: number | null;
  firstTokenMs: number | null;
  lastTokenMs: number | null;
}

const NO_BLOCKS: readonly number[] = Object.freeze([]);

/** Requests built without the engine's hasher (tests): vLLM's default algorithm, an unseeded NONE_HASH. */
let defaultHasher: BlockHasher | null = null;
const fallbackHasher = (): BlockHasher => (defaultHasher ??= new BlockHasher("sha256", noneHash("sha256", null)));

/** The prefix-cache key of a digest: its hex (vLLM keys its map by the digest bytes). */
const hexOf = (digest: BlockHashBytes): BlockHash => Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength).toString("hex");

export class RequestState {
  readonly requestId: string;
  readonly sampling: SamplingParams;
  readonly numPromptTokens: number;
  /** [numPromptTokens + numOutputTokens] prompt, then generated tokens */
  readonly allTokenIds: number[];
  readonly eosTokenIds: readonly number[];
  /** most output tokens this request may produce (max_tokens capped by max-model-len) */
  readonly maxOutputTokens: number;
  readonly rng: Rng;
  /** pd pipelines: return the prompt's KV blocks when finished */
  readonly exportKv: boolean;
  /** a pooling request: no output tokens; its prompt's hidden states are pooled into `pooler` as they are computed */
  readonly pooling: PoolingRequestParams | null;
  pooler: SequencePooler | null = null;
  status: RequestStatus = "waiting";
  grammarStatus: GrammarStatus;
  /** false while a reasoning-gated grammar waits for the reasoning end token (grammar-spec.ts ReasoningGate) */
  reasoningEnded: boolean;
  /** tokens whose K/V are in the cache (positions [0, numComputedTokens)) */
  numComputedTokens = 0;
  /**
   * [numGroups][ceil(numComputedTokens / blockSize)] KV block ids per KV cache group (kv-cache-manager.ts), in position
   * order; a sliding group's blocks behind its window are NULL_BLOCK. Empty until the request gets blocks.
   */
  blockTables: number[][] = [];
  /** full blocks whose hash is registered in the prefix cache (or known to be a duplicate) */
  numCachedBlocks = 0;
  /** prompt tokens found in the prefix cache at first scheduling */
  numCachedTokens = 0;
  /** pd pipelines: prompt positions that arrived computed over a KV edge (counted when the first token comes out) */
  numImportedTokens = 0;
  numPreemptions = 0;
  /** its prefix-cache lookup was counted (once per request, at its first admission or offload load) */
  prefixLookupDone = false;
  /** speculative decoding: tokens drafted after the last step, verified in the next one (never in allTokenIds) */
  draftTokenIds: readonly number[] = [];
  readonly times: MutableRequestTimes;
  /** [numPromptTokens] filled while the prompt is computed; entry 0 stays null */
  promptLogprobs: (PositionLogprobs | null)[] | null;
  promptLogprobsSent = false;
  /** output token id -> count, for frequency / presence penalties */
  readonly outputCounts = new Map<number, number>();
  /** [numBlocks] vLLM's hash chain over full blocks of allTokenIds (block-hash.ts), extended lazily */
  private readonly blockDigests: BlockHashBytes[] = [];
  /** [numBlocks] the digests' hex: the prefix-cache keys */
  private readonly blockHashes: BlockHash[] = [];
  private readonly hasher: BlockHasher;
  /** the prompt's encoded media items, by offset (their embeddings go into the chunks that cover them) */
  readonly multimodal: readonly MultimodalInput[];

  constructor(request: EngineRequest, maxModelLen: number, queuedMs: number, fallbackSeed: number, hasher: BlockHasher = fallbackHasher()) {
    this.hasher = hasher;
    this.requestId = request.requestId;
    this.sampling = request.sampling;
    this.numPromptTokens = request.promptTokenIds.length;
    this.allTokenIds = [...request.promptTokenIds];
    this.multimodal = [...(request.multimodal ?? [])].sort((a, b) => a.offset - b.offset);
    this.eosTokenIds = request.eosTokenIds ?? [];
    const roomTokens = maxModelLen - this.numPromptTokens;
    this.pooling = request.pooling ?? null;
    this.maxOutputTokens = this.pooling !== null ? 0 : Math.min(request.sampling.maxTokens ?? roomTokens, roomTokens);
    this.rng = createRng(request.sampling.seed ?? fallbackSeed);
    this.exportKv = request.exportKv === true;
    this.times = { arrivalMs: request.arrivalMs, queuedMs, scheduledMs: null, firstTokenMs: null, lastTokenMs: null };
    this.promptLogprobs = request.sampling.promptLogprobs !== null ? new Array(this.numPromptTokens).fill(null) : null;
    this.grammarStatus = request.sampling.structuredOutputs ? "compiling" : "none";
    this.reasoningEnded = (request.sampling.structuredOutputs?.reasoningEndTokenIds ?? null) === null;
    this.loraName = request.loraName ?? null;
  }

  /** the LoRA adapter it runs with (EngineRequest.loraName), null for the base model */
  readonly loraName: string | null;
  /** that adapter's lora_int_id when the request arrived (vLLM LoRARequest.adapter_id), set by the engine; null: none */
  loraIntId: number | null = null;

  /** the only group's block ids: the features that run without the hybrid KV cache manager (offload, P/D, draft model) read these */
  get blockIds(): readonly number[] {
    return this.blockTables[0] ?? NO_BLOCKS;
  }

  get numTokens(): number {
    return this.allTokenIds.length;
  }

  get numOutputTokens(): number {
    return this.allTokenIds.length - this.numPromptTokens;
  }

  appendOutput(tokenId: number): void {
    this.allTokenIds.push(tokenId);
    this.outputCounts.set(tokenId, (this.outputCounts.get(tokenId) ?? 0) + 1);
  }

  /** Hash of full block `index` (its tokens and every block before it) as a cache key, or null if that block is not full yet. */
  blockHash(index: number, blockSize: number): BlockHash | null {
    return this.blockDigest(index, blockSize) === null ? null : this.blockHashes[index]!;
  }

  /**
   * vLLM's digest of full block `index` (kv_cache_utils.py hash_block_tokens, chained on the block before), or null if
   * that block is not full yet.
   */
  blockDigest(index: number, blockSize: number): BlockHashBytes | null {
    if ((index + 1) * blockSize > this.allTokenIds.length) return null;
    for (let i = this.blockDigests.length; i <= index; i++) {
      const parent = i === 0 ? null : this.blockDigests[i - 1]!;
      const digest = this.hasher.hashBlockTokens(parent, this.allTokenIds.slice(i * blockSize, (i + 1) * blockSize), this.blockExtraKeys(i, blockSize));
      this.blockDigests.push(digest);
      this.blockHashes.push(hexOf(digest));
    }
    return this.blockDigests[index]!;
  }

  /** What went into block `index`'s hash besides its tokens (vLLM generate_block_hash_extra_keys: the salt on block 0). */
  blockExtraKeys(index: number, blockSize: number): HashKey[] | null {
    // the adapter's name keys every block: one prompt under two adapters has different KV (vLLM's lora extra key)
    return blockExtraKeys({ blockStart: index * blockSize, blockSize, cacheSalt: this.sampling.cacheSalt, loraName: this.loraName, ...(this.multimodal.length > 0 ? { multimodal: this.multimodal } : {}) });
  }

  /**
   * `numNew` tokens from `startPos`, cut back so that no item that attends ahead is split across steps (vLLM's
   * disable_chunked_mm_input: schedule up to the item, it comes whole next step); not cut when even a whole step's
   * budget (`maxTokens`) could never hold it.
   */
  keepItemsWhole(startPos: number, numNew: number, maxTokens: number): number {
    const end = startPos + numNew;
    for (const item of this.multimodal) {
      if (!item.attendAhead || item.offset >= end || item.offset + item.length <= end) continue;
      const cut = Math.max(item.offset, startPos) - startPos;
      return cut === 0 && item.offset + item.length - startPos > maxTokens ? numNew : cut;
    }
    return numNew;
  }

  snapshotTimes(): RequestTimes {
    return { ...this.times };
  }
}
