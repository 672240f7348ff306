/**
 * The server log of serve and proxy, from vLLM's flags and environment variables (VLLM_LOGGING_LEVEL,
 * VLLM_LOG_STATS_INTERVAL, --log-format, --uvicorn-log-level, --disable-uvicorn-access-log, request logging).
 */
import { parseLogLevel, type LogFormat, type LogLevel } from "../util/logger.ts";
import { err, ok, type Result } from "../util/result.ts";
import type { Options } from "./flags.ts";
import { intOrNull, stringOrNull } from "./flag-values.ts";

/** The server log (vLLM's names: VLLM_LOGGING_LEVEL, VLLM_LOG_STATS_INTERVAL, --uvicorn-log-level, ...). */
export interface LogConfig {
  /** VLLM_LOGGING_LEVEL: fennec's own lines */
  readonly level: LogLevel;
  readonly format: LogFormat;
  /** --uvicorn-log-level: the access lines (written at INFO) */
  readonly accessLevel: LogLevel;
  readonly accessLog: boolean;
  readonly enableLogRequests: boolean;
  /** --enable-log-outputs: with --enable-log-requests, each finished choice's text and ids too */
  readonly enableLogOutputs: boolean;
  /** --disable-log-requests was given (deprecated in vLLM: one warning) */
  readonly disableLogRequestsGiven: boolean;
  readonly maxLogLen: number | null;
  /** VLLM_LOG_STATS_INTERVAL, seconds between engine stats lines (vLLM's default 10) */
  readonly statsIntervalS: number;
}

export function logConfig(options: Options, env: Readonly<Record<string, string | undefined>>): Result<LogConfig> {
  const rawLevel = env["VLLM_LOGGING_LEVEL"];
  const level = rawLevel === undefined || rawLevel === "" ? "INFO" : parseLogLevel(rawLevel);
  if (level === null) return err(`VLLM_LOGGING_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL (got "${rawLevel}")`);
  const rawInterval = env["VLLM_LOG_STATS_INTERVAL"];
  // vLLM's envs.VLLM_LOG_STATS_INTERVAL default: 10 s
  const statsIntervalS = rawInterval === undefined || rawInterval === "" ? 10 : Number(rawInterval);
  if (!Number.isFinite(statsIntervalS) || statsIntervalS <= 0) return err(`VLLM_LOG_STATS_INTERVAL must be a positive number of seconds (got "${rawInterval}")`);
  // vLLM logs outputs through the request logger, which only --enable-log-requests creates
  if (options["enable-log-outputs"] === true && options["enable-log-requests"] !== true) return err("--enable-log-outputs needs --enable-log-requests (the outputs are logged by the request logger, as in vLLM)");
  return ok({
    level, format: options["log-format"] === "json" ? "json" : "text",
    accessLevel: parseLogLevel(stringOrNull(options["uvicorn-log-level"]) ?? "info") ?? "INFO",
    accessLog: options["disable-uvicorn-access-log"] !== true,
    enableLogRequests: options["enable-log-requests"] === true,
    enableLogOutputs: options["enable-log-outputs"] === true,
    disableLogRequestsGiven: options["disable-log-requests"] === true,
    maxLogLen: intOrNull(options["max-log-len"]),
    statsIntervalS,
  });
}
