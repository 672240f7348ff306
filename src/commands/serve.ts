/**
 * `fennec serve`: the OpenAI-compatible HTTP server (vLLM flag names). Builds every object once (orchestrator, metrics
 * recorder, app) and passes them in; logs one line when ready. On SIGINT/SIGTERM (vLLM's --shutdown-timeout, its
 * api_server drain): new requests get 503, in-flight ones get up to --shutdown-timeout seconds to finish, the rest are
 * aborted (streams end with an error event), the engines stop, and the process exits 0. If an engine dies, the process
 * logs why and exits 1 so that a supervisor restarts it, as vLLM's API server terminates when its engine core dies
 * (entrypoints/launcher.py terminate_if_errored). Returns -1 so the CLI keeps the process alive.
 */
import { errorMessage } from "../util/error-message.ts";
import pkg from "../../package.json" with { type: "json" };
import { readFileSync } from "node:fs";
import { serveConfig, type ServeConfig } from "../command-line/serve-config.ts";
import type { LogConfig } from "../command-line/log-config.ts";
import type { Options } from "../command-line/flags.ts";
import type { TlsSettings } from "../config/server-settings.ts";
import { speculativeConfigNote, speculativeConfigRepr } from "../config/speculative-config.ts";
import { makeDeprecationGate } from "../metrics/deprecation.ts";
import { MetricsRecorder, type HttpResponseEvent } from "../metrics/recorder.ts";
import { onlineTables } from "../metrics/omni-stats-logger.ts";
import { createServingPipeline, stageChainOf, type ServingPipeline, type ServingPipelineOptions } from "../pipeline/serving-pipeline.ts";
import { readHostCopy } from "../gguf/host-copy.ts";
import { LoraAdapters } from "../server/lora-routes.ts";
import type { StageChain } from "../pipeline/stage-config.ts";
import type { FinishedRequestStats, IterationStats, StatsListener } from "../frontend/iteration-stats.ts";
import { createApp } from "../server/app.ts";
import { readChatFlags } from "./chat-flags.ts";
import { metricsRoute } from "../server/metrics-route.ts";
import { listenHttp, type HttpListener, type PeerAddress } from "../server/http-listener.ts";
import { DEFAULT_MAX_BODY_BYTES } from "../server/server-options.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";
import { createLogger, type Logger, type LogLevel } from "../util/logger.ts";
import { LoggingStatLogger } from "../metrics/logging-stat-logger.ts";
import { accessLine } from "../server/access-log.ts";
import { withRequestLogging } from "../server/request-logger.ts";
import { DebugStepLog } from "./debug-step-log.ts";
import { tracingFlags } from "../command-line/tracing-flags.ts";
import { startTracing, type Tracing } from "../tracing/tracer.ts";
import { withRequestTracing } from "../tracing/traced-orchestrator.ts";
import { withDetectedParsers } from "../server/chat-format-detection.ts";
import { ollamaServing } from "./ollama-serving.ts";
import { readModelMetadata, yieldToEventLoop } from "./model-metadata.ts";
import { startVisionServing } from "./vision-serving.ts";
import { modelArgumentFlags } from "../command-line/model-argument-flags.ts";
import { startSeveralModels, type ConfiguredModel } from "./serve-models.ts";
import { readModelEntries, type ModelEntry } from "./model-entries.ts";
import { SleepableOrchestrator } from "../frontend/sleepable-orchestrator.ts";
import { keepSingleModel } from "../server/single-model-keep-alive.ts";
import { keepAliveMs } from "../server/model-router.ts";

/** How long shutdown waits for the engines to stop after the requests are gone. */
const ENGINE_STOP_GRACE_MS = 3000;
/** How long aborted streams get to write their error event before their connections are closed. */
const ABORT_FLUSH_MS = 200;
/** A connection silent for this long is closed; non-streaming generations can be quiet for a while. */
const IDLE_TIMEOUT_S = 255;
/** How often serve checks that its engines are alive. */
const ENGINE_WATCH_MS = 250;

/**
 * `serve`'s typed config, checked before anything is loaded (command-line/serve-config.ts); a bad flag combination or stage
 * config file is one line, exit 2. `env` supplies VLLM_API_KEY, which vLLM reads when --api-key is not given.
 */
