/**
 * The engine core (vLLM EngineCore): owns the scheduler, the KV cache manager and the model runner, and turns one
 * `step()` into schedule -> one batched forward pass -> sample -> the step's deltas and stats. Runs inside the engine
 * Worker (worker.ts); tests drive it directly with a fake runner.
 */
import { totalmem } from "node:os";
import { NULL_BLOCK, type ModelBatch, type ModelRunner, type SequenceChunk } from "../model/model-batch.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { EngineArgs, EngineRequest, KvCacheFacts, KvHandoff, PositionLogprobs, RequestDelta } from "./protocol.ts";
import type { FinishReason, SpecDecodingStats, StepStats } from "./stats.ts";
import { KvCacheManager } from "./kv-cache-manager.ts";
import { RequestState } from "./request.ts";
import { Scheduler, type ScheduledChunk } from "./scheduler.ts";
import { positionLogprobs, Sampler } from "./sampler.ts";
import { err, ok, type Result } from "../util/result.ts";
import { nowMs as clockNowMs } from "../util/clock.ts";
import { errorMessage } from "../util/error-message.ts";
import type { KvOffloadConfig, KvPeerConfig } from "../config/kv-transfer-config.ts";
import { KvOffloadConnector } from "./kv-offload-connector.ts";
import { KvPeerConnector } from "./kv-peer-connector.ts";
import { KvBlockTransfer } from "./kv-block-transfer.ts";
import { CpuTier, DiskTier, type OffloadTier } from "./offload-tiers.ts";
import { GrammarThreadClient, type FillRequest, type FillResult } from "../grammar/grammar-thread.ts";
import type { GrammarVocab } from "../grammar/grammar-protocol.ts";
import type { SpeculativeConfig } from "../config/speculative-config.ts";
import { SPEC_DECODE_UNSUPPORTED_PARAMS, specDecodeRefusesParams } from "./spec-decode/refused-params.ts";
import { NgramDraftProposer, type DraftProposer } from "./spec-decode/proposer.ts";
import { verifyDrafts } from "./spec-decode/rejection-sampler.ts";
import { DraftModelProposer } from "./spec-decode/draft-model-proposer.ts";
import { resolvePooler, type ResolvedPooler } from "./resolve-pooler.ts";
import { embeddingOf, SequencePooler } from "./pooler.ts";
import { SuffixDecodingProposer } from "./spec-decode/suffix-proposer.ts";
import { chooseKvCacheGroups } from "./hybrid-kv-cache.ts";
import { describeKvCacheGroups, hasSlidingLayers, maxGroupBlocks, type KvCacheGroups } from "../model/kv-cache-groups.ts";

/** Engine arguments with every default resolved against the model. */
export interface EngineConfig {
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  readonly maxModelLen: number;
  readonly blockSize: number;
  readonly numBlocks: number;
  readonly enablePrefixCaching: boolean;
  /** the hybrid KV cache manager's groups (hybrid-kv-cache.ts); absent: one group of every layer */
  readonly kvCacheGroups?: KvCacheGroups;
  /** start-up lines about the KV cache: the groups, or why the hybrid manager is off; vLLM's size and concurrency */
  readonly kvCacheLines?: readonly string[];
  /** the pool's size in tokens and its max concurrency, as those lines say them */
  readonly kvCacheFacts?: KvCacheFacts;
  /** the KV offload tier under the prefix cache (--kv-offloading-size / --kv-transfer-config); none when absent */
  readonly kvOffload?: KvOffloadConfig | null;
  /** NixlConnector: the KV connector between instances; none when absent */
  readonly kvPeer?: KvPeerConfig | null;
  /** speculative decoding (--speculative-config); absent or null: off */
  readonly speculative?: SpeculativeConfig | null;
  /** speculative decoding: drafted tokens one step may verify, shared by the decoding requests (absent or null: no cap) */
  readonly maxDraftTokensPerStep?: number | null;
  /** --scheduling-policy; absent: fcfs */
  readonly schedulingPolicy?: "fcfs" | "priority";
  /** logit rows per step for prompt logprobs (PROMPT_LOGITS_SCRATCH_BYTES of vocabulary rows); absent: no bound */
  readonly maxPromptLogprobRows?: number;
  /** a pooling engine (embedding model): every request is pooled, none generates; absent or null: generation */
  readonly pooler?: ResolvedPooler | null;
  /** false: each prompt in one step (a bidirectional model; scheduler.ts SchedulerConfig.chunkedPrefill); absent: chunked */
  readonly chunkedPrefill?: boolean;
}

/**
 * The logits a step may compute for prompt logprobs, at most: every prompt position of a chunk needs a whole
 * vocabulary row (151,936 floats for Qwen), and 8,100 of them at once (5 GB) did not fit the 4 GiB wasm32 memory
 * and killed the engine. Prompts with prompt_logprobs are prefilled in chunks that fit this, as many steps as it takes.
 */
export const PROMPT_LOGITS_SCRATCH_BYTES = 64 * 2 ** 20;

/** Logit rows per step a prompt-logprobs prefill may use for this vocabulary. */
export function promptLogprobRowsFor(vocabSize: number): number {
  return Math.max(1, Math.floor(PROMPT_LOGITS_SCRATCH_BYTES / (vocabSize * 4)));
}

/**
 * The largest step the forward pass can be given (tokens, logit rows), reserved at start-up so that no request can
 * make the engine allocate: every chunk's tokens are within --max-num-batched-tokens, and its logit rows are one per
 * sequence, the drafts of speculative decoding (at most the per-step draft cap), and the prompt-logprob rows.
 */
export function maxStepShape(config: EngineConfig): { numTokens: number; numLogitRows: number } {
  // the per-step draft cap bounds the drafts of all requests together (suffix decoding's default k is 24)
  const draftRows = Math.min(config.maxNumSeqs * (config.speculative?.numSpeculativeTokens ?? 0), config.maxDraftTokensPerStep ?? Infinity);
  const promptRows = config.maxPromptLogprobRows ?? config.maxNumBatchedTokens;
  return { numTokens: config.maxNumBatchedTokens, numLogitRows: Math.min(config.maxNumBatchedTokens, config.maxNumSeqs + draftRows + promptRows) };
}

/** Default KV pool when --kv-cache-memory is not given: this share of free memory, at most this many bytes. */
const DEFAULT_KV_FREE_MEMORY_FRACTION = 0.25;
/** 1 GiB: the default pool (a model larger than one wasm32 memory gets more memories, wasm/memory-plan.ts) */
const DEFAULT_KV_MAX_BYTES = 2 ** 30;

