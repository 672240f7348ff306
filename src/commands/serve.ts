/**
 * `fennec serve`: the OpenAI-compatible HTTP server (vLLM flag names). Builds every object once (orchestrator, metrics
 * recorder, app) and passes them in; logs one line when ready; on SIGINT/SIGTERM in-flight streams end with an error
 * event, the listener closes, the engines stop, and the process exits 0. Returns -1 so the CLI keeps the process alive.
 */
import { errorMessage } from "../util/error-message.ts";
import pkg from "../../package.json" with { type: "json" };
import type { Options } from "../config.ts";
import { makeDeprecationGate } from "../metrics/deprecation.ts";
import { MetricsRecorder } from "../metrics/recorder.ts";
import type { EngineArgs } from "../engine/protocol.ts";
import { onlineTables } from "../metrics/omni-stats-logger.ts";
import { createServingPipeline, type ServingPipeline } from "../pipeline/serving-pipeline.ts";
import type { FinishedRequestStats, StatsListener, StepStats } from "../engine/stats.ts";
import { createApp } from "../server/app.ts";
import { metricsRoute } from "../server/metrics-route.ts";
import { DEFAULT_MAX_BODY_BYTES } from "../server/server-options.ts";
import { CliError } from "../util/cli-error.ts";

/** vLLM's startup check, word for word (validate_parsed_serve_args). */
export const PER_REQUEST_METRICS_NEED_STATS =
  "Error: --enable-per-request-metrics requires engine statistics logging; remove --disable-log-stats to enable per-request metrics.";

/** How long shutdown waits for open connections to finish before closing them. */
const SHUTDOWN_GRACE_MS = 3000;
/**
 * Bun's own limit is a backstop far above the app's: the app refuses a declared oversized body before reading it and a
 * chunked one once it passes the limit, with its JSON 413 (Bun's is bare).
 */
const BUN_BODY_LIMIT_BYTES = 1024 * 1024 * 1024;
/** Bun closes a connection silent for this long; non-streaming generations can be quiet for a while (Bun's maximum). */
const IDLE_TIMEOUT_S = 255;

export interface ServeFlags {
  readonly model: string | null;
  readonly servedModelName: string | null;
  readonly host: string;
  readonly port: number;
  readonly apiKey: string | null;
  readonly enablePerRequestMetrics: boolean;
  readonly forceIncludeUsage: boolean;
  readonly disableLogStats: boolean;
  readonly logStats: boolean;
  readonly enableMfuMetrics: boolean;
  readonly showHiddenMetricsForVersion: string | null;
}

const str = (v: unknown): string | null => (typeof v === "string" ? v : null);

/**
 * Flags of `serve` that this module reads, checked before anything is loaded (vLLM checks before the model too).
 * `env` supplies VLLM_API_KEY, which vLLM reads when --api-key is not given.
 */
export function readServeFlags(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): ServeFlags {
  const flags: ServeFlags = {
    model: str(options.model),
    servedModelName: str(options["served-model-name"]),
    host: str(options.host) ?? "127.0.0.1",
    port: Number(options.port),
    // an empty VLLM_API_KEY is no key (Python's `or`), an empty --api-key an error
    apiKey: str(options["api-key"]) ?? (env["VLLM_API_KEY"] || null),
    enablePerRequestMetrics: options["enable-per-request-metrics"] === true,
    forceIncludeUsage: options["enable-force-include-usage"] === true,
    disableLogStats: options["disable-log-stats"] === true,
    logStats: options["log-stats"] === true,
    enableMfuMetrics: options["enable-mfu-metrics"] === true,
    showHiddenMetricsForVersion: str(options["show-hidden-metrics-for-version"]),
  };
  if (flags.enablePerRequestMetrics && flags.disableLogStats) throw new CliError(PER_REQUEST_METRICS_NEED_STATS);
  if (flags.apiKey === "") throw new CliError("--api-key must not be empty");
  if (flags.servedModelName === "") throw new CliError("--served-model-name must not be empty");
  return flags;
}

/** Lets the orchestrator report stats before the recorder exists (the recorder needs the loaded model's facts). */
class ForwardingListener implements StatsListener {
  target: StatsListener | null = null;
  onStep(stats: StepStats): void { this.target?.onStep(stats); }
  onRequestFinished(stats: FinishedRequestStats): void { this.target?.onRequestFinished(stats); }
}

const intOrNull = (v: unknown): number | null => (typeof v === "number" ? v : null);

/** Engine flags (vLLM names) -> EngineArgs. Ranges were checked when the flags were parsed (the min/max columns of
 * config.ts's table). */
