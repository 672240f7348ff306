/**
 * `serve`'s flags as one typed config (the server's settings, the engine's arguments, stats, stages, logs), checked
 * before anything is loaded, as vLLM checks before the model (cli_args.py validate_parsed_serve_args).
 */
import type { EngineArgs } from "../config/engine-args.ts";
import type { MediaSettings } from "../config/media-settings.ts";
import { mediaFlags } from "./media-flags.ts";
import type { ServerSettings, TlsSettings } from "../config/server-settings.ts";
import type { StageChainConfig } from "../config/stage-chain-config.ts";
import { structuredOutputsConfig } from "../config/structured-outputs-config.ts";
import { err, ok, type Result } from "../util/result.ts";
import { chatTemplateFlags, type ChatTemplateFlags } from "./chat-template-flags.ts";
import { engineConfig } from "./engine-config.ts";
import { vllmFates } from "./fate-notes.ts";
import type { FlagValue, Options } from "./flags.ts";
import { intOrNull, jsonList, stringOrNull } from "./flag-values.ts";
import { generationDefaults } from "./generation-defaults.ts";
import { logConfig, type LogConfig } from "./log-config.ts";
import { stageChainConfig } from "./stage-chain-flags.ts";

/** vLLM's startup check, word for word (vllm/entrypoints/openai/cli_args.py: validate_parsed_serve_args). */
export const PER_REQUEST_METRICS_NEED_STATS =
  "Error: --enable-per-request-metrics requires engine statistics logging; remove --disable-log-stats to enable per-request metrics.";

/** The stats flags: /metrics engine series, the omni tables, MFU counters, hidden-metric versions. */
export interface MetricsConfig {
  readonly disableLogStats: boolean;
  readonly logStats: boolean;
  readonly enableMfuMetrics: boolean;
  readonly showHiddenMetricsForVersion: string | null;
}

export interface ServeConfig {
  /** GGUF path; null = the embedded default model */
  readonly model: string | null;
  readonly engine: EngineArgs;
  /** vLLM's start-up warnings about the engine flags (the KV offload tier's), logged once */
  readonly warnings: readonly string[];
  readonly server: ServerSettings;
  readonly metrics: MetricsConfig;
  readonly stages: StageChainConfig;
  readonly log: LogConfig;
  /** the chat-template, tool-calling and reasoning flags (checked by commands/chat-flags.ts) */
  readonly chat: ChatTemplateFlags;
  /** images in: the projector and where image URLs may come from */
  readonly media: MediaSettings;
}

function tlsSettings(options: Options): Result<TlsSettings | null> {
  const keyFile = stringOrNull(options["ssl-keyfile"]);
  const certFile = stringOrNull(options["ssl-certfile"]);
  const caFile = stringOrNull(options["ssl-ca-certs"]);
  const certReqs = Number(options["ssl-cert-reqs"] ?? 0) as 0 | 1 | 2;
  if (keyFile === null && certFile === null) {
    if (caFile !== null || certReqs !== 0) return err("--ssl-ca-certs and --ssl-cert-reqs need --ssl-keyfile and --ssl-certfile");
    return ok(null);
  }
  if (keyFile === null || certFile === null) return err("TLS needs both --ssl-keyfile and --ssl-certfile");
  if (certReqs !== 0 && caFile === null) return err("--ssl-cert-reqs 1 or 2 checks client certificates against --ssl-ca-certs: give it");
  return ok({ keyFile, certFile, caFile, certReqs });
}

/**
 * `serve`'s flags as one typed config, checked before anything is loaded (vLLM checks before the model too).
 * `env` supplies VLLM_API_KEY, which vLLM reads when --api-key is not given.
 * @example const config = serveConfig(options); if (!config.ok) throw new CliError(config.error);
 */