/** What the KV pool is sized against besides the flags. */
export interface KvPoolLimits {
  readonly bytesPerBlock: number;
  /** max-num-seqs x the blocks of max-model-len: more is never used */
  readonly maxUsefulBlocks: number;
  readonly freeMemoryBytes: number;
  readonly totalMemoryBytes: number;
  /** the weights and activations in memory (what --gpu-memory-utilization's share holds besides the KV cache); 0 when unknown */
  readonly modelBytes?: number;
}

/**
 * KV blocks of the pool (vLLM's cache sizing): an explicit --kv-cache-memory is taken as given;
 * --gpu-memory-utilization is that share of total host memory for the whole engine, the KV pool getting what the
 * weights and activations leave (vLLM gpu_worker.py determine_available_memory); the default is a share of free
 * memory, at most 1 GiB; the last two capped by what max-num-seqs x max-model-len can ever use.
 */
export function kvPoolBlocks(args: Pick<EngineArgs, "kvCacheMemoryBytes" | "kvCacheMemoryFraction" | "blockSize">, limits: KvPoolLimits): Result<number> {
  const { bytesPerBlock, maxUsefulBlocks } = limits;
  if (args.kvCacheMemoryBytes !== null) {
    const numBlocks = Math.floor(args.kvCacheMemoryBytes / bytesPerBlock);
    if (numBlocks < 1) return err(`--kv-cache-memory ${args.kvCacheMemoryBytes} bytes holds no KV block (one block of ${args.blockSize} tokens needs ${bytesPerBlock} bytes)`);
    return ok(numBlocks);
  }
  if (args.kvCacheMemoryFraction !== undefined && args.kvCacheMemoryFraction !== null) {
    const modelBytes = limits.modelBytes ?? 0;
    const budgetBytes = limits.totalMemoryBytes * args.kvCacheMemoryFraction - modelBytes;
    const numBlocks = Math.min(maxUsefulBlocks, Math.floor(budgetBytes / bytesPerBlock));
    if (numBlocks < 1) {
      const after = modelBytes > 0 ? ` after ${modelBytes} bytes of weights and activations` : "";
      return err(`--gpu-memory-utilization ${args.kvCacheMemoryFraction} of ${limits.totalMemoryBytes} bytes holds no KV block${after} (one block of ${args.blockSize} tokens needs ${bytesPerBlock} bytes)`);
    }
    return ok(numBlocks);
  }
  const budgetBytes = Math.min(limits.freeMemoryBytes * DEFAULT_KV_FREE_MEMORY_FRACTION, DEFAULT_KV_MAX_BYTES);
  return ok(Math.max(1, Math.min(maxUsefulBlocks, Math.floor(budgetBytes / bytesPerBlock))));
}

/** What the CPU backend's start-up placement (model-placement.ts) planned the memories for. */
export interface PlacedModel {
  /** weights and activations (for --gpu-memory-utilization's share) */
  readonly modelBytes: number;
  /** the KV blocks its memories hold at most */
  readonly kvBlocks: number;
  /** wasm32 memories the model is spread over (absent: 1) */
  readonly numMemories?: number;
}

/**
 * Resolves max-model-len and the number of KV blocks (kvPoolBlocks), within what the placed model's memories hold.
 */
export function resolveEngineConfig(args: EngineArgs, runner: ModelRunner, freeMemoryBytes: number, totalMemoryBytes = totalmem(), extraKvBytesPerBlock = 0, placed: PlacedModel | null = null): Result<EngineConfig> {
  const contextLength = runner.config.contextLength;
  let maxModelLen = args.maxModelLen ?? contextLength;
  if (!Number.isInteger(maxModelLen) || maxModelLen < 1) return err(`--max-model-len must be a positive integer (got ${maxModelLen})`);
  if (maxModelLen > contextLength) return err(`--max-model-len ${maxModelLen} is greater than the model's context length ${contextLength}`);
  if (!Number.isInteger(args.blockSize) || args.blockSize < 1) return err(`--block-size must be a positive integer (got ${args.blockSize})`);
  if (!Number.isInteger(args.maxNumSeqs) || args.maxNumSeqs < 1) return err(`--max-num-seqs must be a positive integer (got ${args.maxNumSeqs})`);
  if (!Number.isInteger(args.maxNumBatchedTokens) || args.maxNumBatchedTokens < 1) return err(`--max-num-batched-tokens must be a positive integer (got ${args.maxNumBatchedTokens})`);
  const pooler = resolvePooler(args.runner ?? "auto", runner.config, args.poolerConfig ?? null, args.matryoshka ?? null);
  if (!pooler.ok) return pooler;
  if (pooler.value !== null && args.speculativeConfig) return err("--speculative-config needs a generative model: this engine pools (an embedding model generates no tokens to draft)");
  // vLLM (ModelConfig is_chunked_prefill_supported / is_prefix_caching_supported): a model with bidirectional attention
  // only pools, each prompt in one step and never from the prefix cache (a row's state depends on later positions)
  const bidirectional = runner.config.bidirectional === true;
  if (bidirectional && pooler.value === null) {
    return err(`${runner.config.architecture} attends bidirectionally, so it only embeds: it cannot generate, and its GGUF has no pooling_type; serve it with --runner pooling (and --pooler-config '{"pooling_type": "MEAN"}' for mean pooling)`);
  }
  const maxNumBatchedTokens = stepTokenBudget(args, runner.config, maxModelLen);
  if (bidirectional && maxModelLen > maxNumBatchedTokens) {
    // vLLM SchedulerConfig.verify without chunked prefill
    if (args.maxModelLen !== undefined && args.maxModelLen !== null) {
      return err(`max_num_batched_tokens (${maxNumBatchedTokens}) is smaller than max_model_len (${maxModelLen}). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len. (${runner.config.architecture} attends bidirectionally, so fennec computes each prompt in one step: no chunked prefill)`);
    }
    maxModelLen = maxNumBatchedTokens;
  }
  // vLLM: prefix caching only for LAST pooling with causal attention (MEAN and CLS need every position's hidden state)
  const enablePrefixCaching = args.enablePrefixCaching && !bidirectional && (pooler.value === null || pooler.value.poolingType === "LAST");
  // sliding-window layers get their own block tables (vLLM's hybrid KV cache manager): a block holds one group's layers
  const hybrid = chooseKvCacheGroups(runner.config, args, placed?.numMemories ?? 1);
  const groups = hybrid.groups;
  // a draft model's KV cache uses the same block ids: one block costs both models' bytes
  const bytesPerBlock = runner.kvBytesPerBlock(args.blockSize, groups.groupSize) + extraKvBytesPerBlock;
  const blocksPerRequest = maxRequestBlocks(groups, maxModelLen, args.blockSize, maxNumBatchedTokens);
  const maxUsefulBlocks = args.maxNumSeqs * blocksPerRequest;
  let numBlocks: number;
  if (args.numKvBlocksOverride !== undefined && args.numKvBlocksOverride !== null) {
    numBlocks = args.numKvBlocksOverride;
    if (!Number.isInteger(numBlocks) || numBlocks < 1) return err(`the KV block override must be a positive integer (got ${numBlocks})`);
  } else {
    const blocks = kvPoolBlocks(args, { bytesPerBlock, maxUsefulBlocks, freeMemoryBytes, totalMemoryBytes, modelBytes: placed?.modelBytes ?? 0 });
    if (!blocks.ok) return blocks;
    // free memory may have grown since the memories were planned: never more than they were planned for
    numBlocks = Math.min(blocks.value, placed?.kvBlocks ?? Infinity);
  }
  const facts: KvCacheFacts = {
    sizeTokens: Math.floor(numBlocks / groups.groups.length) * args.blockSize, maxConcurrency: numBlocks / blocksPerRequest,
    slidingWindow: hasSlidingLayers(runner.config) ? (runner.config.slidingWindow ?? null) : null,
  };
  return ok({
    maxNumSeqs: args.maxNumSeqs, maxNumBatchedTokens, maxModelLen, blockSize: args.blockSize,
    numBlocks, enablePrefixCaching, kvCacheGroups: groups,
    kvCacheLines: [...(hybrid.offLine !== null ? [hybrid.offLine] : groups.groups.length > 1 ? [describeKvCacheGroups(groups)] : []), ...kvCacheSizeLines(facts, maxModelLen)],
    kvCacheFacts: facts, pooler: pooler.value, kvOffload: args.kvOffload ?? null, kvPeer: args.kvPeer ?? null, speculative: args.speculativeConfig ?? null,
    maxPromptLogprobRows: promptLogprobRowsFor(runner.config.vocabSize), schedulingPolicy: args.schedulingPolicy ?? "fcfs",
    maxDraftTokensPerStep: args.speculativeConfig ? defaultDraftCap(args) : null,
    ...(bidirectional ? { chunkedPrefill: false } : {}),
  });
}

