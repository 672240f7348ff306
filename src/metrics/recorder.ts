/**
 * The metrics recorder: a StatsListener that turns engine stats into vLLM's Prometheus series (vllm/v1/metrics/loggers.py
 * PrometheusStatLogger.record), on its own prom-client Registry (no global state: one per server or test).
 * Rules kept from vLLM:
 * - every series of every engine (and every enumerated label value) exists at 0 from start-up;
 * - TTFT and ITL come per step (one ITL sample per step per request, not per token);
 * - iteration_tokens_total is observed once per step that produced output, counting the prompt tokens computed since
 *   the previous such step plus the step's new tokens;
 * - finished-request metrics skip requests whose client went away;
 * - `--disable-log-stats` registers no engine series at all (process metrics stay).
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, Summary } from "prom-client";
import type { KvOffloadFacts, KvOffloadStepStats, KvPeerStepStats } from "../engine/stats.ts";
import type { FinishedRequestStats, IterationStats, StatsListener } from "../frontend/iteration-stats.ts";
import type { ModelConfig } from "../model/model-config.ts";
import { bucketsFor } from "./buckets.ts";
import { CACHE_CONFIG_LABELS, CATALOGUE, FINISHED_REASONS, SAVE_OUTCOMES, HTTP_EXCLUDED_HANDLERS, labelNamesOf, METRIC_KEYS, type MetricDef, type MetricKey } from "./catalogue.ts";
import { helpWithDeprecation, isVisible, type DeprecationGate } from "./deprecation.ts";
import { renderExposition } from "./exposition.ts";
import { shapeCost, stepCost, type ModelShapeCost } from "./mfu.ts";

export interface RecorderOptions {
  /** the `model_name` label (served model name) */
  readonly modelName: string;
  readonly maxModelLen: number;
  /** one `engine` label per engine (stage); default [0] */
  readonly engineIndices?: readonly number[];
  /** --enable-lora: vllm:lora_requests_info exists */
  readonly enableLora?: boolean;
  /** --tool-call-parser is set: vllm:tool_call_parser_invocations_total exists */
  readonly toolCallParser?: boolean;
  /** false with --disable-log-stats: no vllm:* engine series */
  readonly logStats: boolean;
  readonly enableMfuMetrics: boolean;
  readonly deprecation: DeprecationGate;
  /** process_* and nodejs_* metrics (prom-client defaults) */
  readonly processMetrics?: boolean;
  /** http_* request metrics (vLLM's instrumentator); default true */
  readonly httpMetrics?: boolean;
  /** for the MFU estimate: the model, and its average stored bytes per weight / per KV element (default 4: f32, an
   * upper bound for quantized weights) */
  readonly model?: { readonly config: ModelConfig; readonly bytesPerWeight?: number; readonly bytesPerKvElement?: number };
  /** --speculative-config's num_speculative_tokens (k): registers the spec-decode series, positions 0..k-1; null = off */
  readonly numSpeculativeTokens?: number | null;
  /** CacheConfig facts for vllm:cache_config_info, per engine */
  readonly cacheConfig?: Readonly<Partial<Record<(typeof CACHE_CONFIG_LABELS)[number], string | number | boolean | null>>>;
  /** the KV offload tier, when configured: its connector's series exist, with these deployment facts */
  readonly kvOffload?: KvOffloadFacts | null;
  /** NixlConnector (fennec's connector between instances) configured: the vllm:nixl_* series exist */
  readonly kvPeerConnector?: "NixlConnector" | null;
}

type AnyMetric = Counter<string> | Gauge<string> | Histogram<string> | Summary<string>;

/** One answered HTTP request, for the instrumentator's metrics. */
/** One run of the tool-call parser over a choice (non-streaming) or a delta (streaming). */
export interface ToolParserInvocation {
  readonly mode: "streaming" | "non_streaming";
  readonly outcome: "tool_call" | "no_tool_call";
}

export interface HttpResponseEvent {
  /** the route's path, or null when no route matched */
  readonly handler: string | null;
  readonly method: string;
  readonly status: number;
  readonly durationS: number;
  /** Content-Length values; null when the header was absent */
  readonly requestBytes: number | null;
  readonly responseBytes: number | null;
}
type Labels = Record<string, string>;

/** Python str() of a label value, as vLLM prints CacheConfig fields. */
function pythonString(value: string | number | boolean | null | undefined): string {
  if (value === null || value === undefined) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  return String(value);
}