export function engineArgsOf(options: Options): EngineArgs {
  return {
    maxNumSeqs: Number(options["max-num-seqs"]),
    maxNumBatchedTokens: Number(options["max-num-batched-tokens"]),
    maxModelLen: intOrNull(options["max-model-len"]),
    blockSize: Number(options["block-size"]),
    kvCacheMemoryBytes: intOrNull(options["kv-cache-memory"]),
    enablePrefixCaching: options["no-enable-prefix-caching"] !== true,
    threads: intOrNull(options.threads) ?? navigator.hardwareConcurrency,
    device: options.device === "webgpu" ? "webgpu" : "cpu",
  };
}

/** The pipeline the flags ask for (--pipeline, --stage-config; --log-stats tables), built by the pipeline module. */
async function startPipeline(options: Options, flags: ServeFlags, listener: StatsListener): Promise<ServingPipeline> {
  const engineArgs = engineArgsOf(options);
  const tables = flags.logStats ? (numStages: number) => onlineTables(numStages, (text) => process.stdout.write(text)) : null;
  try {
    return await createServingPipeline({ options, engineArgs, listener, tables });
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw new CliError(`cannot start the engine: ${errorMessage(e)}`);
  }
}

const log = (line: string): void => { process.stderr.write(`${line}\n`); };

export async function main(options: Options): Promise<number> {
  const flags = readServeFlags(options);
  const gate = makeDeprecationGate(pkg.version, flags.showHiddenMetricsForVersion);
  if (!gate.ok) throw new CliError(gate.error);

  const listener = new ForwardingListener();
  const pipeline = await startPipeline(options, flags, listener);
  const { orchestrator } = pipeline;
  const servedModelName = flags.servedModelName ?? orchestrator.modelConfig.name;
  const recorder = new MetricsRecorder({
    modelName: servedModelName, maxModelLen: orchestrator.maxModelLen, logStats: !flags.disableLogStats,
    enableMfuMetrics: flags.enableMfuMetrics, deprecation: gate.value,
    // every stage's series exists from start-up; MFU and vllm:cache_config_info get the loaded model's facts
    engineIndices: Array.from({ length: pipeline.numStages }, (_, i) => i),
    model: { config: orchestrator.modelConfig },
    ...(pipeline.cacheConfig ? { cacheConfig: pipeline.cacheConfig } : {}),
  });
  listener.target = recorder;

  const shutdown = new AbortController();
  const app = createApp({
    orchestrator, servedModelName, modelPath: flags.model ?? "embedded:stories260K", apiKey: flags.apiKey,
    enablePerRequestMetrics: flags.enablePerRequestMetrics, forceIncludeUsage: flags.forceIncludeUsage,
    maxBodyBytes: DEFAULT_MAX_BODY_BYTES, shutdownSignal: shutdown.signal, log, metricsRoute: metricsRoute(recorder),
    onHttpResponse: (event) => recorder.onHttpResponse(event),
    enableRequestIdHeaders: options["enable-request-id-headers"] === true,
    enablePromptTokensDetails: options["enable-prompt-tokens-details"] === true,
    enableServerLoadTracking: options["enable-server-load-tracking"] === true,
  });
  try {
    // reusePort off (Elysia turns it on): a second server on a busy port must fail, not silently share its traffic
    app.listen({ hostname: flags.host, port: flags.port, maxRequestBodySize: BUN_BODY_LIMIT_BYTES, idleTimeout: IDLE_TIMEOUT_S, reusePort: false });
  } catch (e) {
    await orchestrator.shutdown();
    throw new CliError(`cannot listen on ${flags.host}:${flags.port}: ${errorMessage(e)}`);
  }
  const server = app.server!;
  log(`fennec ${pkg.version}: serving ${servedModelName} (max_model_len ${orchestrator.maxModelLen}) on http://${flags.host}:${server.port} (API docs at /docs)`);

  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) {
      // a second signal while draining: the operator wants out now
      log(`fennec: ${signal} again, exiting without waiting`);
      process.exit(1);
    }
    stopping = true;
    log(`fennec: ${signal} received, shutting down`);
    shutdown.abort();
    const closed = server.stop(false);
    const grace = new Promise((resolve) => setTimeout(resolve, SHUTDOWN_GRACE_MS));
    await Promise.race([closed, grace]);
    await server.stop(true);
    await Promise.race([orchestrator.shutdown(), new Promise((resolve) => setTimeout(resolve, SHUTDOWN_GRACE_MS))]);
    log("fennec: stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  return -1;
}