/** Blocks one request of `numTokens` positions holds at most, over every group (vLLM max_memory_usage_bytes per group). */
/**
 * The token budget of one step. A model that attends bidirectionally computes each prompt in one step (no chunked
 * prefill), so, as vLLM's SchedulerConfig does without chunked prefill, an unset --max-num-batched-tokens becomes
 * max(its default, max_model_len): the model's whole context is served without flags.
 */
export function stepTokenBudget(args: EngineArgs, config: ModelConfig, maxModelLen: number): number {
  if (config.bidirectional !== true || args.maxNumBatchedTokensGiven !== false) return args.maxNumBatchedTokens;
  return Math.max(args.maxNumBatchedTokens, maxModelLen);
}

export function maxRequestBlocks(groups: KvCacheGroups, numTokens: number, blockSize: number, maxNumBatchedTokens: number): number {
  let total = 0;
  for (const g of groups.groups) total += maxGroupBlocks(g, numTokens, blockSize, maxNumBatchedTokens);
  return total;
}

/**
 * vLLM's start-up lines (kv_cache_utils.py get_kv_cache_configs / get_max_concurrency_for_kv_cache_config): the tokens
 * the pool holds (blocks / groups x block size) and how many max-model-len requests fit at once (blocks / the blocks one
 * such request holds over all groups: a sliding group only its window's).
 */
function kvCacheSizeLines(facts: KvCacheFacts, maxModelLen: number): string[] {
  return [
    `KV cache size: ${facts.sizeTokens.toLocaleString("en-US")} tokens`,
    `Maximum concurrency for ${maxModelLen.toLocaleString("en-US")} tokens per request: ${facts.maxConcurrency.toFixed(2)}x`,
  ];
}

/**
 * The default draft cap: k + 1 tokens (decode + drafted) per step over all decoding requests: a lone request verifies
 * all k drafts, two share the rest, a big batch verifies none (bench/spec-decode.ts, smollm2-135m q8_0: even one draft
 * per request made 8 concurrent streams 0.71x). On a CPU a step costs about the same as one token only while it reads weights rather than
 * computes (bench/spec-decode.ts: 5 tokens of one request ~ 1 token; 8 x 5 tokens ~ 4.6 x 8 x 1), so drafts pay at
 * low concurrency and cost at high concurrency. `numDraftTokensPerStep` (tests, benchmarks) overrides it.
 */
function defaultDraftCap(args: EngineArgs): number | null {
  if (args.numDraftTokensPerStep !== undefined) return args.numDraftTokensPerStep;
  return args.speculativeConfig!.numSpeculativeTokens + 1;
}

export interface RequestErrorInfo {
  readonly code: string;
  readonly message: string;
}

/** Optional parts of an engine: structured outputs need the model's vocabulary (sent by the main thread). */
export interface EngineOptions {
  readonly grammarVocab?: GrammarVocab | null;
  /** compiled grammars kept for reuse */
  readonly grammarCacheSize?: number;
  /** the grammar thread's entry (tests); default: grammar/grammar-worker.ts */
  readonly grammarWorkerUrl?: string;
  /** something finished outside a step (a grammar compiled or failed): the loop should look again */
  readonly onWake?: () => void;
  /** speculative decoding's drafter when it is not the ngram one; default from config.speculative */
  readonly proposer?: DraftProposer | null;
  /** method draft_model: the loaded draft (its KV cache gets the engine's block ids) */
  readonly draftRunner?: ModelRunner | null;
}

/** A request that failed after it was accepted (its grammar would not compile, or its grammar reached a dead end). */
export interface LateRequestError extends RequestErrorInfo {
  readonly requestId: string;
}

const DEFAULT_GRAMMAR_CACHE_SIZE = 128;

export interface EngineStepResult {
  readonly deltas: readonly RequestDelta[];
  readonly stats: StepStats;
}

