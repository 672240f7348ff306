/**
 * --otlp-traces-endpoint and --collect-detailed-traces as the typed tracing config (config/tracing-config.ts), for
 * serve and proxy; OTEL_EXPORTER_OTLP_TRACES_PROTOCOL is read here, as vLLM's exporter reads it.
 */
import { tracingConfig, type TracingConfig } from "../config/tracing-config.ts";
import type { Result } from "../util/result.ts";
import { stringOrNull } from "./flag-values.ts";
import type { Options } from "./flags.ts";

export function tracingFlags(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<TracingConfig | null> {
  return tracingConfig({
    endpoint: stringOrNull(options["otlp-traces-endpoint"]),
    detailedTraces: stringOrNull(options["collect-detailed-traces"]),
    protocol: env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
  });
}
