/**
 * Builds the orchestrator `serve` and `run-batch` use from the stage-chain config: `--pipeline single` (the engine's
 * own front end, untouched unless `--log-stats` wants tables), `--pipeline pd`, or `--stage-config FILE`. Every stage
 * is one engine front end (frontend/engine-frontend.ts) with the stage's model and engine arguments over the
 * command line's. A bad stage-config file is returned by `stageChainOf` (one line) before any model loads.
 * @example const chain = stageChainOf(config.stages); const { orchestrator } = await createServingPipeline({ model, engineArgs, chain: chain.value, listener, tables });
 */
import type { StageChainConfig } from "../config/stage-chain-config.ts";
import type { EngineArgs, KvCacheFacts } from "../engine/protocol.ts";
import type { KvOffloadFacts } from "../engine/stats.ts";
import type { StatsListener } from "../frontend/iteration-stats.ts";
import { err, ok, type Result } from "../util/result.ts";
import { createEngineFrontend } from "../frontend/engine-frontend.ts";
import type { Orchestrator } from "../frontend/orchestrator.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";
import { loadStageConfig, pdChain, remoteStageProblem, type StageChain, type StageSpec } from "./stage-config.ts";
import { buildPipeline, type StageFactory } from "./stage-pipeline.ts";
import type { PipelineStatsSink } from "./stage-stats.ts";

/**
 * The chain the config asks for; null = plain single stage. A bad stage-config file is an error here, before loading,
 * and so is a stage in another process without the NixlConnector role (`kvPeerRole`, --kv-transfer-config) it needs.
 */
export function stageChainOf(config: StageChainConfig, kvPeerRole: "kv_producer" | "kv_consumer" | "kv_both" | null = null): Result<StageChain | null> {
  if (config.stageConfigPath === null) return ok(config.pipeline === "pd" ? pdChain() : null);
  const chain = loadStageConfig(config.stageConfigPath);
  if (!chain.ok) return chain;
  const problem = remoteStageProblem(chain.value, kvPeerRole);
  return problem === null ? chain : err(problem);
}

/** The one-stage chain (used when --log-stats needs the pipeline's bookkeeping around a single engine). */
export function singleChain(): StageChain {
  const pd = pdChain();
  return { source: "--pipeline single", stages: [{ ...pd.stages[1]!, stageId: 0, modelStage: "single", input: null, finalOutput: true }] };
}

/** A stage's engine arguments: the config's values over the command line's. */
export function stageEngineArgs(base: EngineArgs, stage: StageSpec): EngineArgs {
  const a = stage.engineArgs;
  return {
    ...base,
    maxNumSeqs: a.maxNumSeqs ?? base.maxNumSeqs,
    maxNumBatchedTokens: a.maxNumBatchedTokens ?? base.maxNumBatchedTokens,
    maxNumBatchedTokensGiven: a.maxNumBatchedTokens !== null || base.maxNumBatchedTokensGiven !== false,
    maxModelLen: a.maxModelLen ?? base.maxModelLen,
    blockSize: a.blockSize ?? base.blockSize,
    kvCacheMemoryBytes: a.kvCacheMemoryBytes ?? base.kvCacheMemoryBytes,
    enablePrefixCaching: a.enablePrefixCaching ?? base.enablePrefixCaching,
    threads: a.threads ?? base.threads,
    device: a.device ?? base.device,
  };
}

export interface ServingPipelineOptions {
  /** the command line's model (GGUF path; null = the embedded default model); a stage's own model wins */
  readonly model: string | null;
  /** the stages (stageChainOf); null = one engine */
  readonly chain: StageChain | null;
  /** the command line's engine arguments */
  readonly engineArgs: EngineArgs;
  /** /metrics (the recorder) */
  readonly listener: StatsListener | null;
  /** builds the --log-stats sink once the number of stages is known; null = no tables */
  readonly tables: ((numStages: number) => PipelineStatsSink) | null;
  /** tests: a different stage builder */
  readonly factory?: StageFactory;
  /** the command line's model file already in memory (sleep level 1's host copy), for the stage that runs it */
  readonly hostModelBytes?: ArrayBuffer | null;
  /** the tokenizer of the command line's model, when it is parsed already (a wake-up) */
  readonly tokenizer?: Tokenizer;
}

/** vLLM CacheConfig facts of stage 0's engine, for `vllm:cache_config_info` (MetricsRecorder's `cacheConfig`). */
export type CacheConfigInfo = Readonly<Record<string, string | number | boolean | null>>;