export function serveConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<ServeConfig> {
  const listOf = (v: FlagValue | undefined): readonly string[] | null => (Array.isArray(v) ? v : typeof v === "string" ? [v] : null);
  // an empty VLLM_API_KEY is no key (Python's `or`), an empty --api-key an error
  const apiKeys = listOf(options["api-key"]) ?? (env["VLLM_API_KEY"] ? [env["VLLM_API_KEY"]] : []);
  const servedNames = listOf(options["served-model-name"]) ?? [];
  if (apiKeys.includes("")) return err("--api-key must not be empty");
  if (servedNames.includes("")) return err("--served-model-name must not be empty");
  const rootPath = stringOrNull(options["root-path"]);
  if (rootPath !== null && rootPath !== "" && !rootPath.startsWith("/")) return err(`--root-path must start with / (got "${rootPath}")`);
  const origins = jsonList("allowed-origins", options["allowed-origins"] ?? '["*"]');
  if (!origins.ok) return origins;
  const methods = jsonList("allowed-methods", options["allowed-methods"] ?? '["*"]');
  if (!methods.ok) return methods;
  const headers = jsonList("allowed-headers", options["allowed-headers"] ?? '["*"]');
  if (!headers.ok) return headers;
  const tls = tlsSettings(options);
  if (!tls.ok) return tls;
  const generation = generationDefaults(options);
  if (!generation.ok) return generation;
  const notes = vllmFates("serve", options);
  if (!notes.ok) return notes;
  const structuredOutputs = structuredOutputsConfig(stringOrNull(options["structured-outputs-config"]));
  if (!structuredOutputs.ok) return structuredOutputs;
  const server: ServerSettings = {
    host: stringOrNull(options.host) ?? "127.0.0.1",
    port: Number(options.port),
    servedModelName: servedNames[0] ?? null,
    apiKey: apiKeys[0] ?? null,
    apiKeys,
    servedModelAliases: servedNames.slice(1),
    uds: stringOrNull(options.uds),
    rootPath: rootPath === null || rootPath === "" || rootPath === "/" ? null : rootPath.replace(/\/+$/, ""),
    cors: { allowedOrigins: origins.value, allowedMethods: methods.value, allowedHeaders: headers.value, allowCredentials: options["allow-credentials"] === true },
    tls: tls.value,
    disableDocs: options["disable-fastapi-docs"] === true,
    enableTokenizerInfoEndpoint: options["enable-tokenizer-info-endpoint"] === true,
    generationDefaults: generation.value,
    maxLogprobs: Number(options["max-logprobs"] ?? 20),
    enablePerRequestMetrics: options["enable-per-request-metrics"] === true,
    forceIncludeUsage: options["enable-force-include-usage"] === true,
    enablePromptTokensDetails: options["enable-prompt-tokens-details"] === true,
    enableServerLoadTracking: options["enable-server-load-tracking"] === true,
    enableRequestIdHeaders: options["enable-request-id-headers"] === true,
    disableWebUi: options["disable-web-ui"] === true,
    structuredOutputs: structuredOutputs.value,
    returnTokensAsTokenIds: options["return-tokens-as-token-ids"] === true,
    shutdownTimeoutS: intOrNull(options["shutdown-timeout"]) ?? 0,
  };
  const metrics: MetricsConfig = {
    disableLogStats: options["disable-log-stats"] === true,
    logStats: options["log-stats"] === true,
    enableMfuMetrics: options["enable-mfu-metrics"] === true,
    showHiddenMetricsForVersion: stringOrNull(options["show-hidden-metrics-for-version"]),
  };
  if (server.enablePerRequestMetrics && metrics.disableLogStats) return err(PER_REQUEST_METRICS_NEED_STATS);
  const stages = stageChainConfig(options);
  if (!stages.ok) return stages;
  const log = logConfig(options, env);
  if (!log.ok) return log;
  const engine = engineConfig(options, env);
  if (!engine.ok) return engine;
  const media = mediaFlags(options, env);
  if (!media.ok) return media;
  return ok({ model: stringOrNull(options.model), chat: chatTemplateFlags(options), engine: engine.value.engine, warnings: [...notes.value, ...engine.value.warnings], server, metrics, stages: stages.value, log: log.value, media: media.value });
}
