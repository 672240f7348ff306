/**
 * The engine's dimensions, computed before it runs (vLLM gpu_worker.py determine_available_memory and
 * kv_cache_utils.py get_kv_cache_configs / get_max_concurrency_for_kv_cache_config): max-model-len, the step's token
 * budget, the KV pool's blocks and groups, the largest step the forward pass is reserved for. The engine core
 * (engine-core.ts) is built from the EngineConfig this resolves.
 */
import { totalmem } from "node:os";
import type { ModelRunner } from "../model/model-batch.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { EngineArgs, KvCacheFacts } from "./protocol.ts";
import { err, ok, type Result } from "../util/result.ts";
import type { KvOffloadConfig, KvPeerConfig } from "../config/kv-transfer-config.ts";
import type { SpeculativeConfig } from "../config/speculative-config.ts";
import { resolvePooler, type ResolvedPooler } from "./resolve-pooler.ts";
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

/**
 * The token budget of one step. A model that attends bidirectionally computes each prompt in one step (no chunked
 * prefill), so, as vLLM's SchedulerConfig does without chunked prefill, an unset --max-num-batched-tokens becomes
 * max(its default, max_model_len): the model's whole context is served without flags.
 */
export function stepTokenBudget(args: EngineArgs, config: ModelConfig, maxModelLen: number): number {
  if (config.bidirectional !== true || args.maxNumBatchedTokensGiven !== false) return args.maxNumBatchedTokens;
  return Math.max(args.maxNumBatchedTokens, maxModelLen);
}

/** Blocks one request of `numTokens` positions holds at most, over every group (vLLM max_memory_usage_bytes per group). */
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
