/**
 * Everything the HTTP layer needs, built once by `fennec serve` (or a test) and passed to createApp: no singletons.
 * The flags' part is config/server-settings.ts's one record, passed as it is (absent fields take vLLM's defaults, so
 * tests give only what they check); the rest is wiring: the orchestrator, the loggers, the hooks of the metrics.
 * @example createApp({ orchestrator, servedModelName: "stories260K", ... })
 */
import type { Orchestrator } from "../frontend/orchestrator.ts";
import type { LogLevel } from "../util/logger.ts";
import type { AccessEntry } from "./access-log.ts";
import type { GrammarChecker } from "../grammar/grammar-checker.ts";
import type { ServerSettings } from "../config/server-settings.ts";

export interface ServerOptions extends Partial<ServerSettings> {
  readonly orchestrator: Orchestrator;
  /** the model's name in the API: the settings' servedModelName, else the model argument or file's name (serve resolves it) */
  readonly servedModelName: string;
  /** the model path shown as `root` in /v1/models */
  readonly modelPath: string;
  /** --api-key: bearer token required on /v1 paths; null = open (apiKeys absent = [apiKey]) */
  readonly apiKey: string | null;
  /** --enable-per-request-metrics */
  readonly enablePerRequestMetrics: boolean;
  /** --enable-force-include-usage */
  readonly forceIncludeUsage: boolean;
  /** bodies larger than this are refused with 413 */
  readonly maxBodyBytes: number;
  /** aborted when the server shuts down: in-flight streams end with an error event */
  readonly shutdownSignal: AbortSignal;
  /** one line per call (server log; the level defaults to INFO); tests pass a collector */
  readonly log: (line: string, level?: LogLevel) => void;
  /** one call per answered request (the uvicorn-style access line); absent = no access log */
  readonly accessLog?: (entry: AccessEntry) => void;
  /** the peer address of a request (serve's node:http listener knows it; Bun.serve's requestIP is the fallback) */
  readonly peerOf?: (request: Request) => { readonly address: string; readonly port: number } | null;
  /** the request target as the client sent it, for the access line (before --root-path was taken off); absent = the URL's */
  readonly targetOf?: (request: Request) => string | undefined;
  /** the /metrics route (observability helper), mounted when given; it stays open without the API key */
  readonly metricsRoute?: import("elysia").AnyElysia;
  /** chat templates, tool calling and reasoning (vLLM's chat flags); default: the model's template, no parsers */
  readonly chat?: import("./chat-serving.ts").ChatServingOptions;
  /** checks structured-output grammars before the engine sees them; default: one started on first use */
  readonly grammarChecker?: GrammarChecker;
  /** called per tool-parser run (vllm:tool_call_parser_invocations_total) */
  readonly onToolParserInvocation?: (event: import("../metrics/recorder.ts").ToolParserInvocation) => void;
  /** Ollama's model routes: the served GGUF's metadata and a Hub download (serve hands them in); absent = none */
  readonly ollama?: import("./ollama/ollama-serving.ts").OllamaServing;
  /** VLLM_SERVER_DEV_MODE=1: vLLM's dev routes (/sleep, /wake_up, /is_sleeping) are mounted */
  readonly devMode?: boolean;
  /** --enable-sleep-mode: what the sleep routes drive; null or absent = sleep mode off */
  readonly sleepControl?: import("./sleep-routes.ts").SleepControl | null;
  /** VLLM_SERVER_DEV_MODE=1: what POST /reset_prefix_cache drives; null or absent = no single engine */
  readonly cacheControl?: import("./cache-routes.ts").CacheControl | null;
  /** images in: the vision encoder's client and the media flags; absent = a text-only model (image parts are refused) */
  readonly vision?: import("./openai/chat-completion/image-inputs.ts").VisionServing | null;
  /** --enable-lora: the served adapters (lora-routes.ts); null or absent = LoRA off */
  readonly lora?: import("./lora-routes.ts").LoraAdapters | null;
  /** called once per answered request (the recorder's HTTP metrics) */
  readonly onHttpResponse?: (event: import("../metrics/recorder.ts").HttpResponseEvent) => void;
}

/** 16 MiB: far above any prompt a context window can hold, small enough that a flood of bodies cannot exhaust memory. */
export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;