/** Every combination of the metric's enumerated extra labels (spec-decode positions 0..k-1). */
function extraLabelCombinations(def: MetricDef, numSpeculativeTokens: number): Labels[] {
  let combos: Labels[] = [{}];
  const positions: Record<string, readonly string[]> = def.positionLabel ? { position: Array.from({ length: numSpeculativeTokens }, (_, i) => String(i)) } : {};
  const labels: Record<string, readonly string[]> = { ...def.extraLabels, ...positions };
  for (const [name, values] of Object.entries(labels)) {
    combos = combos.flatMap((c) => values.map((v) => ({ ...c, [name]: v })));
  }
  return combos;
}

export class MetricsRecorder implements StatsListener {
  readonly registry = new Registry();
  private readonly metrics = new Map<MetricKey, AnyMetric>();
  /** engines whose series exist (pre-created at start-up, or when a stage first reports) */
  private readonly engineLabels: string[];
  /** per engine: prompt tokens computed in steps that produced no output yet (chunked prefill) */
  private readonly pendingPromptTokens = new Map<number, number>();
  private readonly mfuCost: ModelShapeCost | null;
  private meanContextTokens = 0;
  private numFinished = 0;
  /** the latest vllm:lora_requests_info stamp (Unix seconds) */
  private loraStampS = 0;
  /** per engine label: when its series were created (Unix seconds), for the `_created` samples */
  private readonly createdS = new Map<string, number>();
  /** when the recorder (and its HTTP series) came to be: the `_created` time of series with no engine label */
  private readonly startedS = Date.now() / 1000;

  constructor(private readonly options: RecorderOptions) {
    this.engineLabels = (options.engineIndices ?? [0]).map(String);
    if (options.processMetrics ?? true) {
      collectDefaultMetrics({ register: this.registry });
      // Bun has no event-loop delay histogram (these read NaN there), and prom-client's `nodejs_active_*_total`
      // gauges break the Prometheus naming lint (a gauge ending in _total): both are left out
      for (const metric of this.registry.getMetricsAsArray()) {
        const lintBreaking = metric.name.endsWith("_total") && !(metric instanceof Counter);
        if (metric.name.startsWith("nodejs_eventloop_lag") || lintBreaking) this.registry.removeSingleMetric(metric.name);
      }
    }
    this.mfuCost = options.enableMfuMetrics && options.model
      ? shapeCost(options.model.config, options.model.bytesPerWeight ?? 4, options.model.bytesPerKvElement ?? 4)
      : null;
    // HTTP metrics exist with or without engine stats (vLLM's instrumentator is independent of --disable-log-stats)
    for (const key of METRIC_KEYS) if (CATALOGUE[key].scope === "http" && (options.httpMetrics ?? true)) this.metrics.set(key, this.create(CATALOGUE[key]));
    // vLLM's tool-parser counter lives in the API server: there with a parser, with or without engine stats
    if (options.toolCallParser === true) {
      const metric = this.create(CATALOGUE.tool_call_parser_invocations) as Counter<string>;
      this.metrics.set("tool_call_parser_invocations", metric);
      for (const extra of extraLabelCombinations(CATALOGUE.tool_call_parser_invocations, 0)) metric.inc({ model_name: options.modelName, ...extra }, 0);
    }
    if (!options.logStats) return;
    for (const key of METRIC_KEYS) {
      const def = CATALOGUE[key];
      if (def.scope === "http" || def.scope === "frontend") continue;
      if (def.flag === "enable-mfu-metrics" && !options.enableMfuMetrics) continue;
      if (def.connector !== undefined && def.connector !== (options.kvOffload?.connector ?? options.kvPeerConnector)) continue;
      if (def.flag === "speculative-config" && !options.numSpeculativeTokens) continue;
      if (def.flag === "enable-lora" && options.enableLora !== true) continue;
      if (!isVisible(def.deprecatedIn, options.deprecation)) continue;
      this.metrics.set(key, this.create(def));
    }
    for (const engine of this.engineLabels) this.precreate(engine);
  }

