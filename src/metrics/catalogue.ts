/**
 * Every Prometheus metric fennec exposes, defined once (vllm/v1/metrics/loggers.py PrometheusStatLogger, vllm/v1/metrics/perf.py for MFU): vLLM's exact
 * names, help texts, labels and bucket families. Counters carry their exposed `_total` name (prom-client does not add
 * it, prometheus_client does). Every series gets `model_name` and `engine` first (except where `defaultLabels` says
 * otherwise); enumerated extras list their values so the series are pre-created at 0.
 * Deprecated aliases name their replacement; deprecation.ts decides from `deprecatedIn` whether they show.
 */
import type { BucketFamily } from "./buckets.ts";
import type { SaveOutcome } from "../engine/stats.ts";

export type MetricType = "counter" | "gauge" | "histogram" | "summary";

/** The CLI flag (command-line/flags.ts) that must be on for a metric to exist; engine metrics also need stats not disabled. */
export type MetricFlag = "enable-mfu-metrics" | "speculative-config" | "tool-call-parser" | "enable-lora";

export interface MetricDef {
  readonly name: string;
  readonly type: MetricType;
  /** exact vLLM help text, without the deprecation note (added by deprecation.ts) */
  readonly help: string;
  /** labels after model_name and engine, each with every value it can take (series are pre-created) */
  readonly extraLabels?: Readonly<Record<string, readonly string[]>>;
  /** "engine-only": vLLM's info gauges carry `engine` but no `model_name`; "none": the HTTP metrics */
  readonly defaultLabels?: "model-engine" | "engine-only" | "model-only" | "none";
  /** "http": prometheus-fastapi-instrumentator's request metrics, kept with --disable-log-stats, created per request */
  readonly scope?: "engine" | "http" | "frontend";
  /** labels whose values are only known per request (no pre-created series), after the default labels */
  readonly requestLabels?: readonly string[];
  /** info gauges: labels whose values come from the running config (value is always 1) */
  readonly infoLabels?: readonly string[];
  readonly buckets?: BucketFamily;
  readonly flag?: MetricFlag;
  /** only with this KV connector configured (the offload tier's series) */
  readonly connector?: "OffloadingConnector" | "SimpleCPUOffloadConnector" | "NixlConnector";
  /** speculative decoding: an extra `position` label, "0" .. "k-1" for k = num_speculative_tokens (pre-created) */
  readonly positionLabel?: true;
  /** "X.Y": shown with a DEPRECATED note in X.Y, hidden in X.Y+1, removed from X.Y+2 */
  readonly deprecatedIn?: string;
  /** the metric to use instead: a catalogue key (a string, not MetricKey, to keep the table's type non-circular) */
  readonly replacedBy?: string;
}

export const TOOL_PARSER_MODES = ["streaming", "non_streaming"] as const;
export const TOOL_PARSER_OUTCOMES = ["tool_call", "no_tool_call"] as const;
export const TOOL_PARSER_REQUEST_TYPES = ["chat_completions", "responses", "other"] as const;
export const FINISHED_REASONS = ["stop", "length", "abort", "error", "repetition"] as const;
export const PROMPT_TOKEN_SOURCES = ["local_compute", "local_cache_hit", "external_kv_transfer"] as const;
export const WAITING_REASONS = ["capacity", "deferred"] as const;
export const SLEEP_STATES = ["awake", "weights_offloaded", "discard_all"] as const;
export const LOAD_PHASES = ["issued", "completed"] as const;
export const TRANSFER_TYPES = ["CPU_to_GPU", "GPU_to_CPU"] as const;
/** vllm:simple_kv_offload_save_outcomes_total's `outcome` values: every SaveOutcome of the engine's records
 * (vllm/v1/simple_kv_offload/metrics.py BoundaryStoreStats), in vLLM's order */