export function readServeConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): { config: ServeConfig; chain: StageChain | null } {
  const config = serveConfig(options, env);
  if (!config.ok) throw new CliError(config.error);
  const chain = stageChainOf(config.value.stages, config.value.engine.kvPeer?.role ?? null);
  if (!chain.ok) throw new CliError(chain.error);
  return { config: config.value, chain: chain.value };
}

/** Lets the orchestrator report stats before the recorder exists (the recorder needs the loaded model's facts). */
class ForwardingListener implements StatsListener {
  targets: StatsListener[] = [];
  onStep(stats: IterationStats): void { for (const t of this.targets) t.onStep(stats); }
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
async function startPipeline(config: ServeConfig, chain: StageChain | null, listener: StatsListener, wake: Pick<ServingPipelineOptions, "hostModelBytes" | "tokenizer"> = {}): Promise<ServingPipeline> {
  const tables = config.metrics.logStats ? (numStages: number) => onlineTables(numStages, (text) => process.stdout.write(text)) : null;
  try {
    return await createServingPipeline({ model: config.model, engineArgs: config.engine, chain, listener, tables, ...wake });
  } catch (e) {
    // the flags were checked already: a model that does not load is a failed run (exit 1)
    throw new RuntimeFailure(e instanceof CliError ? e.message : `cannot start the engine: ${errorMessage(e)}`);
  }
}

/** A request under --root-path as the routes see it (FastAPI's root_path: a proxy in front may or may not strip it). */
function withoutRootPath(request: Request, rootPath: string | null): Request {
  if (rootPath === null) return request;
  const url = new URL(request.url);
  if (url.pathname !== rootPath && !url.pathname.startsWith(`${rootPath}/`)) return request;
  url.pathname = url.pathname.slice(rootPath.length) || "/";
  return new Request(url, request);
}

/** The PEM files of --ssl-*, read once at start-up; an unreadable one fails the start (exit 1). */
function readTls(tls: TlsSettings): NonNullable<Parameters<typeof listenHttp>[1]["tls"]> {
  const read = (flag: string, path: string): string => {
    try { return readFileSync(path, "utf8"); } catch (e) { throw new RuntimeFailure(`${flag} ${path}: ${errorMessage(e)}`); }
  };
  return {
    key: read("--ssl-keyfile", tls.keyFile), cert: read("--ssl-certfile", tls.certFile),
    ...(tls.caFile !== null ? { ca: read("--ssl-ca-certs", tls.caFile) } : {}),
    // Python's ssl codes: CERT_OPTIONAL asks for a certificate, CERT_REQUIRED refuses clients without a valid one
    requestCert: tls.certReqs > 0, rejectUnauthorized: tls.certReqs === 2,
  };
}

/** " (chat and metrics at /api/, API docs at /api/docs)": the pages this server serves, under --root-path; "" if none. */
export function servedPagesNote(flags: { readonly disableWebUi: boolean; readonly disableDocs: boolean; readonly rootPath: string | null }): string {
  const root = flags.rootPath ?? "";
  const pages = [...(flags.disableWebUi ? [] : [`chat and metrics at ${root}/`]), ...(flags.disableDocs ? [] : [`API docs at ${root}/docs`])];
  return pages.length > 0 ? ` (${pages.join(", ")})` : "";
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What every model's server shares: the loggers, the chat flags, the deprecation gate and the listener's maps. */
interface ModelWiring {
  readonly loggers: ServeLoggers;
  readonly log: (line: string, level?: LogLevel) => void;
  readonly chat: ReturnType<typeof readChatFlags>;
  readonly gate: NonNullable<Extract<ReturnType<typeof makeDeprecationGate>, { ok: true }>["value"]>;
  readonly shutdown: AbortSignal;
  readonly peers: WeakMap<Request, PeerAddress | null>;
  readonly targets: WeakMap<Request, string>;
  /** --enable-sleep-mode */
  readonly sleepMode: boolean;
  /** several models: the engine stops and starts under the front end (a model's unload and load) */
  readonly engineSwap?: boolean;
  /** VLLM_SERVER_DEV_MODE=1: vLLM's dev routes are mounted */
  readonly devMode: boolean;
  /** several models: the process and HTTP series are the server's (this hook), each model's recorder has its own */
  readonly onHttpResponse?: (event: HttpResponseEvent) => void;
  /** --otlp-traces-endpoint: one llm_request span per finished request; null = off */
  readonly tracing: Tracing | null;
  /** the command line, for the model argument's Hub flags (Ollama's /api/pull) */
  readonly options: Options;
}

/** One model's server: its pipeline (engine Worker), metrics recorder, stats logger and app. */
interface ModelServer {
  readonly app: ReturnType<typeof createApp>;
  readonly orchestrator: ServingPipeline["orchestrator"];
  readonly recorder: MetricsRecorder;
  readonly statLogger: LoggingStatLogger | null;
  readonly servedModelName: string;
  /** the chat settings with the parsers chosen from this model's template where no flag chose one */
  readonly chat: ReturnType<typeof readChatFlags>;
  /** the start-up line naming the parsers chosen from the template, or null */
  readonly detectedParsers: string | null;
  readonly engine: { stop(): Promise<void>; start(): Promise<void> };
  /** stops the vision encoder's thread (a dropped front end: see serve-models.ts) */
  dispose(): void;
  /** the served LoRA adapters (--enable-lora), null without */
  readonly lora: LoraAdapters | null;
}

/**
 * --enable-lora: the served adapters, registered in the engine already (--lora-modules); the runtime routes with
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING true (vllm/envs.py: "true" or "1", any case)
 */
function loraAdapters(config: ServeConfig, engine: () => ServingPipeline["orchestrator"], servedModelName: string): LoraAdapters | null {
  const lora = config.engine.lora ?? null;
  if (lora === null || engine().loadLora === undefined) return null;
  const runtime = ["true", "1"].includes((process.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] ?? "").toLowerCase());
  const none = (): Promise<string | null> => Promise.resolve("this engine serves no LoRA adapters");
  return new LoraAdapters({
    loadLora: (name, path, loraIntId) => engine().loadLora?.(name, path, loraIntId) ?? none(),
    unloadLora: (name) => engine().unloadLora?.(name) ?? none(),
  }, servedModelName, runtime, lora.modules);
}

/** Starts one model (its engine, recorder and app); its start-up lines are logged as they come. */
async function startModelServer(config: ServeConfig, chain: StageChain | null, wiring: ModelWiring): Promise<ModelServer> {
  const { server: flags, metrics } = config;
  const { log, gate } = wiring;
  const mainLog = wiring.loggers.main;
  const listener = new ForwardingListener();
  // vLLM prints the speculative config's repr in its start-up config line
  if (config.engine.speculativeConfig) {
    const note = speculativeConfigNote(config.engine.speculativeConfig);
    if (note !== null) log(note);
    log(`speculative_config=${speculativeConfigRepr(config.engine.speculativeConfig)}`);
  }
  // the tokenizer and Ollama's metadata from one parse of the file, the event loop served between the pieces
  const metadata = await readModelMetadata(config.model);
  const pipeline = await startPipeline(config, chain, listener, metadata.tokenizer !== null ? { tokenizer: metadata.tokenizer } : {});
  await yieldToEventLoop();
  for (const line of pipeline.startupLines) log(line);
  const pooler = pipeline.orchestrator.pooler ?? null;
  if (pooler !== null) log(`Embedding model: pooling_type=${pooler.poolingType} (${pooler.source}), normalize=${pooler.normalize ? "True" : "False"}, dimensions=${pooler.dimensions ?? pooler.hiddenSize}; serving /v1/embeddings, /pooling, /score and /rerank; generation routes answer 400`);
  // --enable-sleep-mode: /sleep stops this engine, /wake_up starts it again with the same arguments and listener (and
  // the tokenizer it has); level 1 keeps the model file in memory so that wake_up reads no file
  let recorderRef: MetricsRecorder | null = null;
  // the engine the LoRA routes drive: a new one after each wake-up, which gets the runtime-loaded adapters again
  let loraEngine = pipeline.orchestrator;
  let lora: LoraAdapters | null = null;
  const sleepable = wiring.sleepMode || wiring.engineSwap === true ? new SleepableOrchestrator(pipeline.orchestrator, async (hostModelBytes) => {
    const started = performance.now();
    const again = await startPipeline(config, chain, listener, { hostModelBytes, tokenizer: pipeline.orchestrator.tokenizer });
    for (const line of again.startupLines) log(line);
    log(`engine woke up in ${Math.round(performance.now() - started)} ms (${hostModelBytes !== null ? `weights from host memory, ${(hostModelBytes.byteLength / 2 ** 20).toFixed(1)} MiB` : "weights read from the model file"})`);
    loraEngine = again.orchestrator;
    for (const card of lora?.list() ?? []) {
      if (config.engine.lora?.modules.some((m) => m.name === card.name) === true) continue;
      const error = await loraEngine.loadLora?.(card.name, card.path, card.id);
      if (error !== null && error !== undefined) log(`LoRA adapter ${card.name} could not be loaded again after wake-up: ${error}`);
    }
    return again.orchestrator;
  }, (state) => { log(`engine sleep state: ${state}`); recorderRef?.setSleepState(state); }, async () => {
    try {
      const bytes = await readHostCopy(config.model);
      if (bytes !== null) log(`sleep level 1: ${(bytes.byteLength / 2 ** 20).toFixed(1)} MiB of weights kept in host memory`);
      return bytes;
    } catch (e) {
      log(`sleep level 1: the model file could not be kept in memory (${errorMessage(e)}); wake_up reads it again`, "WARNING");
      return null;
    }
  }) : null;
  const engine = sleepable ?? pipeline.orchestrator;
  const logged = config.log.enableLogRequests
    ? withRequestLogging(engine, (line) => mainLog.child("logger.ts").info(line), config.log.maxLogLen, config.log.enableLogOutputs, (name) => lora?.card(name) ?? null)
    : engine;
  const orchestrator = wiring.tracing === null ? logged : withRequestTracing(logged, wiring.tracing);
  // tools and reasoning with no flags: parsers chosen from the template's markers (llama.cpp common/chat.cpp)
  const { chat, line: detectedParsers } = withDetectedParsers(wiring.chat, wiring.chat.chatTemplate ?? orchestrator.tokenizer.chatTemplateSource ?? null);
  // vLLM: served_model_name defaults to the model argument as given; the embedded model has its own name
  const servedModelName = flags.servedModelName ?? config.model ?? orchestrator.modelConfig.name;
  const recorder = new MetricsRecorder({
    modelName: servedModelName, maxModelLen: orchestrator.maxModelLen, logStats: !metrics.disableLogStats, toolCallParser: chat.toolCallParser !== null,
    enableMfuMetrics: metrics.enableMfuMetrics, deprecation: gate, enableLora: (config.engine.lora ?? null) !== null,
    numSpeculativeTokens: config.engine.speculativeConfig?.numSpeculativeTokens ?? null,
    // every stage's series exists from start-up; MFU and vllm:cache_config_info get the loaded model's facts
    engineIndices: Array.from({ length: pipeline.numStages }, (_, i) => i),
    model: { config: orchestrator.modelConfig },
    ...(pipeline.cacheConfig ? { cacheConfig: pipeline.cacheConfig } : {}),
    kvOffload: pipeline.kvOffload,
    kvPeerConnector: config.engine.kvPeer ? "NixlConnector" : null,
    ...(wiring.onHttpResponse !== undefined ? { processMetrics: false, httpMetrics: false } : {}),
  });
  listener.targets.push(recorder);
  // the metric series and then the app's routes are each several ms of the main thread: other models stream between
  await yieldToEventLoop();
  recorderRef = recorder;
  const vision = await startVisionServing(config.media, config.model, orchestrator.modelConfig.dim, log, (queries, hits) => recorder.onMultimodalCache(queries, hits));
  if (mainLog.enabled("DEBUG")) listener.targets.push(new DebugStepLog(mainLog.child("scheduler.ts")));
  // the connector between instances logs its events (an expired lease, a failed read) one line each, as vLLM's
  if (config.engine.kvPeer) {
    const nixlLog = mainLog.child("nixl_connector.py");
    listener.targets.push({ onStep: (s) => { for (const line of s.kvPeer?.logLines ?? []) nixlLog.warning(line); }, onRequestFinished: () => {} });
  }
  // vLLM's periodic "Engine 000: Avg prompt throughput ..." line; off with --disable-log-stats, as in vLLM
  const statLogger = metrics.disableLogStats ? null : new LoggingStatLogger(mainLog.child("loggers.ts"), config.log.statsIntervalS, Array.from({ length: pipeline.numStages }, (_, i) => i), config.engine.speculativeConfig?.numSpeculativeTokens ?? null);
  if (statLogger !== null) listener.targets.push(statLogger);

  // the settings record goes to the app as it is; serve adds the resolved name and the wiring
  const app = createApp({
    ...flags, servedModelName, chat,
    peerOf: (request) => wiring.peers.get(request) ?? null,
    targetOf: (request) => wiring.targets.get(request),
    orchestrator, modelPath: config.model ?? "embedded:stories260K",
    maxBodyBytes: DEFAULT_MAX_BODY_BYTES, shutdownSignal: wiring.shutdown, log, metricsRoute: metricsRoute(recorder),
    ...(wiring.loggers.access !== null ? { accessLog: (entry) => wiring.loggers.access!.info(accessLine(entry)) } : {}),
    onHttpResponse: wiring.onHttpResponse ?? ((event) => recorder.onHttpResponse(event)),
    onToolParserInvocation: (event) => recorder.onToolParserInvocation(event),
    vision,
    devMode: wiring.devMode, sleepControl: wiring.sleepMode ? sleepable : null,
    // the engine behind sleep (a wake-up's new one) or the pipeline's own; a chain of stages has no one engine
    cacheControl: pipeline.orchestrator.resetPrefixCache !== undefined
      ? { resetPrefixCache: (running) => engine.resetPrefixCache!(running), hasExternalCache: config.engine.kvOffload != null || config.engine.kvPeer != null }
      : null,
    lora: (lora = loraAdapters(config, () => loraEngine, servedModelName)),
    ollama: await ollamaServing(config.model, modelArgumentFlags(wiring.options), (line) => mainLog.child("hub").info(line), metadata.gguf),
  });
  // a model's unload stops its engine as sleep level 2 does (nothing kept), its load wakes it; the vision encoder's
  // thread (the projector's weights) goes with it and starts again on the next image
  const engineControl = {
    stop: () => { vision?.encoder.dispose(); return sleepable?.sleep(2) ?? orchestrator.shutdown(); },
    start: () => sleepable?.wakeUp() ?? Promise.reject(new Error("this engine cannot be started again")),
  };
  return { app, orchestrator, recorder, statLogger, servedModelName, chat, detectedParsers, engine: engineControl, dispose: () => vision?.encoder.dispose(), lora };
}

/**
 * Every model's config (its entry's flags over the server's), checked now as the command line is: a bad one is one
 * line naming the model, exit 2, before anything loads.
 */
function configuredModels(entries: readonly ModelEntry[]): ConfiguredModel[] {
  return entries.map((entry) => {
    try {
      const { config } = readServeConfig(entry.options);
      readChatFlags(config.chat);
      return { entry, config };
    } catch (e) {
      if (entries.length > 1 && e instanceof CliError) throw new CliError(`model ${entry.path ?? "embedded:stories260K"}: ${e.message}`);
      throw e;
    }
  });
}

/** --keep-alive for a server of one model: given, it applies as Ollama's default; absent, the model stays (null). */
function singleKeepAlive(options: Options): number | null {
  const value = options["keep-alive"];
  if (value === undefined || value === null) return null;
  const ms = keepAliveMs(value);
  if (ms === null) throw new CliError(`--keep-alive ${String(value)}: give seconds or a duration such as 5m, 1h30m or -1`);
  return ms;
}

export async function main(options: Options): Promise<number> {
  // the server's flags first (a bad one is the command line's error), then every model's: a folder is its model
  // files, a --config file's `models:` entries bring their own flags
  const server = readServeConfig(options);
  const chain = server.chain;
  const models = configuredModels(readModelEntries(options));
  const config = models.length === 1 ? models[0]!.config : server.config;
  const oneKeepAliveMs = models.length === 1 ? singleKeepAlive(models[0]!.entry.options) : null;
  const { server: flags, metrics } = config;
  const gate = makeDeprecationGate(pkg.version, metrics.showHiddenMetricsForVersion);
  const chat = readChatFlags(config.chat);
  if (!gate.ok) throw new CliError(gate.error);
  const tracingConfig = tracingFlags(options);
  if (!tracingConfig.ok) throw new CliError(tracingConfig.error);
  const loggers = serveLoggers(config.log);
  const mainLog = loggers.main;
  for (const w of config.warnings) mainLog.warning(w);
  if (config.log.disableLogRequestsGiven) mainLog.warning("--disable-log-requests is deprecated and has no effect: requests are not logged unless --enable-log-requests is given");
  // the app's lines (aborts, internal errors) at the level each names
  const log = (line: string, level: LogLevel = "INFO"): void => mainLog.log(level, line);

  // vLLM's AsyncLLM: init_tracer("vllm.llm_engine", endpoint); one llm_request span per finished request
  const tracing = tracingConfig.value === null ? null : startTracing(tracingConfig.value, "vllm.llm_engine");
  if (tracing !== null) {
    log(`sending request traces to ${tracing.config.tracesUrl} (OTLP/HTTP)`);
    if (tracing.config.detailedTraces.length > 0) log(`--collect-detailed-traces ${tracing.config.detailedTraces.join(",")}: adds no span attributes (as in vLLM V1)`);
  }
  const shutdown = new AbortController();
  const peers = new WeakMap<Request, PeerAddress | null>();
  const targets = new WeakMap<Request, string>();
  const wiring: ModelWiring = {
    loggers, log, chat, gate: gate.value, shutdown: shutdown.signal, peers, targets, tracing, options,
    sleepMode: options["enable-sleep-mode"] === true, devMode: process.env["VLLM_SERVER_DEV_MODE"] === "1",
  };
  // several models: one recorder of the server's own series (process, HTTP), merged before every model's in /metrics
  const serverRecorder = models.length > 1 ? new MetricsRecorder({ modelName: "", maxModelLen: 0, logStats: false, enableMfuMetrics: false, deprecation: gate.value }) : null;
  const modelWiring: ModelWiring = serverRecorder !== null ? { ...wiring, engineSwap: true, onHttpResponse: (event) => serverRecorder.onHttpResponse(event) } : wiring;
  const several = serverRecorder !== null
    ? startSeveralModels(models, options, (c) => startModelServer(c, chain, { ...modelWiring, chat: readChatFlags(c.chat) }), (line) => log(line), () => serverRecorder.registry.metrics())
    : null;
  // one model: its engine can be stopped and started under its front end, for Ollama's keep_alive 0 (an unload)
  const one = several === null ? await startModelServer(config, chain, { ...wiring, engineSwap: true }) : null;
  const statLogger = one?.statLogger ?? null;
  const keeper = one === null ? null : await keepSingleModel(one.app, one.engine, {
    name: one.servedModelName, defaultKeepAliveMs: oneKeepAliveMs, log: (line) => log(line),
    onInner: (inner, outer) => {
      peers.set(inner, peers.get(outer) ?? null);
      const target = targets.get(outer);
      if (target !== undefined) targets.set(inner, target);
    },
    onEngine: (state) => { if (state === "stopped") statLogger?.stop(); else statLogger?.start(); },
  });
  const handleApp = several?.handle ?? keeper!.handle;
  const orchestrator: Pick<ModelServer["orchestrator"], "shutdown" | "isHealthy" | "deathReason"> = one?.orchestrator ?? several!;
  let http: HttpListener;
  try {
    // vLLM's log_tracing_disabled_warning: once, when a request carries trace context that nothing continues
    let warnedTraceContext = tracing !== null;
    const handle = (request: Request, peer: PeerAddress | null): Promise<Response> => {
      if (!warnedTraceContext && request.headers.has("traceparent")) { warnedTraceContext = true; log("Received a request with trace context but tracing is disabled", "WARNING"); }
      const routed = withoutRootPath(request, flags.rootPath);
      peers.set(routed, peer);
      if (routed !== request) { const url = new URL(request.url); targets.set(routed, `${url.pathname}${url.search}`); }
      return handleApp(routed);
    };
    http = await listenHttp(handle, {
      hostname: flags.host, port: flags.port, idleTimeoutS: IDLE_TIMEOUT_S, log: (line) => log(line, "ERROR"),
      ...(flags.tls !== null ? { tls: readTls(flags.tls) } : {}),
      ...(flags.uds !== null ? { unixPath: flags.uds } : {}),
    });
  } catch (e) {
    await orchestrator.shutdown();
    throw new RuntimeFailure(`cannot listen on ${flags.uds ?? `${flags.host}:${flags.port}`}: ${errorMessage(e)}`);
  }
  statLogger?.start();
  const where = `${flags.uds !== null ? `unix:${flags.uds}` : `${flags.tls !== null ? "https" : "http"}://${flags.host}:${http.port}`}${flags.rootPath ?? ""} ${servedPagesNote(flags)}`;
  if (one !== null) {
    log(`fennec ${pkg.version}: serving ${one.servedModelName} (max_model_len ${one.orchestrator.maxModelLen}) on ${where}`);
    if (one.chat.contentFormat === "auto" && one.orchestrator.tokenizer.chatContentFormat !== undefined) {
      log(`Detected the chat template content format to be '${one.orchestrator.tokenizer.chatContentFormat(one.chat.chatTemplate)}'. You can set \`--chat-template-content-format\` to override this.`);
    }
  } else {
    log(`fennec ${pkg.version}: serving ${several!.names.join(", ")} (loaded on demand) on ${where}`);
  }
  if (one?.detectedParsers) log(one.detectedParsers);
  else if (chat.enableAutoToolChoice) log(`"auto" tool choice has been enabled (tool call parser ${chat.toolCallParser}).`);

  let stopping = false;
  const stop = async (reason: string, exitCode: number): Promise<void> => {
    stopping = true;
    http.stopAccepting();
    if (flags.shutdownTimeoutS > 0 && http.numInFlight > 0) {
      log(`waiting up to ${flags.shutdownTimeoutS} s for ${http.numInFlight} in-flight request(s) (--shutdown-timeout)`);
      const timedOut = await Promise.race([http.drained().then(() => false), sleep(flags.shutdownTimeoutS * 1000).then(() => true)]);
      if (timedOut) log(`--shutdown-timeout of ${flags.shutdownTimeoutS} s passed, aborting ${http.numInFlight} request(s)`);
    }
    statLogger?.stop();
    shutdown.abort();
    await Promise.race([http.drained(), sleep(ABORT_FLUSH_MS)]);
    http.closeAll();
    await Promise.race([orchestrator.shutdown(), sleep(ENGINE_STOP_GRACE_MS)]);
    // the spans still queued go out before the process ends (vLLM shuts its provider down at exit)
    if (tracing !== null) await Promise.race([tracing.shutdown(), sleep(ENGINE_STOP_GRACE_MS)]);
    log(`stopped (${reason})`);
    process.exit(exitCode);
  };
  const onSignal = (signal: string): void => {
    if (stopping) {
      // a second signal while draining: the operator wants out now
      log(`${signal} again, exiting without waiting`, "WARNING");
      process.exit(1);
    }
    log(`${signal} received, shutting down`);
    void stop(signal, 0);
  };
  process.on("SIGINT", () => onSignal("SIGINT"));
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  // a dead engine would answer 503 forever: exit non-zero so that a supervisor restarts the server (vLLM does the same)
  const watch = setInterval(() => {
    if (stopping || orchestrator.isHealthy()) return;
    clearInterval(watch);
    log(`the engine died (${orchestrator.deathReason?.() ?? "no reason given"}); exiting with status 1 so that a supervisor can restart the server`, "ERROR");
    void stop("engine dead", 1);
  }, ENGINE_WATCH_MS);
  return -1;
}