export interface ServingPipeline {
  readonly orchestrator: Orchestrator;
  readonly numStages: number;
  /** null when the stage builder does not say how many KV blocks its engine has (test factories) */
  readonly cacheConfig: CacheConfigInfo | null;
  /** stage 0's KV offload tier, for its connector's series; null without one */
  readonly kvOffload: KvOffloadFacts | null;
  /** the engines' start-up log lines, for the server's logger */
  readonly startupLines: readonly string[];
}

/** vLLM's CacheConfig fields from what the engine reported when it was ready. */
export function cacheConfigInfo(engineArgs: EngineArgs, numKvBlocks: number, maxModelLen: number, numCpuBlocks: number | null = null, kvCache: KvCacheFacts | null = null): CacheConfigInfo {
  // the hybrid KV cache manager's groups share the pool: the engine says what it holds (vLLM get_kv_cache_configs)
  const kvCacheSizeTokens = kvCache?.sizeTokens ?? numKvBlocks * engineArgs.blockSize;
  const offload = engineArgs.kvOffload ?? null;
  return {
    block_size: engineArgs.blockSize, cache_dtype: engineArgs.kvCacheDtype ?? "auto", enable_prefix_caching: engineArgs.enablePrefixCaching,
    num_gpu_blocks: numKvBlocks, num_cpu_blocks: numCpuBlocks, kv_cache_size_tokens: kvCacheSizeTokens,
    kv_cache_max_concurrency: kvCache?.maxConcurrency ?? kvCacheSizeTokens / maxModelLen, sliding_window: kvCache?.slidingWindow ?? null, is_attention_free: false,
    // vLLM prints the flags as given (None when --kv-offloading-size is not used, even with --kv-transfer-config)
    kv_offloading_size: offload?.kvOffloadingSize ?? null, kv_offloading_backend: offload?.kvOffloadingBackend ?? null,
  };
}

function kvOffloadFacts(engineArgs: EngineArgs, capacityBlocks: number | null | undefined): KvOffloadFacts | null {
  const o = engineArgs.kvOffload;
  if (!o || capacityBlocks === null || capacityBlocks === undefined) return null;
  return { connector: o.connector, backend: o.backend, pageCache: o.usePageCache, lazy: o.lazy, capacityBlocks };
}

export async function createServingPipeline(p: ServingPipelineOptions): Promise<ServingPipeline> {
  let cacheConfig: CacheConfigInfo | null = null;
  let kvOffload: KvOffloadFacts | null = null;
  const startupLines: string[] = [];
  // the host copy moves into one engine's Worker: the first stage that runs the command line's model takes it
  let hostModelBytes = p.hostModelBytes ?? null;
  const factory: StageFactory = p.factory ?? (async (stage, engineIndex, listener) => {
    const engineArgs = stageEngineArgs(p.engineArgs, stage);
    const own = stage.engineArgs.model === null || stage.engineArgs.model === undefined || stage.engineArgs.model === p.model;
    const frontend = await createEngineFrontend({
      modelPath: stage.engineArgs.model ?? p.model, engineArgs, listeners: listener ? [listener] : [],
      ...(own && hostModelBytes !== null ? { hostModelBytes } : {}), ...(own && p.tokenizer ? { tokenizer: p.tokenizer } : {}),
    });
    if (own) hostModelBytes = null;
    startupLines.push(...(frontend.ready.startupLines ?? []));
    // stage 0's engine, or the first local one when stage 0 runs in another process
    if (cacheConfig === null) {
      cacheConfig = cacheConfigInfo(engineArgs, frontend.ready.numKvBlocks, frontend.ready.maxModelLen, frontend.ready.numCpuBlocks ?? null, frontend.ready.kvCache ?? null);
      kvOffload = kvOffloadFacts(engineArgs, frontend.ready.numCpuBlocks);
    }
    return frontend;
  });
  const chain = p.chain;
  if (chain === null && p.tables === null) {
    // the plain path: nothing between the server and the engine's front end
    const orchestrator = await factory(singleChain().stages[0]!, 0, p.listener);
    return { orchestrator, numStages: 1, cacheConfig, kvOffload, startupLines };
  }
  const effective = chain ?? singleChain();
  const orchestrator = await buildPipeline(effective, factory, { listener: p.listener, tables: p.tables?.(effective.stages.length) ?? null });
  return { orchestrator, numStages: effective.stages.length, cacheConfig, kvOffload, startupLines };
}
