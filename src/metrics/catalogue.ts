/**
 * Every Prometheus metric fennec exposes, defined once (reference vllm-metrics-and-api.md §1.3, §1.5, §2.3): vLLM's exact
 * names, help texts, labels and bucket families. Counters carry their exposed `_total` name (prom-client does not add
 * it, prometheus_client does). Every series gets `model_name` and `engine` first (except where `defaultLabels` says
 * otherwise); enumerated extras list their values so the series are pre-created at 0.
 * Deprecated aliases name their replacement; deprecation.ts decides from `deprecatedIn` whether they show.
 */
import type { BucketFamily } from "./buckets.ts";

export type MetricType = "counter" | "gauge" | "histogram" | "summary";

/** The CLI flag (config.ts) that must be on for a metric to exist; engine metrics also need stats not disabled. */
export type MetricFlag = "enable-mfu-metrics";

export interface MetricDef {
  readonly name: string;
  readonly type: MetricType;
  /** exact vLLM help text, without the deprecation note (added by deprecation.ts) */
  readonly help: string;
  /** labels after model_name and engine, each with every value it can take (series are pre-created) */
  readonly extraLabels?: Readonly<Record<string, readonly string[]>>;
  /** "engine-only": vLLM's info gauges carry `engine` but no `model_name`; "none": the HTTP metrics */
  readonly defaultLabels?: "model-engine" | "engine-only" | "none";
  /** "http": prometheus-fastapi-instrumentator's request metrics, kept with --disable-log-stats, created per request */
  readonly scope?: "engine" | "http";
  /** labels whose values are only known per request (no pre-created series), after the default labels */
  readonly requestLabels?: readonly string[];
  /** info gauges: labels whose values come from the running config (value is always 1) */
  readonly infoLabels?: readonly string[];
  readonly buckets?: BucketFamily;
  readonly flag?: MetricFlag;
  /** "X.Y": shown with a DEPRECATED note in X.Y, hidden in X.Y+1, removed from X.Y+2 */
  readonly deprecatedIn?: string;
  /** the metric to use instead: a catalogue key (a string, not MetricKey, to keep the table's type non-circular) */
  readonly replacedBy?: string;
}

export const FINISHED_REASONS = ["stop", "length", "abort", "error", "repetition"] as const;
export const PROMPT_TOKEN_SOURCES = ["local_compute", "local_cache_hit", "external_kv_transfer"] as const;
export const WAITING_REASONS = ["capacity", "deferred"] as const;
export const SLEEP_STATES = ["awake", "weights_offloaded", "discard_all"] as const;
/** the CacheConfig attributes fennec has (vLLM prints every attribute of its CacheConfig) */
export const CACHE_CONFIG_LABELS = [
  "block_size", "cache_dtype", "enable_prefix_caching", "num_gpu_blocks", "num_cpu_blocks", "kv_cache_size_tokens",
  "kv_cache_max_concurrency", "sliding_window", "is_attention_free",
] as const;

