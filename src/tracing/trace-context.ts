/**
 * W3C trace context in and out of HTTP headers (vllm/tracing/utils.py TRACE_HEADERS, extract_trace_headers; the
 * parent is built with the W3C TraceContextTextMapPropagator as vLLM's extract_trace_context does). Only
 * `traceparent` and `tracestate` travel.
 * @example const parent = parentContext(request.traceHeaders); tracer.startSpan("llm_request", {}, parent);
 */
import { ROOT_CONTEXT, type Context } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";

export const TRACE_HEADERS = ["traceparent", "tracestate"] as const;
export type TraceHeaders = Readonly<Partial<Record<(typeof TRACE_HEADERS)[number], string>>>;

const propagator = new W3CTraceContextPropagator();

/** The trace headers of a request; null when it carries none (vLLM passes None then). */
export function extractTraceHeaders(headers: Headers): TraceHeaders | null {
  const out: Partial<Record<(typeof TRACE_HEADERS)[number], string>> = {};
  for (const name of TRACE_HEADERS) { const v = headers.get(name); if (v !== null) out[name] = v; }
  return Object.keys(out).length === 0 ? null : out;
}

/** The context a span continues: the caller's trace when the headers carry a valid traceparent, else a new trace. */
export function parentContext(headers: TraceHeaders | null | undefined): Context {
  if (!headers) return ROOT_CONTEXT;
  return propagator.extract(ROOT_CONTEXT, headers, {
    keys: (carrier) => Object.keys(carrier),
    get: (carrier, key) => (carrier as Record<string, string | undefined>)[key],
  });
}

/** Writes `context`'s span as traceparent (and tracestate) into outgoing headers, replacing what was there. */
export function injectTraceHeaders(context: Context, headers: Headers): void {
  for (const name of TRACE_HEADERS) headers.delete(name);
  propagator.inject(context, headers, { set: (carrier, key, value) => carrier.set(key, value) });
}
