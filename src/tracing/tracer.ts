/**
 * The tracer provider of one fennec process (vllm/tracing/otel.py init_otel_tracer): an OTLP/HTTP protobuf exporter
 * behind a batch span processor, the resource vLLM sets (vllm.instrumenting_module_name, vllm.process_id) plus
 * service.name, shut down (flushing what is queued) when the process stops.
 * @example const tracing = startTracing(config, "vllm.llm_engine"); ...; await tracing.shutdown();
 */
import { SpanKind, trace, type Attributes, type Context, type Span, type Tracer } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import type { TracingConfig } from "../config/tracing-config.ts";
import { RESOURCE_ATTRIBUTES } from "./span-attributes.ts";

/** A short batch delay: a request's span reaches the receiver about a second after the request ends. */
const EXPORT_DELAY_MS = 1000;

export interface Tracing {
  readonly config: TracingConfig;
  /** a SERVER span started at `startMs` (Unix ms) under `parent` */
  startSpan(name: string, startMs: number, parent: Context, attributes?: Attributes): Span;
  /** `span`'s context, for the trace headers of a request it makes */
  contextOf(span: Span, parent: Context): Context;
  /** sends every ended span, then stops the exporter */
  shutdown(): Promise<void>;
}

export function startTracing(config: TracingConfig, instrumentingModule: string, serviceName = "fennec"): Tracing {
  const exporter = new OTLPTraceExporter({ url: config.tracesUrl });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": serviceName, [RESOURCE_ATTRIBUTES.instrumentingModule]: instrumentingModule, [RESOURCE_ATTRIBUTES.processId]: process.pid }),
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: EXPORT_DELAY_MS })],
  });
  const tracer: Tracer = provider.getTracer(instrumentingModule);
  return {
    config,
    startSpan: (name, startMs, parent, attributes) => tracer.startSpan(name, { kind: SpanKind.SERVER, startTime: startMs, ...(attributes ? { attributes } : {}) }, parent),
    contextOf: (span, parent) => trace.setSpan(parent, span),
    shutdown: () => provider.shutdown(),
  };
}