export class EngineCore {
  readonly config: EngineConfig;
  readonly kv: KvCacheManager;
  readonly scheduler: Scheduler;
  /** the offload tier (null without one) */
  readonly offload: KvOffloadConnector | null;
  /** the connector between instances (null without one) */
  readonly peer: KvPeerConnector | null;
  private readonly requests = new Map<string, RequestState>();
  private batchId = 0;
  private readonly sampler = new Sampler();
  /** seeds requests without a seed, so a whole engine run is reproducible from one number */
  private nextFallbackSeed: number;
  /** the grammar thread, started by the first structured request */
  private grammar: GrammarThreadClient | null = null;
  private readonly lateErrors: LateRequestError[] = [];
  /** compiles in flight; settle wakes waitForGrammar() */
  private numCompiling = 0;
  private grammarSettled: (() => void) | null = null;
  /** speculative decoding: who drafts (null: off) */
  private readonly proposer: DraftProposer | null;

  constructor(
    private readonly runner: ModelRunner,
    config: EngineConfig,
    private readonly engineIndex = 0,
    private readonly nowMs: () => number = clockNowMs,
    seed = Date.now(),
    private readonly options: EngineOptions = {},
  ) {
    this.config = config;
    this.kv = new KvCacheManager(config);
    this.nextFallbackSeed = seed;
    const spec = config.speculative ?? null;
    this.proposer = options.proposer
      ?? (spec?.method === "ngram" ? new NgramDraftProposer(spec) : null)
      ?? (spec?.method === "suffix" ? new SuffixDecodingProposer(spec) : null)
      ?? (spec?.method === "draft_model" && options.draftRunner
        ? new DraftModelProposer(options.draftRunner, spec, config.numBlocks, config.blockSize,
          (req, numPositions) => numPositions <= req.blockIds.length * config.blockSize || this.kv.allocateSlots(req, numPositions - req.numComputedTokens) !== null)
        : null);
    if (spec !== null && this.proposer === null) throw new Error(`speculative method ${spec.method} needs its proposer passed to the engine`);
    if (config.kvCacheGroups !== undefined) runner.allocateKvCache(config.numBlocks, config.blockSize, config.kvCacheGroups);
    else runner.allocateKvCache(config.numBlocks, config.blockSize);
    // every buffer a step can need, now: a request that needs more than start-up reserved cannot exist
    const shape = maxStepShape(config);
    runner.reserveActivations?.(shape.numTokens, shape.numLogitRows);
    this.offload = config.kvOffload ? createConnector(config, config.kvOffload, this.kv, runner, nowMs, engineIndex) : null;
    this.peer = config.kvPeer
      ? new KvPeerConnector({
        config: config.kvPeer, kv: this.kv, transfer: new KvBlockTransfer(runner, config.blockSize), descriptorsPerBlock: runner.config.numLayers * 2,
        engineIndex, nowMs, onWake: () => this.options.onWake?.(),
      })
      : null;
    this.scheduler = new Scheduler(config, this.kv, nowMs, this.offload ?? this.peer);
  }

  /** Releases the offload tier (unlinks its disk file) and the grammar thread; the engine takes no requests afterwards. */
  dispose(): void {
    this.offload?.close();
    this.peer?.close();
    this.grammar?.dispose();
    this.grammar = null;
    this.proposer?.dispose?.();
  }

  get numRunning(): number { return this.scheduler.running.length; }
  /** waiting requests, with those waiting for an offload load (vLLM keeps them in its waiting queue, "deferred") */
  get numWaiting(): number { return this.scheduler.waiting.length + (this.offload?.numLoading ?? 0) + (this.peer?.numLoading ?? 0); }
  hasWork(): boolean { return this.scheduler.numUnfinished > 0 || (this.peer?.hasPendingWork() ?? false); }
  /** requests whose grammar is compiling (they wait in the queue) */
  get numCompilingGrammars(): number { return this.numCompiling; }

  /** Queues a request, or says why it can never run (vLLM's messages). */
  addRequest(request: EngineRequest): RequestErrorInfo | null {
    const refused = this.admit(request);
    // a decode request refused here: the prefill instance need not hold its blocks for the lease (vLLM notifies the
    // connector of requests the serving layer rejects)
    if (refused !== null && this.peer !== null && request.sampling.kvTransferParams) this.peer.rejected(request.sampling.kvTransferParams);
    return refused;
  }

  private admit(request: EngineRequest): RequestErrorInfo | null {
    const { maxModelLen, numBlocks } = this.config;
    const numPrompt = request.promptTokenIds.length;
    if (this.requests.has(request.requestId)) return { code: "duplicate_request_id", message: `request id ${request.requestId} is already running` };
    if (numPrompt === 0) return { code: "empty_prompt", message: "The decoder prompt cannot be empty" };
    if (this.proposer !== null && specDecodeRefusesParams(request.sampling)) return { code: "invalid_sampling_params", message: SPEC_DECODE_UNSUPPORTED_PARAMS };
    const vocabSize = this.runner.config.vocabSize;
    const badId = request.promptTokenIds.find((id) => !Number.isInteger(id) || id < 0 || id >= vocabSize);
    if (badId !== undefined) return { code: "invalid_token_id", message: `prompt token id ${badId} is out of vocabulary range [0, ${vocabSize})` };
    if (numPrompt >= maxModelLen && !request.pooling) {
      return { code: "context_length", message: `The decoder prompt (length ${numPrompt}) is longer than the maximum model length of ${maxModelLen}. Make sure that \`max_model_len\` is no smaller than the number of text tokens.` };
    }
    const pooler = this.config.pooler ?? null;
    // vLLM api_server.py: a route whose task the model lacks answers "The model does not support ... API"
    if (pooler !== null && !request.pooling) return { code: "pooling_model", message: "The model does not support Completions API: it is an embedding model (use /v1/embeddings)" };
    if (pooler === null && request.pooling) return { code: "generative_model", message: "The model does not support Embeddings API" };
    if (request.pooling && numPrompt > maxModelLen) {
      return { code: "context_length", message: `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${numPrompt} tokens in the input for embedding generation. Please reduce the length of the input.` };
    }
    const state = new RequestState(request, maxModelLen, this.nowMs(), this.nextFallbackSeed++);
    if (pooler !== null) state.pooler = new SequencePooler(pooler.poolingType, pooler.hiddenSize);
    const blocksNeeded = this.kv.maxBlocksFor(numPrompt + state.maxOutputTokens);
    if (blocksNeeded > numBlocks) {
      return { code: "kv_cache_too_small", message: `request needs ${blocksNeeded} KV blocks (${numPrompt} prompt + ${state.maxOutputTokens} output tokens) but the cache has ${numBlocks}; raise --kv-cache-memory or lower max_tokens` };
    }
    // the field text of vLLM's protocol.py: a priority is an error unless the server schedules by priority
    if (request.sampling.priority !== 0 && this.config.schedulingPolicy !== "priority") {
      return { code: "invalid_priority", message: "Priority scheduling is not enabled: start the server with --scheduling-policy priority to use the priority field (or send priority 0)." };
    }
    const spec = request.sampling.structuredOutputs;
    if (spec && !this.options.grammarVocab) {
      return { code: "structured_outputs_unavailable", message: "Structured outputs need the model's tokenizer vocabulary, which this engine was not given." };
    }
    if (request.importKv) {
      const imported = this.importKv(state, request.importKv);
      if (imported) return imported;
    }
    const transferParams = request.sampling.kvTransferParams ?? null;
    if (transferParams !== null) {
      if (this.peer === null) {
        return { code: "kv_transfer_params_unsupported", message: 'kv_transfer_params needs a KV connector between instances: start the server with --kv-transfer-config \'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\' (or kv_producer / kv_consumer)' };
      }
      const refused = this.peer.prepare(state, transferParams);
      if (refused) return refused;
    }
    this.requests.set(request.requestId, state);
    this.scheduler.add(state);
    if (spec) this.startGrammar(state, spec);
    this.peer?.wakeWaiter();
    return null;
  }

