/**
 * `fennec serve`: the OpenAI-compatible HTTP server (vLLM flag names). Builds every object once (orchestrator, metrics
 * recorder, app) and passes them in; logs one line when ready; on SIGINT/SIGTERM in-flight streams end with an error
 * event, the listener closes, the engines stop, and the process exits 0. Returns -1 so the CLI keeps the process alive.
 */
import { errorMessage } from "../util/error-message.ts";
import pkg from "../../package.json" with { type: "json" };
import { serveConfig, type LogConfig, type Options, type ServeConfig } from "../config.ts";
import { makeDeprecationGate } from "../metrics/deprecation.ts";
import { MetricsRecorder } from "../metrics/recorder.ts";
import { onlineTables } from "../metrics/omni-stats-logger.ts";
import { createServingPipeline, stageChainOf, type ServingPipeline } from "../pipeline/serving-pipeline.ts";
import type { StageChain } from "../pipeline/stage-config.ts";
import type { FinishedRequestStats, StatsListener, StepStats } from "../engine/stats.ts";
import { createApp } from "../server/app.ts";
import { metricsRoute } from "../server/metrics-route.ts";
import { DEFAULT_MAX_BODY_BYTES } from "../server/server-options.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";
import { createLogger, type Logger, type LogLevel } from "../util/logger.ts";
import { LoggingStatLogger } from "../metrics/logging-stat-logger.ts";
import { accessLine } from "../server/access-log.ts";
import { withRequestLogging } from "../server/request-logger.ts";

/** How long shutdown waits for open connections to finish before closing them. */
const SHUTDOWN_GRACE_MS = 3000;
/**
 * Bun's own limit is a backstop far above the app's: the app refuses a declared oversized body before reading it and a
 * chunked one once it passes the limit, with its JSON 413 (Bun's is bare).
 */
const BUN_BODY_LIMIT_BYTES = 1024 * 1024 * 1024;
/** Bun closes a connection silent for this long; non-streaming generations can be quiet for a while (Bun's maximum). */
const IDLE_TIMEOUT_S = 255;

/**
 * `serve`'s typed config, checked before anything is loaded (config.ts: serveConfig); a bad flag combination or stage
 * config file is one line, exit 2. `env` supplies VLLM_API_KEY, which vLLM reads when --api-key is not given.
 */
export function readServeConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): { config: ServeConfig; chain: StageChain | null } {
  const config = serveConfig(options, env);
  if (!config.ok) throw new CliError(config.error);
  const chain = stageChainOf(config.value.stages);
  if (!chain.ok) throw new CliError(chain.error);
  return { config: config.value, chain: chain.value };
}

/** Lets the orchestrator report stats before the recorder exists (the recorder needs the loaded model's facts). */
class ForwardingListener implements StatsListener {
  targets: StatsListener[] = [];
  onStep(stats: StepStats): void { for (const t of this.targets) t.onStep(stats); }
  onRequestFinished(stats: FinishedRequestStats): void { for (const t of this.targets) t.onRequestFinished(stats); }
}

/** The server's loggers: fennec's own lines at VLLM_LOGGING_LEVEL, the access lines at --uvicorn-log-level. */
export interface ServeLoggers {
  readonly main: Logger;
  /** null with --disable-uvicorn-access-log */
  readonly access: Logger | null;
}

export function serveLoggers(log: LogConfig, write: (line: string) => void = (l) => void process.stderr.write(l)): ServeLoggers {
  const root = createLogger({ level: log.level, format: log.format, write });
  return { main: root.child("serve.ts"), access: log.accessLog ? root.child("access", log.accessLevel) : null };
}

/** The pipeline the config asks for (--pipeline, --stage-config; --log-stats tables), built by the pipeline module. */
async function startPipeline(config: ServeConfig, chain: StageChain | null, listener: StatsListener): Promise<ServingPipeline> {
  const tables = config.metrics.logStats ? (numStages: number) => onlineTables(numStages, (text) => process.stdout.write(text)) : null;
  try {
    return await createServingPipeline({ model: config.model, engineArgs: config.engine, chain, listener, tables });
  } catch (e) {
    // the flags were checked already: a model that does not load is a failed run (exit 1)
    throw new RuntimeFailure(e instanceof CliError ? e.message : `cannot start the engine: ${errorMessage(e)}`);
  }
}

