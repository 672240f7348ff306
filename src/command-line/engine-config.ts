/**
 * The engine flags (vLLM names) of serve, run-batch, chat and bench -> EngineArgs, with vLLM's start-up warnings.
 * Ranges were checked when the flags were parsed (FLAGS' min/max); the JSON flags are checked by config/'s parsers.
 */
import type { EngineArgs, PrefixCachingHashAlgo } from "../config/engine-args.ts";
import { kvCacheDtypeOf } from "../config/cache-dtype.ts";
import { parseKvTransfer } from "../config/kv-transfer-config.ts";
import { parseHfOverrides, parsePoolerConfig, type Matryoshka, type PoolerConfig, type RunnerOption } from "../config/pooler-config.ts";
import { loraConfig } from "../config/lora-config.ts";
import { err, ok, type Result } from "../util/result.ts";
import { parseLogLevel } from "../util/logger.ts";
import type { Options } from "./flags.ts";
import { deviceOf, intOrNull, stringOrNull } from "./flag-values.ts";
import { speculativeConfigFromFlags } from "./speculative-flags.ts";
import { parseKvEventsConfig } from "../kv-events/kv-events-config.ts";
import { parsePrefixCachingHashAlgo, unseededWarning } from "../kv-events/block-hash.ts";

/** vLLM's UsageContext of each command's engine: it picks the step defaults below. */
export type EngineUsage = "api-server" | "batch-runner" | "llm-class";

/**
 * --max-num-batched-tokens and --max-num-seqs when not given, vLLM's on the CPU platform at world size 1
 * (vllm/engine/arg_utils.py EngineArgs.get_batch_defaults, `if current_platform.is_cpu()`): serve and chat are
 * OPENAI_API_SERVER; bench throughput / latency run vLLM's LLM class (LLM_CLASS); run-batch's OPENAI_BATCH_RUNNER has
 * no row there, so SchedulerConfig's DEFAULT_MAX_NUM_BATCHED_TOKENS / DEFAULT_MAX_NUM_SEQS apply. A bidirectional
 * model raises the budget to max-model-len (engine-sizing.ts stepTokenBudget).
 */
export const STEP_DEFAULTS: Readonly<Record<EngineUsage, { readonly maxNumBatchedTokens: number; readonly maxNumSeqs: number }>> = {
  "api-server": { maxNumBatchedTokens: 2048, maxNumSeqs: 128 },
  "batch-runner": { maxNumBatchedTokens: 2048, maxNumSeqs: 128 },
  "llm-class": { maxNumBatchedTokens: 4096, maxNumSeqs: 256 },
};