  private create(def: MetricDef): AnyMetric {
    const replacement = def.replacedBy === undefined ? undefined : CATALOGUE[def.replacedBy as MetricKey]?.name;
    const config = {
      name: def.name,
      help: helpWithDeprecation(def.help, def.deprecatedIn, replacement, this.options.deprecation),
      labelNames: labelNamesOf(def),
      registers: [this.registry],
    };
    switch (def.type) {
      case "counter": return new Counter(config);
      case "gauge": return new Gauge(config);
      case "histogram": return new Histogram({ ...config, buckets: [...bucketsFor(def.buckets ?? "request_latency", this.options.maxModelLen)] });
      // Python's Summary has no quantiles: only _count and _sum
      case "summary": return new Summary({ ...config, percentiles: [] });
    }
  }

  /** vLLM creates every child at start-up, so dashboards see 0 before the first request. */
  /** `withInfo`: the CacheConfig facts describe the configured engines, not a stage that shows up later */
  private precreate(engine: string, withInfo = true): void {
    this.createdS.set(engine, Date.now() / 1000);
    for (const [key, metric] of this.metrics) {
      const def = CATALOGUE[key];
      if (def.scope === "http" || def.scope === "frontend") continue;
      // created lazily with the first step that reports adapters (vLLM: no series before a scheduler update)
      if (def.flag === "enable-lora") continue;
      if (def.infoLabels !== undefined) {
        if (!withInfo) continue;
        if (key === "simple_kv_offload_info") {
          // vLLM's label values are lower-case strings here ("true"/"false"), not Python str() of a bool
          const o = this.options.kvOffload!;
          (metric as Gauge<string>).set({
            model_name: this.options.modelName, engine, backend: o.backend, page_cache: String(o.backend === "disk" && o.pageCache),
            lazy_offload: String(o.lazy), capacity_blocks: String(o.capacityBlocks),
          }, 1);
          continue;
        }
        const info: Labels = { engine };
        for (const name of def.infoLabels) info[name] = pythonString(this.options.cacheConfig?.[name as (typeof CACHE_CONFIG_LABELS)[number]]);
        (metric as Gauge<string>).set(info, 1);
        continue;
      }
      for (const extra of extraLabelCombinations(def, this.options.numSpeculativeTokens ?? 0)) {
        const labels = { model_name: this.options.modelName, engine, ...extra };
        if (metric instanceof Histogram) metric.zero(labels);
        else if (metric instanceof Counter) metric.inc(labels, 0);
        else if (metric instanceof Gauge) metric.set(labels, key === "engine_sleep_state" && extra["sleep_state"] === "awake" ? 1 : 0);
      }
    }
  }

  private labels(engineIndex: number, extra: Labels = {}): Labels {
    return { model_name: this.options.modelName, engine: String(engineIndex), ...extra };
  }

  private inc(key: MetricKey, labels: Labels, value: number): void {
    const metric = this.metrics.get(key);
    if (metric instanceof Counter && value > 0) metric.inc(labels, value);
  }

  private set(key: MetricKey, labels: Labels, value: number): void {
    const metric = this.metrics.get(key);
    if (metric instanceof Gauge) metric.set(labels, value);
  }

  private observe(key: MetricKey, labels: Labels, value: number): void {
    const metric = this.metrics.get(key);
    if (metric instanceof Histogram) metric.observe(labels, value);
  }

  /** vllm:engine_sleep_state: 1 on the state the engine is in, 0 on the others (sleep mode's routes change it) */
  setSleepState(state: "awake" | "weights_offloaded" | "discard_all"): void {
    const metric = this.metrics.get("engine_sleep_state");
    if (!(metric instanceof Gauge)) return;
    for (const engine of this.engineLabels) {
      for (const s of ["awake", "weights_offloaded", "discard_all"]) metric.set({ model_name: this.options.modelName, engine, sleep_state: s }, s === state ? 1 : 0);
    }
  }