const METRICS = {
  // gauges (scheduler state, set on every step)
  num_requests_running: { name: "vllm:num_requests_running", type: "gauge", help: "Number of requests in model execution batches." },
  num_requests_waiting: { name: "vllm:num_requests_waiting", type: "gauge", help: "Number of requests waiting to be processed." },
  num_requests_waiting_by_reason: {
    name: "vllm:num_requests_waiting_by_reason", type: "gauge", extraLabels: { reason: WAITING_REASONS },
    help: "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
  },
  engine_sleep_state: {
    name: "vllm:engine_sleep_state", type: "gauge", extraLabels: { sleep_state: SLEEP_STATES },
    help: "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
  },
  kv_cache_usage_perc: { name: "vllm:kv_cache_usage_perc", type: "gauge", help: "KV-cache usage. 1 means 100 percent usage." },
  cache_config_info: {
    name: "vllm:cache_config_info", type: "gauge", defaultLabels: "engine-only", infoLabels: CACHE_CONFIG_LABELS, help: "Information of the LLMEngine CacheConfig",
  },
  // counters
  prefix_cache_queries: { name: "vllm:prefix_cache_queries_total", type: "counter", help: "Prefix cache queries, in terms of number of queried tokens." },
  prefix_cache_hits: { name: "vllm:prefix_cache_hits_total", type: "counter", help: "Prefix cache hits, in terms of number of cached tokens." },
  // vLLM registers these whether or not a KV connector / multi-modal model exists; in fennec they stay at 0
  external_prefix_cache_queries: {
    name: "vllm:external_prefix_cache_queries_total", type: "counter",
    help: "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.",
  },
  external_prefix_cache_hits: {
    name: "vllm:external_prefix_cache_hits_total", type: "counter",
    help: "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.",
  },
  mm_cache_queries: { name: "vllm:mm_cache_queries_total", type: "counter", help: "Multi-modal cache queries, in terms of number of queried items." },
  mm_cache_hits: { name: "vllm:mm_cache_hits_total", type: "counter", help: "Multi-modal cache hits, in terms of number of cached items." },
  num_preemptions: { name: "vllm:num_preemptions_total", type: "counter", help: "Cumulative number of preemption from the engine." },
  prompt_tokens: { name: "vllm:prompt_tokens_total", type: "counter", help: "Number of prefill tokens processed." },
  prompt_tokens_by_source: {
    name: "vllm:prompt_tokens_by_source_total", type: "counter", extraLabels: { source: PROMPT_TOKEN_SOURCES }, help: "Number of prompt tokens by source.",
  },
  prompt_tokens_cached: { name: "vllm:prompt_tokens_cached_total", type: "counter", help: "Number of cached prompt tokens (local + external)." },
  generation_tokens: { name: "vllm:generation_tokens_total", type: "counter", help: "Number of generation tokens processed." },
  request_success: {
    name: "vllm:request_success_total", type: "counter", extraLabels: { finished_reason: FINISHED_REASONS }, help: "Count of successfully processed requests.",
  },
  // histograms
  request_prompt_tokens: { name: "vllm:request_prompt_tokens", type: "histogram", buckets: "request_tokens", help: "Number of prefill tokens processed." },
  request_generation_tokens: { name: "vllm:request_generation_tokens", type: "histogram", buckets: "request_tokens", help: "Number of generation tokens processed." },
  iteration_tokens: { name: "vllm:iteration_tokens_total", type: "histogram", buckets: "iteration_tokens", help: "Histogram of number of tokens per engine_step." },
  request_max_num_generation_tokens: {
    name: "vllm:request_max_num_generation_tokens", type: "histogram", buckets: "request_tokens", help: "Histogram of maximum number of requested generation tokens.",
  },
  request_params_n: { name: "vllm:request_params_n", type: "histogram", buckets: "request_params_n", help: "Histogram of the n request parameter." },
  request_params_max_tokens: {
    name: "vllm:request_params_max_tokens", type: "histogram", buckets: "request_tokens", help: "Histogram of the max_tokens request parameter.",
  },
  time_to_first_token: {
    name: "vllm:time_to_first_token_seconds", type: "histogram", buckets: "time_to_first_token", help: "Histogram of time to first token in seconds.",
  },
  inter_token_latency: {
    name: "vllm:inter_token_latency_seconds", type: "histogram", buckets: "inter_token_latency", help: "Histogram of inter-token latency in seconds.",
  },
  request_time_per_output_token: {
    name: "vllm:request_time_per_output_token_seconds", type: "histogram", buckets: "inter_token_latency",
    help: "Histogram of time_per_output_token_seconds per request.",
  },
  e2e_request_latency: { name: "vllm:e2e_request_latency_seconds", type: "histogram", buckets: "request_latency", help: "Histogram of e2e request latency in seconds." },
  request_queue_time: {
    name: "vllm:request_queue_time_seconds", type: "histogram", buckets: "request_latency", help: "Histogram of time spent in WAITING phase for request.",
  },
  request_inference_time: {
    name: "vllm:request_inference_time_seconds", type: "histogram", buckets: "request_latency", help: "Histogram of time spent in RUNNING phase for request.",
  },
  request_prefill_time: {
    name: "vllm:request_prefill_time_seconds", type: "histogram", buckets: "request_latency", help: "Histogram of time spent in PREFILL phase for request.",
  },
  request_decode_time: {
    name: "vllm:request_decode_time_seconds", type: "histogram", buckets: "request_latency", help: "Histogram of time spent in DECODE phase for request.",
  },
  request_prefill_kv_computed_tokens: {
    name: "vllm:request_prefill_kv_computed_tokens", type: "histogram", buckets: "request_tokens",
    help: "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
  },
  // MFU (--enable-mfu-metrics), estimated from the model's shapes
  estimated_flops_per_gpu: {
    name: "vllm:estimated_flops_per_gpu_total", type: "counter", flag: "enable-mfu-metrics",
    help: "Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).",
  },
  estimated_read_bytes_per_gpu: {
    name: "vllm:estimated_read_bytes_per_gpu_total", type: "counter", flag: "enable-mfu-metrics",
    help: "Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).",
  },
  estimated_write_bytes_per_gpu: {
    name: "vllm:estimated_write_bytes_per_gpu_total", type: "counter", flag: "enable-mfu-metrics",
    help: "Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).",
  },
  // legacy names old dashboards still use (vLLM deprecated them in 0.9 / 0.11; fennec carries them from 0.1)
  gpu_cache_usage_perc: {
    name: "vllm:gpu_cache_usage_perc", type: "gauge", help: "GPU KV-cache usage. 1 means 100 percent usage.",
    deprecatedIn: "0.1", replacedBy: "kv_cache_usage_perc",
  },
  gpu_prefix_cache_queries: {
    name: "vllm:gpu_prefix_cache_queries_total", type: "counter", help: "GPU prefix cache queries, in terms of number of queried tokens.",
    deprecatedIn: "0.1", replacedBy: "prefix_cache_queries",
  },
  gpu_prefix_cache_hits: {
    name: "vllm:gpu_prefix_cache_hits_total", type: "counter", help: "GPU prefix cache hits, in terms of number of cached tokens.",
    deprecatedIn: "0.1", replacedBy: "prefix_cache_hits",
  },
  time_per_output_token: {
    name: "vllm:time_per_output_token_seconds", type: "histogram", buckets: "inter_token_latency",
    help: "Histogram of time per output token in seconds.", deprecatedIn: "0.1", replacedBy: "inter_token_latency",
  },
  // HTTP metrics of prometheus-fastapi-instrumentator, which vLLM mounts (reference §1.8); status is grouped as 2xx/4xx/5xx
  http_requests_total: {
    name: "http_requests_total", type: "counter", scope: "http", defaultLabels: "none", requestLabels: ["method", "status", "handler"],
    help: "Total number of requests by method, status and handler.",
  },
  http_request_size_bytes: {
    name: "http_request_size_bytes", type: "summary", scope: "http", defaultLabels: "none", requestLabels: ["handler"],
    help: "Content length of incoming requests by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. ",
  },
  http_response_size_bytes: {
    name: "http_response_size_bytes", type: "summary", scope: "http", defaultLabels: "none", requestLabels: ["handler"],
    help: "Content length of outgoing responses by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. ",
  },
  http_request_duration_highr_seconds: {
    name: "http_request_duration_highr_seconds", type: "histogram", scope: "http", defaultLabels: "none", buckets: "http_duration_highr",
    help: "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. ",
  },
  http_request_duration_seconds: {
    name: "http_request_duration_seconds", type: "histogram", scope: "http", defaultLabels: "none", requestLabels: ["method", "handler"], buckets: "http_duration",
    help: "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important. ",
  },
} as const satisfies Record<string, MetricDef>;

/** Paths vLLM's instrumentator leaves out of the HTTP metrics. */
export const HTTP_EXCLUDED_HANDLERS: readonly string[] = ["/metrics", "/health", "/load", "/ping", "/version", "/server_info"];

export type MetricKey = keyof typeof METRICS;

/** The catalogue, in exposition order. */
export const CATALOGUE: Readonly<Record<MetricKey, MetricDef>> = METRICS;

export const METRIC_KEYS = Object.keys(METRICS) as MetricKey[];

/** Label names of a metric, default labels first (vLLM's order). */
export function labelNamesOf(def: MetricDef): string[] {
  const defaults = def.defaultLabels === "none" ? [] : def.defaultLabels === "engine-only" ? ["engine"] : ["model_name", "engine"];
  return [...defaults, ...(def.requestLabels ?? []), ...Object.keys(def.extraLabels ?? {}), ...(def.infoLabels ?? [])];
}