export async function main(options: Options): Promise<number> {
  const { config, chain } = readServeConfig(options);
  const { server: flags, metrics } = config;
  const gate = makeDeprecationGate(pkg.version, metrics.showHiddenMetricsForVersion);
  if (!gate.ok) throw new CliError(gate.error);
  const loggers = serveLoggers(config.log);
  const mainLog = loggers.main;
  for (const w of config.warnings) mainLog.warning(w);
  if (config.log.disableLogRequestsGiven) mainLog.warning("--disable-log-requests is deprecated and has no effect: requests are not logged unless --enable-log-requests is given");
  // the app's lines (aborts, internal errors) at the level each names
  const log = (line: string, level: LogLevel = "INFO"): void => mainLog.log(level, line);

  const listener = new ForwardingListener();
  const pipeline = await startPipeline(config, chain, listener);
  const orchestrator = config.log.enableLogRequests
    ? withRequestLogging(pipeline.orchestrator, (line) => mainLog.child("logger.ts").info(line), config.log.maxLogLen)
    : pipeline.orchestrator;
  const servedModelName = flags.servedModelName ?? orchestrator.modelConfig.name;
  const recorder = new MetricsRecorder({
    modelName: servedModelName, maxModelLen: orchestrator.maxModelLen, logStats: !metrics.disableLogStats,
    enableMfuMetrics: metrics.enableMfuMetrics, deprecation: gate.value,
    // every stage's series exists from start-up; MFU and vllm:cache_config_info get the loaded model's facts
    engineIndices: Array.from({ length: pipeline.numStages }, (_, i) => i),
    model: { config: orchestrator.modelConfig },
    ...(pipeline.cacheConfig ? { cacheConfig: pipeline.cacheConfig } : {}),
    kvOffload: pipeline.kvOffload,
  });
  listener.targets.push(recorder);
  // vLLM's periodic "Engine 000: Avg prompt throughput ..." line; off with --disable-log-stats, as in vLLM
  const statLogger = metrics.disableLogStats ? null : new LoggingStatLogger(mainLog.child("loggers.ts"), config.log.statsIntervalS, Array.from({ length: pipeline.numStages }, (_, i) => i));
  if (statLogger !== null) listener.targets.push(statLogger);

  const shutdown = new AbortController();
  const app = createApp({
    orchestrator, servedModelName, modelPath: config.model ?? "embedded:stories260K", apiKey: flags.apiKey,
    enablePerRequestMetrics: flags.enablePerRequestMetrics, forceIncludeUsage: flags.forceIncludeUsage,
    maxBodyBytes: DEFAULT_MAX_BODY_BYTES, shutdownSignal: shutdown.signal, log, metricsRoute: metricsRoute(recorder),
    ...(loggers.access !== null ? { accessLog: (entry) => loggers.access!.info(accessLine(entry)) } : {}),
    onHttpResponse: (event) => recorder.onHttpResponse(event),
    enableRequestIdHeaders: flags.enableRequestIdHeaders,
    enablePromptTokensDetails: flags.enablePromptTokensDetails,
    enableServerLoadTracking: flags.enableServerLoadTracking,
    disableWebUi: flags.disableWebUi,
  });
  try {
    // reusePort off (Elysia turns it on): a second server on a busy port must fail, not silently share its traffic
    app.listen({ hostname: flags.host, port: flags.port, maxRequestBodySize: BUN_BODY_LIMIT_BYTES, idleTimeout: IDLE_TIMEOUT_S, reusePort: false });
  } catch (e) {
    await orchestrator.shutdown();
    throw new RuntimeFailure(`cannot listen on ${flags.host}:${flags.port}: ${errorMessage(e)}`);
  }
  const server = app.server!;
  statLogger?.start();
  log(`fennec ${pkg.version}: serving ${servedModelName} (max_model_len ${orchestrator.maxModelLen}) on http://${flags.host}:${server.port} (${flags.disableWebUi ? "" : "chat and metrics at /, "}API docs at /docs)`);

  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) {
      // a second signal while draining: the operator wants out now
      log(`${signal} again, exiting without waiting`, "WARNING");
      process.exit(1);
    }
    stopping = true;
    log(`${signal} received, shutting down`);
    statLogger?.stop();
    shutdown.abort();
    const closed = server.stop(false);
    const grace = new Promise((resolve) => setTimeout(resolve, SHUTDOWN_GRACE_MS));
    await Promise.race([closed, grace]);
    await server.stop(true);
    await Promise.race([orchestrator.shutdown(), new Promise((resolve) => setTimeout(resolve, SHUTDOWN_GRACE_MS))]);
    log("stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  return -1;
}