  onStep(stats: IterationStats): void {
    if (!this.options.logStats) return;
    // a pipeline stage the recorder was not told about: give it the full set of series too
    const engineLabel = String(stats.engineIndex);
    if (!this.engineLabels.includes(engineLabel)) {
      this.engineLabels.push(engineLabel);
      this.precreate(engineLabel, false);
    }
    const labels = this.labels(stats.engineIndex);
    this.set("num_requests_running", labels, stats.numRunning);
    this.set("num_requests_waiting", labels, stats.numWaiting);
    // the reasons split numWaiting (vLLM: their sum is vllm:num_requests_waiting)
    const deferred = Math.min(stats.numWaitingDeferred ?? 0, stats.numWaiting);
    this.set("num_requests_waiting_by_reason", this.labels(stats.engineIndex, { reason: "capacity" }), stats.numWaiting - deferred);
    this.set("num_requests_waiting_by_reason", this.labels(stats.engineIndex, { reason: "deferred" }), deferred);
    this.set("kv_cache_usage_perc", labels, stats.kvCacheUsage);
    if (stats.lora !== undefined) {
      // every update stamps the current label combination with the time; old combinations stay (vLLM's gauge). Strictly
      // increasing, so two updates within one millisecond still leave the newest combination the largest value (the
      // endpoint picker reads the largest as the current one)
      this.loraStampS = Math.max(Date.now() / 1000, this.loraStampS + 1e-6);
      this.set("lora_requests_info", {
        max_lora: String(stats.lora.maxLoras), waiting_lora_adapters: stats.lora.waiting.join(","), running_lora_adapters: stats.lora.running.join(","),
      }, this.loraStampS);
    }
    this.set("gpu_cache_usage_perc", labels, stats.kvCacheUsage);
    this.inc("prefix_cache_queries", labels, stats.prefixCacheQueries);
    this.inc("prefix_cache_hits", labels, stats.prefixCacheHits);
    if (stats.kvOffload) this.onOffloadStep(stats.kvOffload, stats.engineIndex);
    if (stats.kvPeer) this.onPeerStep(stats.kvPeer, stats.engineIndex);
    this.inc("gpu_prefix_cache_queries", labels, stats.prefixCacheQueries);
    this.inc("gpu_prefix_cache_hits", labels, stats.prefixCacheHits);
    this.inc("num_preemptions", labels, stats.numPreempted);
    // prompt tokens: computed, prefix-cache hits looked up this step, and KV received over a pipeline edge
    // (vLLM: the sources sum to prompt_tokens; cached = local hits + external)
    // KV that came over a pipeline edge or back from the offload tier
    const external = (stats.numExternalKvTokens ?? 0) + (stats.kvOffload?.externalHits ?? 0) + (stats.kvPeer?.externalHits ?? 0);
    this.inc("prompt_tokens", labels, stats.numPromptTokens + stats.prefixCacheHits + external);
    this.inc("prompt_tokens_by_source", this.labels(stats.engineIndex, { source: "local_compute" }), stats.numPromptTokens);
    this.inc("prompt_tokens_by_source", this.labels(stats.engineIndex, { source: "local_cache_hit" }), stats.prefixCacheHits);
    this.inc("prompt_tokens_by_source", this.labels(stats.engineIndex, { source: "external_kv_transfer" }), external);
    this.inc("prompt_tokens_cached", labels, stats.prefixCacheHits + external);
    this.inc("generation_tokens", labels, stats.numGenerationTokens);
    for (const ttft of stats.timeToFirstTokensS) this.observe("time_to_first_token", labels, ttft);
    for (const itl of stats.interTokenLatenciesS) {
      this.observe("inter_token_latency", labels, itl);
      this.observe("time_per_output_token", labels, itl);
    }
    const pending = (this.pendingPromptTokens.get(stats.engineIndex) ?? 0) + stats.numPromptTokens;
    if (stats.numGenerationTokens > 0) {
      this.observe("iteration_tokens", labels, pending + stats.numGenerationTokens);
      this.pendingPromptTokens.set(stats.engineIndex, 0);
    } else {
      this.pendingPromptTokens.set(stats.engineIndex, pending);
    }
    const spec = stats.specDecoding;
    if (spec) {
      this.inc("spec_decode_num_drafts", labels, spec.numDrafts);
      this.inc("spec_decode_num_draft_tokens", labels, spec.numDraftTokens);
      this.inc("spec_decode_num_accepted_tokens", labels, spec.numAcceptedTokens);
      spec.numAcceptedTokensPerPos.forEach((n, position) => this.inc("spec_decode_num_accepted_tokens_per_pos", this.labels(stats.engineIndex, { position: String(position) }), n));
    }
    if (this.mfuCost !== null) {
      // tokens the forward pass computed: prompt tokens, plus one per decoding request (a request's first token is
      // sampled from its prefill, so it is not a computed decode token)
      // (speculative decoding also computes every rejected draft: drafted - accepted more positions)
      const numRejected = spec ? spec.numDraftTokens - spec.numAcceptedTokens : 0;
      const numComputedTokens = stats.numPromptTokens + stats.numGenerationTokens - stats.timeToFirstTokensS.length + numRejected;
      const cost = stepCost(this.mfuCost, numComputedTokens, this.meanContextTokens);
      this.inc("estimated_flops_per_gpu", labels, cost.flops);
      this.inc("estimated_read_bytes_per_gpu", labels, cost.readBytes);
      this.inc("estimated_write_bytes_per_gpu", labels, cost.writeBytes);
    }
  }

