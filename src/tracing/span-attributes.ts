/**
 * The span attribute names vLLM emits on its per-request span (vllm/tracing/utils.py SpanAttributes), one table so no
 * name is spelled twice. Durations are in seconds, as vLLM's.
 */
export const SPAN_ATTRIBUTES = {
  requestId: "gen_ai.request.id",
  requestTopP: "gen_ai.request.top_p",
  requestMaxTokens: "gen_ai.request.max_tokens",
  requestTemperature: "gen_ai.request.temperature",
  requestN: "gen_ai.request.n",
  usagePromptTokens: "gen_ai.usage.prompt_tokens",
  usageCompletionTokens: "gen_ai.usage.completion_tokens",
  timeToFirstToken: "gen_ai.latency.time_to_first_token",
  e2e: "gen_ai.latency.e2e",
  timeInQueue: "gen_ai.latency.time_in_queue",
  timeInModelPrefill: "gen_ai.latency.time_in_model_prefill",
  timeInModelDecode: "gen_ai.latency.time_in_model_decode",
  timeInModelInference: "gen_ai.latency.time_in_model_inference",
} as const;

/** vLLM's span names: the engine's per-request span (output_processor.py do_tracing), and fennec proxy's own. */
export const SPAN_NAMES = { request: "llm_request", proxyRequest: "pd_proxy_request" } as const;

/** The resource attributes vLLM's tracer sets (vllm/tracing/otel.py init_otel_tracer). */
export const RESOURCE_ATTRIBUTES = { instrumentingModule: "vllm.instrumenting_module_name", processId: "vllm.process_id" } as const;