export const SAVE_OUTCOMES = [
  "stored", "skipped_already_cached", "skipped_in_flight", "dropped_null_block", "dropped_not_hashed", "dropped_cpu_full", "dropped_request_gone",
] as const satisfies readonly SaveOutcome[];
/** Compile-time exhaustiveness: a SaveOutcome the engine adds and SAVE_OUTCOMES lacks fails the type check here. */
type SaveOutcomesComplete<T extends true> = T;
export type SaveOutcomesListed = SaveOutcomesComplete<[Exclude<SaveOutcome, (typeof SAVE_OUTCOMES)[number]>] extends [never] ? true : false>;
/** vllm:simple_kv_offload_info's labels (values from the running connector) */
export const SIMPLE_KV_OFFLOAD_INFO_LABELS = ["backend", "page_cache", "lazy_offload", "capacity_blocks"] as const;
/** the CacheConfig attributes fennec has (vLLM prints every attribute of its CacheConfig) */
export const CACHE_CONFIG_LABELS = [
  "block_size", "cache_dtype", "enable_prefix_caching", "num_gpu_blocks", "num_cpu_blocks", "kv_cache_size_tokens",
  "kv_cache_max_concurrency", "sliding_window", "is_attention_free", "kv_offloading_size", "kv_offloading_backend",
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
  // vLLM's PrometheusStatLogger: only with --enable-lora, no model_name / engine, the value the time of the update
  // (set_to_current_time), label values comma-joined adapter names; the Inference Extension's EPP reads these names
  lora_requests_info: {
    name: "vllm:lora_requests_info", type: "gauge", defaultLabels: "none", requestLabels: ["max_lora", "waiting_lora_adapters", "running_lora_adapters"], flag: "enable-lora",
    help: "Running stats on lora requests.",
  },
  cache_config_info: {
    name: "vllm:cache_config_info", type: "gauge", defaultLabels: "engine-only", infoLabels: CACHE_CONFIG_LABELS, help: "Information of the LLMEngine CacheConfig",
  },
  // counters
  prefix_cache_queries: { name: "vllm:prefix_cache_queries_total", type: "counter", help: "Prefix cache queries, in terms of number of queried tokens." },
  prefix_cache_hits: { name: "vllm:prefix_cache_hits_total", type: "counter", help: "Prefix cache hits, in terms of number of cached tokens." },
  // vLLM registers these whether or not a KV connector / multi-modal model exists; they move with the offload tier
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
  // SimpleCPUOffloadConnector (vllm/v1/simple_kv_offload/metrics.py)
  simple_kv_offload_save_outcomes: {
    name: "vllm:simple_kv_offload_save_outcomes_total", type: "counter", connector: "SimpleCPUOffloadConnector", extraLabels: { outcome: SAVE_OUTCOMES },
    help: "Store admission decisions in SimpleCPUOffloadConnector, by outcome. Outcomes classify eager-mode boundary hand-off stores; lazy-mode stores are not classified.",
  },
  simple_kv_offload_load_blocks: {
    name: "vllm:simple_kv_offload_load_blocks_total", type: "counter", connector: "SimpleCPUOffloadConnector", extraLabels: { phase: LOAD_PHASES },
    help: "KV blocks involved in offload loads by phase: issued when dispatched to workers, completed when the load finished successfully.",
  },
  simple_kv_offload_used_blocks: {
    name: "vllm:simple_kv_offload_used_blocks", type: "gauge", connector: "SimpleCPUOffloadConnector",
    help: "Offload-pool blocks currently pinned by in-flight transfers or cache hits (capacity minus free). Evictable cached blocks are not counted; capacity_blocks is on vllm:simple_kv_offload_info.",
  },
  simple_kv_offload_pending_store_blocks: {
    name: "vllm:simple_kv_offload_pending_store_blocks", type: "gauge", connector: "SimpleCPUOffloadConnector",
    help: "Offload blocks in pending stores: queued for dispatch, issued to workers, or awaiting release after a cache reset. A persistently growing value indicates a stuck transfer.",
  },
  simple_kv_offload_info: {
    name: "vllm:simple_kv_offload_info", type: "gauge", connector: "SimpleCPUOffloadConnector", infoLabels: SIMPLE_KV_OFFLOAD_INFO_LABELS,
    help: "SimpleCPUOffloadConnector deployment facts. Value is always 1. backend is cpu or disk; page_cache and lazy_offload are true/false; capacity_blocks is the offload pool size.",
  },
  // NixlConnector: fennec's connector between instances under vLLM's name (nixl/stats.py; help texts as vLLM's, the
  // double space of num_descriptors included)
  nixl_xfer_time: {
    name: "vllm:nixl_xfer_time_seconds", type: "histogram", connector: "NixlConnector", buckets: "nixl_xfer_time",
    help: "Histogram of transfer duration for NIXL KV Cache transfers.",
  },
  nixl_post_time: {
    name: "vllm:nixl_post_time_seconds", type: "histogram", connector: "NixlConnector", buckets: "nixl_post_time",
    help: "Histogram of transfer post time for NIXL KV Cache transfers.",
  },
  nixl_bytes_transferred: {
    name: "vllm:nixl_bytes_transferred", type: "histogram", connector: "NixlConnector", buckets: "nixl_bytes",
    help: "Histogram of bytes transferred per NIXL KV Cache transfers.",
  },
  nixl_num_descriptors: {
    name: "vllm:nixl_num_descriptors", type: "histogram", connector: "NixlConnector", buckets: "nixl_descriptors",
    help: "Histogram of number of descriptors per NIXL  KV Cache transfers.",
  },
  nixl_num_failed_transfers: {
    name: "vllm:nixl_num_failed_transfers_total", type: "counter", connector: "NixlConnector", help: "Number of failed NIXL KV Cache transfers.",
  },
  nixl_num_failed_notifications: {
    name: "vllm:nixl_num_failed_notifications_total", type: "counter", connector: "NixlConnector", help: "Number of failed NIXL KV Cache notifications.",
  },
  nixl_num_kv_expired_reqs: {
    name: "vllm:nixl_num_kv_expired_reqs_total", type: "counter", connector: "NixlConnector",
    help: "Number of requests that had their KV expire. NOTE: This metric is tracked on the P instance.",
  },
  // OffloadingConnector, the native offload (--kv-offloading-size; offloading/metrics.py, kv_offload/cpu/spec.py)
  kv_offload_load_bytes: { name: "vllm:kv_offload_load_bytes_total", type: "counter", connector: "OffloadingConnector", help: "Total bytes loaded from offload storage to GPU." },
  kv_offload_load_time: { name: "vllm:kv_offload_load_time_total", type: "counter", connector: "OffloadingConnector", help: "Total load time from offload storage to GPU, in seconds." },
  kv_offload_load_size: {
    name: "vllm:kv_offload_load_size", type: "histogram", connector: "OffloadingConnector", buckets: "kv_offload_size", help: "Histogram of KV offload load operation size, in bytes.",
  },
  kv_offload_store_bytes: { name: "vllm:kv_offload_store_bytes_total", type: "counter", connector: "OffloadingConnector", help: "Total bytes stored from GPU to offload storage." },
  kv_offload_store_time: { name: "vllm:kv_offload_store_time_total", type: "counter", connector: "OffloadingConnector", help: "Total store time from GPU to offload storage, in seconds." },
  kv_offload_store_size: {
    name: "vllm:kv_offload_store_size", type: "histogram", connector: "OffloadingConnector", buckets: "kv_offload_size", help: "Histogram of KV offload store operation size, in bytes.",
  },
  kv_offload_lookup_sync_delay: {
    name: "vllm:kv_offload_lookup_sync_delay_seconds", type: "histogram", connector: "OffloadingConnector", buckets: "kv_offload_lookup_sync",
    help: "Histogram of the time spent in a single offload lookup call, in seconds.",
  },
  // fennec's lookups never defer (the tier's index is in memory): pre-created, stays empty
  kv_offload_lookup_async_delay: {
    name: "vllm:kv_offload_lookup_async_delay_seconds", type: "histogram", connector: "OffloadingConnector", buckets: "kv_offload_lookup_async",
    help: "Histogram of time between a request's offload lookup first deferring and the following lookup resolving, or request finish, in seconds.",
  },
  kv_offload_allocation_failure: {
    name: "vllm:kv_offload_allocation_failure_total", type: "counter", connector: "OffloadingConnector", help: "Number of KV offload store allocation attempts that failed.",
  },
  kv_offload_cpu_cache_usage_perc: {
    name: "vllm:kv_offload_cpu_cache_usage_perc", type: "gauge", connector: "OffloadingConnector",
    help: "Fraction of CPU KV-cache space currently pinned by active transfers (0.0 = idle, 1.0 = saturated). Sustained high values indicate transfers (stores or promotions) may be dropped due to insufficient capacity.",
  },
  kv_offload_cpu_cache_write_usage_perc: {
    name: "vllm:kv_offload_cpu_cache_write_usage_perc", type: "gauge", connector: "OffloadingConnector",
    help: "Fraction of CPU KV-cache space currently pinned by in-flight stores that have not yet completed (0.0 = idle, 1.0 = saturated).",
  },
  kv_offload_cpu_cache_read_usage_perc: {
    name: "vllm:kv_offload_cpu_cache_read_usage_perc", type: "gauge", connector: "OffloadingConnector",
    help: "Fraction of CPU KV-cache space currently pinned by in-flight loads that have not yet completed (0.0 = idle, 1.0 = saturated).",
  },
  kv_offload_cpu_allocation_size: {
    name: "vllm:kv_offload_cpu_allocation_size", type: "histogram", connector: "OffloadingConnector", buckets: "kv_offload_allocation",
    help: "Histogram of the number of CPU blocks requested by each KV offload prepare_store call.",
  },
  // vLLM still feeds the legacy names for the CPU spec "during the migration to the flat metric names"
  kv_offload_total_bytes: {
    name: "vllm:kv_offload_total_bytes_total", type: "counter", connector: "OffloadingConnector", extraLabels: { transfer_type: TRANSFER_TYPES },
    help: "Number of bytes offloaded by KV connector",
  },
  kv_offload_total_time: {
    name: "vllm:kv_offload_total_time_total", type: "counter", connector: "OffloadingConnector", extraLabels: { transfer_type: TRANSFER_TYPES },
    help: "Total time measured by all KV offloading operations",
  },
  kv_offload_size: {
    name: "vllm:kv_offload_size", type: "histogram", connector: "OffloadingConnector", buckets: "kv_offload_size", extraLabels: { transfer_type: TRANSFER_TYPES },
    help: "Histogram of KV offload transfer size, in bytes.",
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
  // speculative decoding (vLLM vllm/v1/spec_decode/metrics.py), only with --speculative-config
  spec_decode_num_drafts: { name: "vllm:spec_decode_num_drafts_total", type: "counter", flag: "speculative-config", help: "Number of spec decoding drafts." },
  spec_decode_num_draft_tokens: { name: "vllm:spec_decode_num_draft_tokens_total", type: "counter", flag: "speculative-config", help: "Number of draft tokens." },
  spec_decode_num_accepted_tokens: {
    name: "vllm:spec_decode_num_accepted_tokens_total", type: "counter", flag: "speculative-config", help: "Number of accepted tokens.",
  },
  spec_decode_num_accepted_tokens_per_pos: {
    name: "vllm:spec_decode_num_accepted_tokens_per_pos_total", type: "counter", flag: "speculative-config", positionLabel: true,
    help: "Accepted tokens per draft position.",
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
  // HTTP metrics of prometheus-fastapi-instrumentator, which vLLM mounts; status is grouped as 2xx/4xx/5xx
  // the API server's own counter, not an engine's: model_name only, there whenever --tool-call-parser is set
  tool_call_parser_invocations: {
    name: "vllm:tool_call_parser_invocations_total", type: "counter", scope: "frontend", defaultLabels: "model-only", flag: "tool-call-parser",
    extraLabels: { mode: TOOL_PARSER_MODES, outcome: TOOL_PARSER_OUTCOMES, request_type: TOOL_PARSER_REQUEST_TYPES },
    help: "Total number of ToolParser invocations. Non-streaming increments once per choice; streaming increments once per delta.",
  },
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
  const defaults = def.defaultLabels === "none" ? [] : def.defaultLabels === "engine-only" ? ["engine"] : def.defaultLabels === "model-only" ? ["model_name"] : ["model_name", "engine"];
  return [...defaults, ...(def.requestLabels ?? []), ...Object.keys(def.extraLabels ?? {}), ...(def.positionLabel ? ["position"] : []), ...(def.infoLabels ?? [])];
}