  /** The connector between instances: one observation per successful transfer (vLLM NixlPromMetrics.observe). */
  private onPeerStep(p: KvPeerStepStats, engineIndex: number): void {
    const labels = this.labels(engineIndex);
    this.inc("external_prefix_cache_queries", labels, p.externalQueries);
    this.inc("external_prefix_cache_hits", labels, p.externalHits);
    for (const t of p.transfers) {
      this.observe("nixl_xfer_time", labels, t.seconds);
      this.observe("nixl_post_time", labels, t.postSeconds);
      this.observe("nixl_bytes_transferred", labels, t.bytes);
      this.observe("nixl_num_descriptors", labels, t.descriptors);
    }
    this.inc("nixl_num_failed_transfers", labels, p.failedTransfers);
    this.inc("nixl_num_failed_notifications", labels, p.failedNotifications);
    this.inc("nixl_num_kv_expired_reqs", labels, p.expiredRequests);
  }

  /** The offload tier's step: counters by the step's deltas, gauges to the state after it (vLLM drains once a step). */
  private onOffloadStep(o: KvOffloadStepStats, engineIndex: number): void {
    const labels = this.labels(engineIndex);
    this.inc("external_prefix_cache_queries", labels, o.externalQueries);
    this.inc("external_prefix_cache_hits", labels, o.externalHits);
    if (o.connector === "SimpleCPUOffloadConnector") {
      for (const outcome of SAVE_OUTCOMES) this.inc("simple_kv_offload_save_outcomes", this.labels(engineIndex, { outcome }), o.saveOutcomes[outcome]);
      this.inc("simple_kv_offload_load_blocks", this.labels(engineIndex, { phase: "issued" }), o.loadBlocksIssued);
      this.inc("simple_kv_offload_load_blocks", this.labels(engineIndex, { phase: "completed" }), o.loadBlocksCompleted);
      this.set("simple_kv_offload_used_blocks", labels, o.usedBlocks);
      this.set("simple_kv_offload_pending_store_blocks", labels, o.pendingStoreBlocks);
      return;
    }
    const load = this.labels(engineIndex, { transfer_type: "CPU_to_GPU" });
    const store = this.labels(engineIndex, { transfer_type: "GPU_to_CPU" });
    for (const op of o.loads) {
      this.inc("kv_offload_load_bytes", labels, op.bytes);
      this.inc("kv_offload_load_time", labels, op.seconds);
      this.observe("kv_offload_load_size", labels, op.bytes);
      this.inc("kv_offload_total_bytes", load, op.bytes);
      this.inc("kv_offload_total_time", load, op.seconds);
      this.observe("kv_offload_size", load, op.bytes);
    }
    for (const op of o.stores) {
      this.inc("kv_offload_store_bytes", labels, op.bytes);
      this.inc("kv_offload_store_time", labels, op.seconds);
      this.observe("kv_offload_store_size", labels, op.bytes);
      this.inc("kv_offload_total_bytes", store, op.bytes);
      this.inc("kv_offload_total_time", store, op.seconds);
      this.observe("kv_offload_size", store, op.bytes);
    }
    for (const d of o.lookupSyncDelaysS) this.observe("kv_offload_lookup_sync_delay", labels, d);
    for (const n of o.allocationSizes) this.observe("kv_offload_cpu_allocation_size", labels, n);
    this.inc("kv_offload_allocation_failure", labels, o.allocationFailures);
    const capacity = Math.max(1, o.capacityBlocks);
    this.set("kv_offload_cpu_cache_usage_perc", labels, o.usedBlocks / capacity);
    this.set("kv_offload_cpu_cache_write_usage_perc", labels, o.pendingStoreBlocks / capacity);
    this.set("kv_offload_cpu_cache_read_usage_perc", labels, o.pendingLoadBlocks / capacity);
  }

