/**
 * Everything the HTTP layer needs, built once by `fennec serve` (or a test) and passed to createApp: no singletons.
 * @example createApp({ orchestrator, servedModelName: "stories260K", ... })
 */
import type { Orchestrator } from "../frontend/orchestrator.ts";
import type { LogLevel } from "../util/logger.ts";
import type { AccessEntry } from "./access-log.ts";
import type { CorsConfig } from "./cors.ts";
import type { GenerationDefaults } from "./request-defaults.ts";
import type { GrammarChecker } from "../grammar/grammar-checker.ts";
import type { StructuredOutputsServerConfig } from "./openai/structured-outputs.ts";

export interface ServerOptions {
  readonly orchestrator: Orchestrator;
  /** the model's name in the API (--served-model-name, else the model file's name) */
  readonly servedModelName: string;
  /** the model path shown as `root` in /v1/models */
  readonly modelPath: string;
  /** --api-key: bearer token required on /v1 paths; null = open */
  readonly apiKey: string | null;
  /** --enable-per-request-metrics */
  readonly enablePerRequestMetrics: boolean;
  /** --enable-force-include-usage */
  readonly forceIncludeUsage: boolean;
  /** --enable-prompt-tokens-details: usage.prompt_tokens_details = {cached_tokens} instead of null */
  readonly enablePromptTokensDetails?: boolean;
  /** --enable-server-load-tracking: GET /load counts the generation requests in flight */
  readonly enableServerLoadTracking?: boolean;
  /** --enable-request-id-headers: every response carries X-Request-Id (the request's, else a new 32-hex id) */
  readonly enableRequestIdHeaders?: boolean;
  /** --disable-web-ui: no chat / metrics page at `/` */
  readonly disableWebUi?: boolean;
  /** --allowed-origins / --allowed-methods / --allowed-headers / --allow-credentials; default vLLM's (all allowed) */
  readonly cors?: CorsConfig;
  /** the other --served-model-name names: requests may use them, answers carry servedModelName */
  readonly servedModelAliases?: readonly string[];
  /** every --api-key (apiKey is the first); absent = [apiKey] */
  readonly apiKeys?: readonly string[];
  /** --generation-config / --override-generation-config: defaults of omitted sampling fields */
  readonly generationDefaults?: GenerationDefaults;
  /** --max-logprobs (vLLM's default 20) */
  readonly maxLogprobs?: number;
  /** --disable-fastapi-docs: no /docs, no /openapi.json */
  readonly disableDocs?: boolean;
  /** --root-path: the prefix a proxy in front adds (routes answer with and without it; the OpenAPI server URL) */
  readonly rootPath?: string;
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
  /** --return-tokens-as-token-ids: logprob tokens as `token_id:{id}` unless the request says otherwise */
  readonly returnTokensAsTokenIds?: boolean;
  /** --structured-outputs-config (default: any whitespace) */
  readonly structuredOutputs?: StructuredOutputsServerConfig;
  /** called per tool-parser run (vllm:tool_call_parser_invocations_total) */
  readonly onToolParserInvocation?: (event: import("../metrics/recorder.ts").ToolParserInvocation) => void;
  /** called once per answered request (the recorder's HTTP metrics) */
  readonly onHttpResponse?: (event: import("../metrics/recorder.ts").HttpResponseEvent) => void;
}

/** 16 MiB: far above any prompt a context window can hold, small enough that a flood of bodies cannot exhaust memory. */
export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;