  /** Compiles off the step loop; the request waits in the queue meanwhile (its queue time includes the compile). */
  private startGrammar(state: RequestState, spec: NonNullable<EngineRequest["sampling"]["structuredOutputs"]>): void {
    this.grammar ??= new GrammarThreadClient(
      { vocab: this.options.grammarVocab!, vocabSize: this.runner.config.vocabSize, cacheSize: this.options.grammarCacheSize ?? DEFAULT_GRAMMAR_CACHE_SIZE },
      (requestId, message) => this.failLate(requestId, "grammar_error", message),
      ...(this.options.grammarWorkerUrl ? [this.options.grammarWorkerUrl] : []),
    );
    const stopIds = [...new Set([...state.eosTokenIds, ...state.sampling.stopTokenIds])];
    this.numCompiling++;
    void this.grammar.compile(state.requestId, spec, stopIds).then((result) => {
      this.numCompiling--;
      if (this.requests.get(state.requestId) === state) {
        if (result.ok) state.grammarStatus = "ready";
        else this.failLate(state.requestId, "invalid_grammar", result.message);
      }
      const settled = this.grammarSettled;
      this.grammarSettled = null;
      settled?.();
      this.options.onWake?.();
    });
  }

  /** Resolves when a grammar compile settles (immediately when none is in flight). */
  waitForGrammar(): Promise<void> {
    if (this.numCompiling === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.grammarSettled;
      this.grammarSettled = () => { previous?.(); resolve(); };
    });
  }

  /** Errors of requests that failed after they were accepted, since the last call. */
  takeLateErrors(): LateRequestError[] {
    return this.lateErrors.splice(0);
  }

  private failLate(requestId: string, code: string, message: string): void {
    const state = this.requests.get(requestId);
    if (!state) return;
    this.lateErrors.push({ requestId, code, message });
    this.requests.delete(requestId);
    this.scheduler.finish(state);
    this.proposer?.forget?.(state);
    this.grammar?.free([requestId]);
  }


  /**
   * pd pipelines: the first `kv.numTokens` positions arrive computed from a prefill stage. They get blocks at once and
   * the request waits holding them; a later preemption simply recomputes them.
   */
  private importKv(state: RequestState, kv: KvHandoff): RequestErrorInfo | null {
    const { blockSize } = this.config;
    if (kv.blockSize !== blockSize) return { code: "kv_handoff", message: `KV handoff has block size ${kv.blockSize}, this engine uses ${blockSize}` };
    if (!Number.isInteger(kv.numTokens) || kv.numTokens < 1 || kv.numTokens >= state.numPromptTokens) {
      return { code: "kv_handoff", message: `KV handoff covers ${kv.numTokens} positions; it must cover 1 to ${state.numPromptTokens - 1} of the ${state.numPromptTokens} prompt tokens` };
    }
    const newIds = this.kv.allocateSlots(state, kv.numTokens);
    if (newIds === null) return { code: "kv_cache_full", message: `no free KV blocks for a handoff of ${kv.numTokens} positions` };
    try {
      // every group's blocks, group after group (exportKv's order); a sliding group's are freed at its next allocation
      this.runner.importKvBlocks(Int32Array.from(newIds.flat()), kv.data);
    } catch (e) {
      this.kv.free(state);
      return { code: "kv_handoff", message: `KV handoff rejected by the model runner: ${errorMessage(e)}` };
    }
    state.numComputedTokens = kv.numTokens;
    state.numImportedTokens = kv.numTokens;
    this.kv.cacheFullBlocks(state);
    return null;
  }

  /** the prompt's computed positions as a handoff, for the next stage */
  private exportKv(req: RequestState): KvHandoff {
    const numTokens = Math.min(req.numComputedTokens, req.numPromptTokens);
    // group after group; a sliding group's freed entries go out as block 0 (behind every window: never read)
    const blockIds = Int32Array.from(this.kv.tables(req).flatMap((t) => t.slice(0, this.kv.blocksFor(numTokens))), (id) => (id === NULL_BLOCK ? 0 : id));
    return { numTokens, blockSize: this.config.blockSize, data: this.runner.exportKvBlocks(blockIds) };
  }

  /** Drops requests at once (client gone, stop string): their blocks are free when this returns. */
  abort(requestIds: readonly string[]): void {
    for (const id of requestIds) {
      const state = this.requests.get(id);
      if (!state) continue;
      this.requests.delete(id);
      this.scheduler.finish(state, true);
      this.proposer?.forget?.(state);
    }
    this.grammar?.free(requestIds);
  }

  /**
   * Scheduler gauges without a step (vLLM sends SchedulerStats with every output batch, even an empty one): after an
   * abort leaves the engine idle, this is how running / waiting / KV usage reach 0 on the metrics side.
   * batchSize 0 marks it: no batch ran, no tokens were computed.
   */
  idleStats(): StepStats {
    const t = this.nowMs();
    const counts = this.kv.takeCounts();
    return {
      engineIndex: this.engineIndex, batchId: this.batchId, stepStartMs: t, stepEndMs: t, batchSize: 0, numPromptTokens: 0,
      numGenerationTokens: 0, numPreempted: 0, numRunning: this.numRunning, numWaiting: this.numWaiting, numWaitingDeferred: 0,
      kvCacheUsage: this.kv.usage(), prefixCacheQueries: counts.queries, prefixCacheHits: counts.hits,
      ...(this.offload ? { kvOffload: this.offload.takeStats() } : {}),
      ...(this.peer ? { kvPeer: this.peer.takeStats() } : {}),
    };
  }

  /**
   * Schedules a step: the offload tier settles its transfers first; when nothing can run but offload loads are in
   * flight, waits for them (an abort can still land meanwhile).
   */
  private async scheduleStep(): Promise<ReturnType<Scheduler["schedule"]>> {
    const connector = this.offload ?? this.peer;
    for (;;) {
      connector?.drain([...this.scheduler.running, ...this.scheduler.waiting]);
      // a read from the prefill instance failed under kv_load_failure_policy "fail": the request ends (HTTP 500)
      if (this.peer) for (const f of this.peer.takeFailed()) this.failLate(f.request.requestId, "kv_load_failed", f.message);
      const out = this.scheduler.schedule();
      if (out.chunks.length > 0 || connector === null || !connector.hasPendingLoads()) return out;
      await connector.waitForProgress();
    }
  }

  /** One engine step; null when nothing could be scheduled. */
  async step(): Promise<EngineStepResult | null> {
    const stepStartMs = this.nowMs();
    const { chunks, numPreempted, numDeferred } = await this.scheduleStep();
    // an idle engine still reports what its connector counted (an expired lease, a read notification that failed)
    if (chunks.length === 0) return this.peer?.hasStatsToReport() ? { deltas: [], stats: this.idleStats() } : null;
    const batchId = ++this.batchId;
    const pooling = (this.config.pooler ?? null) !== null;
    const batch: ModelBatch = { sequences: chunks.map((c) => this.toSequenceChunk(c)), ...(pooling ? { hiddenStates: true } : {}) };
    // grammar requests that sample this step: their bitmasks (one per draft position and one after the drafts) are
    // filled on the grammar thread during the forward pass (a reasoning-gated grammar is neither filled nor advanced
    // before the reasoning ends: vLLM should_fill_bitmask)
    const grammarFrom = new Map<string, number>();
    const fillRequests: FillRequest[] = [];
    for (const c of chunks) {
      if (c.startPos + c.numNewTokens < c.request.numTokens) continue; // a prefill chunk that does not sample
      const from = grammarStart(c.request, c.draftTokenIds);
      if (from === null) continue;
      grammarFrom.set(c.request.requestId, from);
      fillRequests.push({ requestId: c.request.requestId, drafts: c.draftTokenIds.slice(from) });
    }
    const [result, fill] = await Promise.all([this.runner.execute(batch), fillRequests.length > 0 ? this.grammar!.fill(fillRequests) : null]);
    const maskRow = new Map<string, number>(fillRequests.map((f, r) => [f.requestId, r]));
    const stepEndMs = this.nowMs();
    const vocabSize = this.runner.config.vocabSize;
    const deltas: RequestDelta[] = [];
    let numPromptTokens = 0;
    let numGenerationTokens = 0;
    let numExternalKvTokens = 0;

    const spec = this.config.speculative ?? null;
    const specStats = spec !== null ? { numDrafts: 0, numDraftTokens: 0, numAcceptedTokens: 0, numAcceptedTokensPerPos: new Array<number>(spec.numSpeculativeTokens).fill(0) } : null;
    /** requests that sampled this step and go on: the proposer drafts their next tokens */
    const toDraft: RequestState[] = [];

    // pooling engines: the first hidden-state row of each chunk ([numTokens, dim] in batch order)
    const tokenRowStart: number[] = [];
    chunks.reduce((row, c) => (tokenRowStart.push(row), row + c.numNewTokens), 0);

    chunks.forEach((chunk, i) => {
      const req = chunk.request;
      if (req.status === "finished") return; // aborted while the step ran
      const numScheduledDrafts = chunk.draftTokenIds.length;
      // positions of real tokens end here; drafted positions count as computed only once accepted
      const end = chunk.startPos + chunk.numNewTokens - numScheduledDrafts;
      req.numComputedTokens = end;
      if (req.numPreemptions === 0) numPromptTokens += Math.max(0, Math.min(end, req.numPromptTokens) - chunk.startPos);
      if (req.pooler !== null) {
        this.poolChunk(req, chunk, result.hidden, tokenRowStart[i]!, end, stepEndMs, deltas);
        return;
      }
      const rowStart = result.rowStart[i]!;
      const wanted = batch.sequences[i]!.logits;
      const rowOf = (r: number): Float32Array => result.logits.subarray(r * vocabSize, (r + 1) * vocabSize);
      if (wanted === "all" && req.promptLogprobs) {
        for (let j = 0; j < chunk.numNewTokens; j++) {
          const next = chunk.startPos + j + 1;
          if (next < req.numPromptTokens) req.promptLogprobs[next] = positionLogprobs(rowOf(rowStart + j), req.allTokenIds[next]!, req.sampling.promptLogprobs!);
        }
      }
      if (end < req.numTokens) { // a prefill chunk that is not the last
        this.kv.cacheFullBlocks(req);
        return;
      }
      const r = maskRow.get(req.requestId);
      const from = grammarFrom.get(req.requestId) ?? null;
      const masks = r === undefined || !fill || from === null ? null : this.grammarMasks(req, fill, r, from, chunk.draftTokenIds.length);
      if (masks === false) { // failed: reported with the step's late errors
        this.kv.cacheFullBlocks(req);
        return;
      }
      // drafts the grammar refuses (or that lead it to a dead end) are cut before verification (vLLM: -1, always rejected)
      const numDrafts = masks === null ? numScheduledDrafts : masks.numDrafts;
      const ctx = {
        params: req.sampling, allTokenIds: req.allTokenIds, numPromptTokens: req.numPromptTokens, outputCounts: req.outputCounts,
        stopTokenIds: req.sampling.ignoreEos ? req.sampling.stopTokenIds : [...req.eosTokenIds, ...req.sampling.stopTokenIds], rng: req.rng,
      };
      const newTokenIds: number[] = [];
      const newLogprobs: PositionLogprobs[] = [];
      let finish: { reason: FinishReason; stopReason: number | null } | null = null;
      // each token joins the context before the next position is sampled; a stop drops the rest (vLLM check_stop)
      const push = (tokenId: number, logprobs: PositionLogprobs | undefined): boolean => {
        if (from !== null && newTokenIds.length >= from) this.grammar!.accept(req.requestId, tokenId);
        // vLLM should_advance: the grammar starts on the token after the reasoning end token (which it never sees)
        else if (!req.reasoningEnded && req.sampling.structuredOutputs!.reasoningEndTokenIds!.includes(tokenId)) req.reasoningEnded = true;
        req.appendOutput(tokenId);
        newTokenIds.push(tokenId);
        if (logprobs) newLogprobs.push(logprobs);
        finish = this.checkStop(req, tokenId);
        return finish !== null;
      };
      const lastRow = wanted === "all" ? rowStart + chunk.numNewTokens - 1 - numScheduledDrafts : rowStart;
      if (numDrafts === 0) {
        const tokenBitmask = masks?.masks[0];
        const { tokenId, logprobs } = this.sampler.sample(rowOf(lastRow), tokenBitmask ? { ...ctx, tokenBitmask } : ctx);
        push(tokenId, logprobs);
      } else {
        const rows = Array.from({ length: numDrafts + 1 }, (_, j) => rowOf(lastRow + j)); // [numDrafts + 1][vocabSize]
        const drafts = chunk.draftTokenIds.slice(0, numDrafts);
        const { numAccepted, numEmitted } = verifyDrafts(rows, drafts, ctx, this.sampler, push, masks ? { bitmasks: masks.masks } : {});
        req.numComputedTokens += numEmitted;
        if (specStats !== null) {
          specStats.numDrafts++;
          specStats.numDraftTokens += numDrafts;
          specStats.numAcceptedTokens += numAccepted;
          for (let j = 0; j < numAccepted; j++) specStats.numAcceptedTokensPerPos[j]!++;
        }
      }
      this.kv.cacheFullBlocks(req);
      numGenerationTokens += newTokenIds.length;
      if (req.times.firstTokenMs === null && newTokenIds.length > 0) numExternalKvTokens += req.numImportedTokens;
      req.times.firstTokenMs ??= stepEndMs;
      req.times.lastTokenMs = stepEndMs;
      const finished = finish as { reason: FinishReason; stopReason: number | null } | null;
      let promptLogprobs: readonly (PositionLogprobs | null)[] | undefined;
      if (req.promptLogprobs && !req.promptLogprobsSent) {
        promptLogprobs = req.promptLogprobs;
        req.promptLogprobsSent = true;
      }
      deltas.push({
        requestId: req.requestId, newTokenIds, ...(newLogprobs.length > 0 ? { logprobs: newLogprobs } : {}),
        ...(promptLogprobs ? { promptLogprobs } : {}),
        ...(finished ? { finishReason: finished.reason, stopReason: finished.stopReason } : {}),
        numCachedTokens: req.numCachedTokens, times: req.snapshotTimes(),
        ...(finished && req.exportKv ? { kv: this.exportKv(req) } : {}),
        ...(finished && this.peer ? { kvTransferParams: this.peer.requestFinished(req, finished.reason) } : {}),
      });
      if (finished) {
        this.requests.delete(req.requestId);
        this.scheduler.finish(req);
        if (req.grammarStatus !== "none") this.grammar?.free([req.requestId]);
        this.proposer?.forget?.(req);
      } else if (this.proposer !== null) {
        toDraft.push(req);
      }
    });
    if (this.proposer !== null && toDraft.length > 0) {
      await this.proposer.propose(toDraft, this.config.maxModelLen);
      await this.validateDrafts(toDraft);
    }

    this.offload?.afterStep(chunks.map((c) => c.request));
    const counts = this.kv.takeCounts();
    const stats: StepStats = {
      engineIndex: this.engineIndex, batchId, stepStartMs, stepEndMs, batchSize: chunks.length, numPromptTokens,
      numGenerationTokens, numPreempted, numRunning: this.numRunning, numWaiting: this.numWaiting,
      numWaitingDeferred: Math.min(numDeferred + (this.offload?.numLoading ?? 0) + (this.peer?.numLoading ?? 0), this.numWaiting),
      kvCacheUsage: this.kv.usage(), prefixCacheQueries: counts.queries, prefixCacheHits: counts.hits,
      ...(this.offload ? { kvOffload: this.offload.takeStats() } : {}),
      ...(this.peer ? { kvPeer: this.peer.takeStats() } : {}),
      ...(specStats !== null ? { specDecoding: specStats as SpecDecodingStats } : {}),
      ...(numExternalKvTokens > 0 ? { numExternalKvTokens } : {}),
    };
    return { deltas, stats };
  }

  /**
   * A pooling request's chunk (vLLM: a pooling request is a prefill whose output is the pooled hidden state): its rows
   * go into the request's pooler; once the whole prompt is in, the embedding is its delta, the request finishes and its
   * KV blocks are freed (nothing is decoded after it).
   */
  private poolChunk(req: RequestState, chunk: ScheduledChunk, hidden: Float32Array | undefined, tokenRow: number, end: number, stepEndMs: number, deltas: RequestDelta[]): void {
    const pooler = req.pooler!;
    if (hidden === undefined) throw new Error("engine: the model runner returned no hidden states for a pooling batch");
    const dim = pooler.dim;
    pooler.add(hidden.subarray(tokenRow * dim, (tokenRow + chunk.numNewTokens) * dim), chunk.startPos);
    this.kv.cacheFullBlocks(req);
    if (end < req.numTokens) return;
    const params = req.pooling!;
    const pooled = pooler.pooled();
    // the model's own head after pooling (gemma-embedding's dense projections), before matryoshka and normalisation
    const embedding = embeddingOf(this.runner.projectPooled?.(pooled) ?? pooled, params.dimensions, params.normalize);
    req.times.firstTokenMs ??= stepEndMs;
    req.times.lastTokenMs = stepEndMs;
    deltas.push({
      requestId: req.requestId, newTokenIds: [], finishReason: "stop", stopReason: null, numCachedTokens: req.numCachedTokens,
      times: req.snapshotTimes(), embedding,
    });
    this.requests.delete(req.requestId);
    this.scheduler.finish(req);
  }

  /**
   * Structured requests keep only the drafts their grammar accepts (vLLM Scheduler.update_draft_token_ids ->
   * validate_tokens), so the next step neither computes nor counts drafts that could never be emitted. A reasoning-gated
   * grammar validates only the drafts after a drafted reasoning end token.
   */
  private async validateDrafts(requests: readonly RequestState[]): Promise<void> {
    const checks: { req: RequestState; from: number }[] = [];
    for (const req of requests) {
      if (req.grammarStatus !== "ready" || req.draftTokenIds.length === 0 || this.requests.get(req.requestId) !== req) continue;
      const from = grammarStart(req, req.draftTokenIds);
      if (from !== null && from < req.draftTokenIds.length) checks.push({ req, from });
    }
    if (checks.length === 0) return;
    const status = await this.grammar!.validateDrafts(checks.map(({ req, from }) => ({ requestId: req.requestId, drafts: req.draftTokenIds.slice(from) })));
    checks.forEach(({ req, from }, i) => {
      const s = status[i]!;
      if (s.kind === "rejected") this.failLate(req.requestId, "grammar_rejected", grammarRejectedMessage(s.tokenId, req.requestId));
      else req.draftTokenIds = req.draftTokenIds.slice(0, from + s.numValidDrafts);
    });
  }

  /**
   * The request's bitmask at each verified position ([numDrafts + 1]; undefined before the grammar starts) and how
   * many of its scheduled drafts stay (the grammar's valid prefix, cut where a later position would leave no token),
   * or false when it cannot go on (the request is failed): the grammar refused a token it had allowed (vLLM:
   * "Unexpected: grammar rejected tokens ... Terminating request."), or no token of the vocabulary can continue it.
   * @param from the first position the grammar constrains (after a drafted reasoning end token)
   */
  private grammarMasks(req: RequestState, fill: FillResult, row: number, from: number, numScheduledDrafts: number): { masks: (Int32Array | undefined)[]; numDrafts: number } | false {
    const status = fill.status[row]!;
    if (status.kind === "rejected") {
      this.failLate(req.requestId, "grammar_rejected", grammarRejectedMessage(status.tokenId, req.requestId));
      return false;
    }
    let numDrafts = Math.min(numScheduledDrafts, from + status.numValidDrafts);
    const masks: (Int32Array | undefined)[] = new Array(from).fill(undefined);
    for (let j = from; j <= numDrafts; j++) {
      const start = (fill.rowStart[row]! + j - from) * fill.words;
      const mask = fill.masks.subarray(start, start + fill.words);
      let any = false;
      for (let w = 0; w < mask.length && !any; w++) any = mask[w] !== 0;
      if (!any && j === 0) {
        this.failLate(req.requestId, "grammar_dead_end", `structured output: no token of this model's vocabulary can continue the grammar after ${req.numOutputTokens} generated tokens`);
        return false;
      }
      // a draft that leads the grammar where no token can follow is never verified: the position before it is the last
      if (!any) { numDrafts = j - 1; break; }
      masks.push(mask);
    }
    return { masks: masks.slice(0, numDrafts + 1), numDrafts };
  }

  private toSequenceChunk(c: ScheduledChunk): SequenceChunk {
    const req = c.request;
    const end = c.startPos + c.numNewTokens;
    const needPromptLogprobs = req.promptLogprobs !== null && !req.promptLogprobsSent && c.startPos < req.numPromptTokens - 1;
    const numDrafts = c.draftTokenIds.length;
    const tokenIds = new Int32Array(c.numNewTokens); // [numNewTokens] real tokens, then the drafts to verify
    tokenIds.set(req.allTokenIds.slice(c.startPos, end - numDrafts));
    tokenIds.set(c.draftTokenIds, c.numNewTokens - numDrafts);
    return {
      tokenIds,
      startPos: c.startPos,
      blockTable: Int32Array.from(req.blockIds), // [ceil(end / blockSize)]
      ...(req.blockTables.length > 1 ? { blockTables: req.blockTables.map((t) => Int32Array.from(t)) } : {}),
      // drafts: a row at the last real token and at every draft (the target's prediction after each)
      // pooling requests read hidden states (ModelBatch.hiddenStates), never logits
      logits: req.pooling !== null ? "none" : needPromptLogprobs || numDrafts > 0 ? "all" : end === req.numTokens ? "last" : "none",
    };
  }

  /** Stop conditions checked in the engine (stop strings are the output processor's, on the main thread). */
  private checkStop(req: RequestState, tokenId: number): { reason: FinishReason; stopReason: number | null } | null {
    const p = req.sampling;
    if (req.numOutputTokens >= p.minTokens) {
      if (!p.ignoreEos && req.eosTokenIds.includes(tokenId)) return { reason: "stop", stopReason: null };
      if (p.stopTokenIds.includes(tokenId)) return { reason: "stop", stopReason: tokenId };
    }
    if (req.numOutputTokens >= req.maxOutputTokens) return { reason: "length", stopReason: null };
    if (req.numTokens >= this.config.maxModelLen) return { reason: "length", stopReason: null };
    return null;
  }
}

