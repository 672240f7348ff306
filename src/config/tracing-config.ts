/**
 * Request tracing's settings (vllm/config/observability.py: otlp_traces_endpoint, collect_detailed_traces), checked
 * as vLLM checks them. fennec exports over OTLP/HTTP (protobuf) only: vLLM's default protocol is gRPC, so a
 * deployment that sets OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc is refused with a line that says what to use.
 * @example const tracing = tracingConfig({ endpoint: "http://collector:4318", detailedTraces: null, protocol: undefined });
 */
import { err, ok, type Result } from "../util/result.ts";

/** vLLM's DetailedTraceModules; a comma list of them is accepted too (arg_utils.py splits a single comma string). */
export const DETAILED_TRACE_MODULES = ["model", "worker", "all"] as const;
export type DetailedTraceModule = (typeof DETAILED_TRACE_MODULES)[number];

/** The OTLP protocols vLLM's get_span_exporter knows, and whether fennec can speak each. */
const PROTOCOLS: Readonly<Record<string, boolean>> = { "http/protobuf": true, grpc: false };

/** The path an OTLP/HTTP receiver takes traces on (the exporter's default when only host:port is given). */
export const OTLP_TRACES_PATH = "/v1/traces";

export interface TracingConfig {
  /** the full OTLP/HTTP traces URL the exporter posts to */
  readonly tracesUrl: string;
  /** as given (vLLM's otlp_traces_endpoint); the child processes fennec starts get it as OTEL_EXPORTER_OTLP_TRACES_ENDPOINT */
  readonly endpoint: string;
  readonly detailedTraces: readonly DetailedTraceModule[];
}

export interface TracingInput {
  readonly endpoint: string | null;
  /** --collect-detailed-traces as given: "model", "worker,model", ... */
  readonly detailedTraces: string | null;
  /** env OTEL_EXPORTER_OTLP_TRACES_PROTOCOL */
  readonly protocol: string | undefined;
}

/** null when tracing is off (no endpoint). */
export function tracingConfig(input: TracingInput): Result<TracingConfig | null> {
  const modules: DetailedTraceModule[] = [];
  if (input.detailedTraces !== null) {
    for (const part of input.detailedTraces.split(",").map((p) => p.trim())) {
      if (!(DETAILED_TRACE_MODULES as readonly string[]).includes(part)) return err(`--collect-detailed-traces: invalid choice "${part}" (choose from ${DETAILED_TRACE_MODULES.join(", ")}, or a comma list of them)`);
      modules.push(part as DetailedTraceModule);
    }
    // vllm/config/observability.py __post_init__
    if (input.endpoint === null) return err("collect_detailed_traces requires `--otlp-traces-endpoint` to be set.");
  }
  if (input.endpoint === null) return ok(null);
  const protocol = input.protocol ?? "http/protobuf";
  if (PROTOCOLS[protocol] === undefined) return err(`Unsupported OTLP protocol '${protocol}' is configured`);
  if (!PROTOCOLS[protocol]) return err(`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=${protocol}: fennec exports traces over OTLP/HTTP only; set it to http/protobuf and give the receiver's HTTP endpoint (port 4318 on a Collector)`);
  const text = /^[a-z][a-z0-9+.-]*:\/\//i.test(input.endpoint) ? input.endpoint : `http://${input.endpoint}`;
  let url: URL;
  try { url = new URL(text); } catch { return err(`--otlp-traces-endpoint "${input.endpoint}" is not a URL: give http://host:4318 or http://host:4318/v1/traces`); }
  if (url.protocol !== "http:" && url.protocol !== "https:") return err(`--otlp-traces-endpoint "${input.endpoint}": only http:// and https:// OTLP receivers are supported`);
  // a bare host:port is the receiver's base (as OTEL_EXPORTER_OTLP_ENDPOINT); a path is used as given
  if (url.pathname === "/" || url.pathname === "") url.pathname = OTLP_TRACES_PATH;
  return ok({ tracesUrl: url.toString(), endpoint: input.endpoint, detailedTraces: modules });
}