/** Engine flags (vLLM names) -> EngineArgs. Ranges were checked when the flags were parsed (FLAGS' min/max). */
export function engineConfig(options: Options, env: Readonly<Record<string, string | undefined>>, usage: EngineUsage = "api-server"): Result<{ engine: EngineArgs; warnings: readonly string[] }> {
  const kvCacheDtype = kvCacheDtypeOf(String(options["kv-cache-dtype"] ?? "auto"), deviceOf(options.device));
  if (!kvCacheDtype.ok) return kvCacheDtype;
  const dtypeWarnings = kvCacheDtype.value === "fp8" || kvCacheDtype.value === "fp8_e4m3"
    ? [`Using ${kvCacheDtype.value} data type to store kv cache. It reduces the GPU memory footprint and boosts the performance. Meanwhile, it may cause accuracy drop without a proper scaling factor`]
    : [];
  const enablePrefixCaching = options["no-enable-prefix-caching"] !== true;
  const transfer = parseKvTransfer({
    kvOffloadingSize: typeof options["kv-offloading-size"] === "number" ? options["kv-offloading-size"] : null,
    kvOffloadingBackend: String(options["kv-offloading-backend"] ?? "native"),
    kvTransferConfig: stringOrNull(options["kv-transfer-config"]),
    useSimpleKvOffload: env["VLLM_USE_SIMPLE_KV_OFFLOAD"] === "1",
    sideChannelHost: env["VLLM_NIXL_SIDE_CHANNEL_HOST"] ?? null,
    sideChannelPort: env["VLLM_NIXL_SIDE_CHANNEL_PORT"] ?? null,
    enablePrefixCaching,
  }, Number(options["block-size"]));
  if (!transfer.ok) return transfer;
  const speculative = speculativeConfigFromFlags(options);
  if (!speculative.ok) return speculative;
  const pooling = poolingFlags(options);
  if (!pooling.ok) return pooling;
  const hashAlgo = parsePrefixCachingHashAlgo(String(options["prefix-caching-hash-algo"] ?? "sha256"));
  if (!hashAlgo.ok) return hashAlgo;
  // vLLM init_none_hash: the block hashes' seed is PYTHONHASHSEED, read once here
  const pythonHashSeed = env["PYTHONHASHSEED"] ?? null;
  const rawKvEvents = stringOrNull(options["kv-events-config"]);
  const kvEvents = rawKvEvents === null ? ok(null) : parseKvEventsConfig(rawKvEvents, enablePrefixCaching);
  if (!kvEvents.ok) return kvEvents;
  // vllm/envs.py: bool(int(os.getenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1")))
  const intHashesRaw = (env["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] ?? "1").trim();
  if (!/^[+-]?\d+$/.test(intHashesRaw)) return err(`VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES must be an integer (0 or 1), got "${intHashesRaw}"`);
  const lora = loraConfig({
    enableLora: options["enable-lora"] === true,
    modules: Array.isArray(options["lora-modules"]) ? options["lora-modules"] : typeof options["lora-modules"] === "string" ? [options["lora-modules"]] : [],
    maxLoras: intOrNull(options["max-loras"]), maxLoraRank: intOrNull(options["max-lora-rank"]), maxCpuLoras: intOrNull(options["max-cpu-loras"]),
  });
  if (!lora.ok) return lora;
  const hashWarning = unseededWarning(hashAlgo.value, pythonHashSeed);
  const kvEventsWarnings = [...(kvEvents.value?.warnings ?? []), ...(hashWarning !== null ? [hashWarning] : [])];
  return ok({ warnings: [...dtypeWarnings, ...transfer.value.warnings, ...kvEventsWarnings], engine: {
    kvCacheDtype: kvCacheDtype.value,
    kvOffload: transfer.value.config,
    kvPeer: transfer.value.peer ?? null,
    seed: intOrNull(options.seed),
    kvCacheMemoryFraction: typeof options["gpu-memory-utilization"] === "number" ? options["gpu-memory-utilization"] : null,
    ...stepLimits(options, usage),
    maxModelLen: intOrNull(options["max-model-len"]),
    blockSize: Number(options["block-size"]),
    kvCacheMemoryBytes: intOrNull(options["kv-cache-memory"]),
    enablePrefixCaching: options["no-enable-prefix-caching"] !== true,
    numKvBlocksOverride: intOrNull(options["num-gpu-blocks-override"]),
    debugLog: parseLogLevel(env["VLLM_LOGGING_LEVEL"] ?? "") === "DEBUG",
    disableHybridKvCacheManager: options["disable-hybrid-kv-cache-manager"] === true,
    threads: intOrNull(options.threads) ?? navigator.hardwareConcurrency,
    device: deviceOf(options.device),
    speculativeConfig: speculative.value,
    schedulingPolicy: options["scheduling-policy"] === "priority" ? "priority" : "fcfs",
    runner: pooling.value.runner,
    poolerConfig: pooling.value.poolerConfig,
    matryoshka: pooling.value.matryoshka,
    prefixCachingHashAlgo: hashAlgo.value,
    pythonHashSeed,
    kvEventsConfig: kvEvents.value?.config ?? null,
    kvEventsUseIntBlockHashes: Number(intHashesRaw) !== 0,
    lora: lora.value,
  } });
}

/**
 * The step budget and sequence cap: given, else STEP_DEFAULTS; a defaulted max-num-seqs is at most the budget, as
 * vLLM's _set_default_max_num_seqs_and_batched_tokens_args (a step runs at least one token per sequence).
 */
function stepLimits(options: Options, usage: EngineUsage): Pick<EngineArgs, "maxNumSeqs" | "maxNumBatchedTokens" | "maxNumBatchedTokensGiven"> {
  const defaults = STEP_DEFAULTS[usage];
  const givenTokens = intOrNull(options["max-num-batched-tokens"]);
  const maxNumBatchedTokens = givenTokens ?? defaults.maxNumBatchedTokens;
  return {
    maxNumSeqs: intOrNull(options["max-num-seqs"]) ?? Math.min(defaults.maxNumSeqs, maxNumBatchedTokens),
    maxNumBatchedTokens,
    maxNumBatchedTokensGiven: givenTokens !== null,
  };
}

/** --runner, --convert and --pooler-config (vLLM: --convert embed with runner auto means pooling). */
function poolingFlags(options: Options): Result<{ runner: RunnerOption; poolerConfig: PoolerConfig | null; matryoshka: Matryoshka | null }> {
  const overrides = stringOrNull(options["hf-overrides"]);
  const parsedOverrides = overrides === null ? ok(null) : parseHfOverrides(overrides);
  if (!parsedOverrides.ok) return parsedOverrides;
  const matryoshka = parsedOverrides.value;
  const convert = stringOrNull(options.convert) ?? "auto";
  if (convert !== "auto" && convert !== "none" && convert !== "embed") {
    if (convert === "classify" || convert === "reward") return err(`--convert ${convert} is not supported: fennec serves embedding models (--convert embed) and generation, not classifiers or reward models`);
    return err(`--convert must be one of auto, none, embed, classify, reward (got "${convert}")`);
  }
  // vLLM's deprecated --task: embed / embedding mean --runner pooling --convert embed
  const task = stringOrNull(options.task) ?? "auto";
  if (!["auto", "generate", "embed", "embedding"].includes(task)) {
    return err(`--task ${task} is not supported: fennec serves text generation and embeddings (--runner pooling), not classify / score / reward / transcription / draft models`);
  }
  const embed = convert === "embed" || task === "embed" || task === "embedding";
  const runnerFlag = (stringOrNull(options.runner) ?? "auto") as RunnerOption;
  if (embed && runnerFlag === "generate") return err(`--${convert === "embed" ? "convert" : "task"} embed makes a pooling model: it cannot be combined with --runner generate`);
  const runner: RunnerOption = embed ? "pooling" : runnerFlag;
  if (matryoshka !== null && runner === "generate") return err("--hf-overrides matryoshka keys need a pooling model: they cannot be combined with --runner generate");
  const raw = stringOrNull(options["pooler-config"]);
  if (raw === null) return ok({ runner, poolerConfig: null, matryoshka });
  const poolerConfig = parsePoolerConfig(raw);
  if (!poolerConfig.ok) return poolerConfig;
  if (runner === "generate") return err("--pooler-config needs a pooling model: it cannot be combined with --runner generate");
  return ok({ runner, poolerConfig: poolerConfig.value, matryoshka });
}
