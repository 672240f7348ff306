/**
 * One `llm_request` span per finished generation request, as vLLM's OutputProcessor.do_tracing: started at the
 * request's arrival, under the caller's trace when the request carried `traceparent`, ended when its last output
 * arrives, with the attributes request-span.ts computes. A wrapper around the orchestrator the server calls (as
 * server/request-logger.ts), so every dialect and pipeline is traced in one place.
 * @example const orchestrator = withRequestTracing(pipeline.orchestrator, startTracing(config, "vllm.llm_engine"));
 */
import type { GenerateRequest, Orchestrator, RequestOutput } from "../frontend/orchestrator.ts";
import { nowMs } from "../util/clock.ts";
import { requestSpanAttributes } from "./request-span.ts";
import { SPAN_NAMES } from "./span-attributes.ts";
import { parentContext } from "./trace-context.ts";
import type { Tracing } from "./tracer.ts";

async function* traced(tracing: Tracing, inner: Orchestrator, request: GenerateRequest, signal: AbortSignal | undefined): AsyncGenerator<RequestOutput> {
  const completionTokens = new Map<number, number>();
  let last: RequestOutput | null = null;
  try {
    for await (const output of inner.generate(request, signal)) {
      for (const o of output.outputs) completionTokens.set(o.index, o.numGeneratedTokens);
      last = output;
      yield output;
    }
  } finally {
    // vLLM traces finished requests only (an abort or an engine error ends no span)
    if (last?.finished === true) {
      const span = tracing.startSpan(SPAN_NAMES.request, request.arrivalMs, parentContext(request.traceHeaders));
      let numCompletionTokens = 0;
      for (const n of completionTokens.values()) numCompletionTokens += n;
      span.setAttributes(requestSpanAttributes({
        requestId: request.externalRequestId ?? request.requestId, sampling: request.sampling, times: last.times,
        numPromptTokens: last.numPromptTokens, numCompletionTokens, finishedMs: nowMs(),
      }));
      span.end();
    }
  }
}

export function withRequestTracing(inner: Orchestrator, tracing: Tracing): Orchestrator {
  const generate: Orchestrator["generate"] = (request, signal) => traced(tracing, inner, request, signal);
  // a proxy, so every other member of the orchestrator (now and later) is the inner one's
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === "generate") return generate;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