/**
 * The first position (0 = the next token, j = after the j-th draft) a request's grammar constrains this step, or null
 * when none: not compiled, or a reasoning-gated grammar whose reasoning has not ended and whose drafts hold no
 * reasoning end token (vLLM should_fill_bitmask; after a drafted end token the bitmask switches on in the same window).
 */
function grammarStart(req: RequestState, drafts: readonly number[]): number | null {
  if (req.grammarStatus !== "ready") return null;
  if (req.reasoningEnded) return 0;
  const endIds = req.sampling.structuredOutputs!.reasoningEndTokenIds!;
  const end = drafts.findIndex((id) => endIds.includes(id));
  return end < 0 ? null : end + 1;
}

function grammarRejectedMessage(tokenId: number, requestId: string): string {
  return `Unexpected: grammar rejected tokens [${tokenId}] for request ${requestId}. Terminating request.`;
}

/** The offload tier's storage and connector for one engine (the disk file is created, empty, here). */
function createConnector(config: EngineConfig, offload: KvOffloadConfig, kv: KvCacheManager, runner: ModelRunner, nowMs: () => number, rank: number): KvOffloadConnector {
  const transfer = new KvBlockTransfer(runner, config.blockSize);
  let tier: OffloadTier;
  if (offload.backend === "disk") {
    const slotBytes = offload.usePageCache ? transfer.blockBytes : Math.ceil(transfer.blockBytes / 4096) * 4096;
    tier = new DiskTier(offload.diskPath!, Math.max(1, Math.floor(offload.diskCapacityBytes / slotBytes)), transfer.blockBytes, offload.diskBufferSlots, offload.usePageCache, rank);
  } else {
    tier = new CpuTier(Math.max(1, Math.floor(offload.cpuBytes / transfer.blockBytes)), transfer.blockBytes);
  }
  return new KvOffloadConnector({ config: offload, kv, transfer, tier, maxNumBatchedTokens: config.maxNumBatchedTokens, nowMs });
}