  /** Finished requests count on the last engine (the final stage of a pipeline). */
  onRequestFinished(stats: FinishedRequestStats): void {
    if (!this.options.logStats) return;
    if (stats.clientAborted) return;
    const engine = Math.max(...this.engineLabels.map(Number));
    const labels = this.labels(engine);
    const reason = (FINISHED_REASONS as readonly string[]).includes(stats.finishReason) ? stats.finishReason : "error";
    this.inc("request_success", this.labels(engine, { finished_reason: reason }), 1);
    this.observe("e2e_request_latency", labels, stats.e2eLatencyS);
    this.observe("request_queue_time", labels, stats.queuedTimeS);
    this.observe("request_prefill_time", labels, stats.prefillTimeS);
    this.observe("request_decode_time", labels, stats.decodeTimeS);
    this.observe("request_inference_time", labels, stats.inferenceTimeS);
    this.observe("request_time_per_output_token", labels, stats.numGenerationTokens > 1 ? stats.meanTimePerOutputTokenS : 0);
    this.observe("request_prompt_tokens", labels, stats.numPromptTokens);
    this.observe("request_generation_tokens", labels, stats.numGenerationTokens);
    this.observe("request_prefill_kv_computed_tokens", labels, stats.numPromptTokens - Math.max(stats.numCachedTokens, 0));
    if (stats.maxTokensParam) this.observe("request_params_max_tokens", labels, stats.maxTokensParam);
    this.observeParent(stats, labels);
    // running mean context for the MFU estimate (a decode token's context is half its request's length on average)
    this.numFinished++;
    const contextTokens = stats.numPromptTokens + stats.numGenerationTokens / 2;
    this.meanContextTokens += (contextTokens - this.meanContextTokens) / this.numFinished;
  }

  /** vLLM records n and the longest child once per parent request, when its last child finishes: the front end
   * counts the children (frontend/parallel-sampling.ts) and puts the parent's figures on that child's record. */
  private observeParent(stats: FinishedRequestStats, labels: Labels): void {
    const parent = stats.n <= 1 ? { n: 1, maxNumGenerationTokens: stats.numGenerationTokens } : stats.parent;
    if (parent === undefined) return;
    this.observe("request_params_n", labels, parent.n);
    this.observe("request_max_num_generation_tokens", labels, parent.maxNumGenerationTokens);
  }

  /**
   * prometheus-fastapi-instrumentator's bookkeeping for one response: status grouped as `2xx`, unmatched routes as
   * handler `none`, vLLM's excluded paths (/metrics, /health, ...) left out, sizes only from Content-Length.
   */
  onHttpResponse(event: HttpResponseEvent): void {
    if (event.handler !== null && HTTP_EXCLUDED_HANDLERS.includes(event.handler)) return;
    const handler = event.handler ?? "none";
    const status = `${Math.floor(event.status / 100)}xx`;
    (this.metrics.get("http_requests_total") as Counter<string> | undefined)?.inc({ method: event.method, status, handler });
    if (event.requestBytes !== null) (this.metrics.get("http_request_size_bytes") as Summary<string> | undefined)?.observe({ handler }, event.requestBytes);
    if (event.responseBytes !== null) (this.metrics.get("http_response_size_bytes") as Summary<string> | undefined)?.observe({ handler }, event.responseBytes);
    (this.metrics.get("http_request_duration_highr_seconds") as Histogram<string> | undefined)?.observe(event.durationS);
    (this.metrics.get("http_request_duration_seconds") as Histogram<string> | undefined)?.observe({ method: event.method, handler }, event.durationS);
  }

  /** Images asked of the encoder cache and found there, per request (vLLM's multimodal cache counters, in items). */
  onMultimodalCache(queries: number, hits: number): void {
    this.inc("mm_cache_queries", this.labels(0), queries);
    this.inc("mm_cache_hits", this.labels(0), hits);
  }

  /** One tool-parser run (vLLM: once per choice without streaming, once per delta when streaming). */
  onToolParserInvocation(event: ToolParserInvocation): void {
    (this.metrics.get("tool_call_parser_invocations") as Counter<string> | undefined)?.inc({ model_name: this.options.modelName, mode: event.mode, outcome: event.outcome, request_type: "chat_completions" });
  }

  /** The Prometheus text exposition (what GET /metrics returns), bucket bounds written as vLLM writes them. */
  async exposition(): Promise<string> {
    // with --disable-log-stats no engine series exist: the HTTP series were created with the recorder
    return renderExposition(this.registry, (labels) => this.createdS.get(/engine="([^"]*)"/.exec(labels)?.[1] ?? "") ?? this.startedS);
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
