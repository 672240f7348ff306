/**
 * `bench throughput`'s and `bench latency`'s flags as typed configs (vllm/benchmarks/throughput.py, latency.py): the
 * in-process engine they run and what they send it.
 */
import { ok, type Result } from "../util/result.ts";
import type { Options } from "./flags.ts";
import { intOrNull, stringOrNull } from "./flag-values.ts";
import { inProcessEngineConfig, type InProcessEngineConfig } from "./in-process-engine-config.ts";

export interface BenchThroughputConfig {
  readonly run: InProcessEngineConfig;
  /** seed of the dataset sampling */
  readonly seed: number;
  readonly datasetName: "random" | "sharegpt";
  /** --dataset-path (needed by sharegpt) */
  readonly datasetPath: string | null;
  readonly numPrompts: number;
  /** --input-len, else --random-input-len */
  readonly inputLen: number;
  /** --output-len, else --random-output-len */
  readonly outputLen: number;
  readonly randomRangeRatio: number;
  readonly randomPrefixLen: number;
  /** null: the length of the dataset's answer */
  readonly sharegptOutputLen: number | null;
  readonly numWarmups: number;
  readonly disableTqdm: boolean;
  /** --output-json; null: no file */
  readonly outputJson: string | null;
}

export function benchThroughputConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<BenchThroughputConfig> {
  const run = inProcessEngineConfig(options, env, "llm-class");
  if (!run.ok) return run;
  return ok({
    run: run.value, seed: Number(options.seed), datasetName: options["dataset-name"] === "sharegpt" ? "sharegpt" : "random",
    datasetPath: stringOrNull(options["dataset-path"]), numPrompts: Number(options["num-prompts"]),
    inputLen: intOrNull(options["input-len"]) ?? Number(options["random-input-len"]), outputLen: intOrNull(options["output-len"]) ?? Number(options["random-output-len"]),
    randomRangeRatio: Number(options["random-range-ratio"]), randomPrefixLen: Number(options["random-prefix-len"]),
    sharegptOutputLen: intOrNull(options["sharegpt-output-len"]), numWarmups: Number(options["num-warmups"]),
    disableTqdm: options["disable-tqdm"] === true, outputJson: stringOrNull(options["output-json"]),
  });
}

export interface BenchLatencyConfig {
  readonly run: InProcessEngineConfig;
  readonly seed: number;
  /** prompts in the batch */
  readonly batchSize: number;
  /** prompt tokens (vLLM's default 32) */
  readonly inputLen: number;
  /** output tokens (vLLM's default 128) */
  readonly outputLen: number;
  readonly numItersWarmup: number;
  readonly numIters: number;
  readonly disableTqdm: boolean;
  readonly outputJson: string | null;
}

export function benchLatencyConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<BenchLatencyConfig> {
  const run = inProcessEngineConfig(options, env, "llm-class");
  if (!run.ok) return run;
  return ok({
    run: run.value, seed: Number(options.seed), batchSize: Number(options["batch-size"]),
    inputLen: intOrNull(options["input-len"]) ?? 32, outputLen: intOrNull(options["output-len"]) ?? 128,
    numItersWarmup: Number(options["num-iters-warmup"]), numIters: Number(options["num-iters"]),
    disableTqdm: options["disable-tqdm"] === true, outputJson: stringOrNull(options["output-json"]),
  });
}
