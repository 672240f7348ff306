/**
 * vLLM's metric semantics through the recorder, fed the stats an engine emits for N sequential requests of known
 * lengths (the shape of vLLM's own test_metrics.py expectations), plus pre-creation, aborts and --disable-log-stats.
 */
import { describe, expect, test } from "bun:test";
import type { FinishedRequestStats, IterationStats as StepStats } from "../../src/frontend/iteration-stats.ts";
import { makeDeprecationGate } from "../../src/metrics/deprecation.ts";
import { goFloat } from "../../src/metrics/exposition.ts";
import { MetricsRecorder, type RecorderOptions } from "../../src/metrics/recorder.ts";
import { CATALOGUE, FINISHED_REASONS, METRIC_KEYS } from "../../src/metrics/catalogue.ts";
import { tokenBuckets } from "../../src/metrics/buckets.ts";
import type { ModelConfig } from "../../src/model/model-config.ts";
import { hasSeries, parseExposition, sampleValue } from "./exposition.ts";

function recorder(overrides: Partial<RecorderOptions> = {}): MetricsRecorder {
  const gate = makeDeprecationGate("0.2.0", null);
  if (!gate.ok) throw new Error(gate.error);
  return new MetricsRecorder({ modelName: "tiny", maxModelLen: 512, logStats: true, enableMfuMetrics: false, deprecation: gate.value, processMetrics: false, ...overrides });
}

function step(over: Partial<StepStats>): StepStats {
  return {
    engineIndex: 0, batchId: 0, stepStartMs: 0, stepEndMs: 1, batchSize: 1, numPromptTokens: 0, numGenerationTokens: 0, numPreempted: 0,
    numRunning: 1, numWaiting: 0, kvCacheUsage: 0.1, prefixCacheQueries: 0, prefixCacheHits: 0, timeToFirstTokensS: [], interTokenLatenciesS: [],
    ...over,
  };
}

function finished(id: string, promptLen: number, genLen: number, over: Partial<FinishedRequestStats> = {}): FinishedRequestStats {
  return {
    requestId: id, finishReason: "length", clientAborted: false, numPromptTokens: promptLen, numGenerationTokens: genLen, numCachedTokens: 0,
    maxTokensParam: genLen, n: 1, times: { arrivalMs: 0, queuedMs: 1, scheduledMs: 2, firstTokenMs: 10, lastTokenMs: 50 },
    e2eLatencyS: 0.06, queuedTimeS: 0.001, prefillTimeS: 0.008, decodeTimeS: 0.04, inferenceTimeS: 0.048, meanTimePerOutputTokenS: 0.04 / Math.max(1, genLen - 1),
    ...over,
  };
}

/** One request alone in the engine: a prefill step with the first token, then one token per step. */
function runRequest(r: MetricsRecorder, id: string, promptLen: number, maxTokens: number, cachedTokens = 0, reason: FinishedRequestStats["finishReason"] = "length"): void {
  r.onStep(step({ numPromptTokens: promptLen - cachedTokens, numGenerationTokens: 1, prefixCacheQueries: promptLen, prefixCacheHits: cachedTokens, timeToFirstTokensS: [0.02] }));
  for (let i = 1; i < maxTokens; i++) r.onStep(step({ numGenerationTokens: 1, interTokenLatenciesS: [0.005 * i] }));
  r.onStep(step({ numRunning: 0, kvCacheUsage: 0 }));
  r.onRequestFinished(finished(id, promptLen, maxTokens, { numCachedTokens: cachedTokens, finishReason: reason }));
}

describe("recorder: vLLM semantics after N sequential requests", () => {
  const N = 3, PROMPT = 7, MAX_TOKENS = 5;

  test("token counters, TTFT/ITL counts, iteration_tokens, request_success", async () => {
    const r = recorder();
    for (let i = 0; i < N; i++) runRequest(r, `r${i}`, PROMPT, MAX_TOKENS);
    const s = parseExposition(await r.exposition());
    const L = { model_name: "tiny", engine: "0" };
    expect(sampleValue(s, "vllm:prompt_tokens_total", L)).toBe(N * PROMPT);
    expect(sampleValue(s, "vllm:generation_tokens_total", L)).toBe(N * MAX_TOKENS);
    expect(sampleValue(s, "vllm:time_to_first_token_seconds_count", L)).toBe(N);
    expect(sampleValue(s, "vllm:inter_token_latency_seconds_count", L)).toBe(N * (MAX_TOKENS - 1));
    expect(sampleValue(s, "vllm:iteration_tokens_total_sum", L)).toBe(N * (PROMPT + MAX_TOKENS));
    expect(sampleValue(s, "vllm:iteration_tokens_total_count", L)).toBe(N * MAX_TOKENS);
    expect(sampleValue(s, "vllm:request_success_total", { ...L, finished_reason: "length" })).toBe(N);
    expect(sampleValue(s, "vllm:request_success_total", { ...L, finished_reason: "stop" })).toBe(0);
    expect(sampleValue(s, "vllm:request_prompt_tokens_sum", L)).toBe(N * PROMPT);
    expect(sampleValue(s, "vllm:request_generation_tokens_count", L)).toBe(N);
    expect(sampleValue(s, "vllm:e2e_request_latency_seconds_count", L)).toBe(N);
    expect(sampleValue(s, "vllm:request_params_max_tokens_sum", L)).toBe(N * MAX_TOKENS);
    expect(sampleValue(s, "vllm:prompt_tokens_by_source_total", L)).toBe(N * PROMPT);
  });

  test("prefix-cache hits on a repeated prompt; by-source split sums to prompt_tokens", async () => {
    const r = recorder();
    runRequest(r, "a", 40, 2);
    runRequest(r, "b", 40, 2, 32, "stop");
    const s = parseExposition(await r.exposition());
    expect(sampleValue(s, "vllm:prefix_cache_queries_total")).toBe(80);
    expect(sampleValue(s, "vllm:prefix_cache_hits_total")).toBe(32);
    expect(sampleValue(s, "vllm:prompt_tokens_cached_total")).toBe(32);
    expect(sampleValue(s, "vllm:prompt_tokens_by_source_total", { source: "local_cache_hit" })).toBe(32);
    expect(sampleValue(s, "vllm:prompt_tokens_by_source_total", { source: "local_compute" })).toBe(48);
    expect(sampleValue(s, "vllm:prompt_tokens_total")).toBe(80);
    expect(sampleValue(s, "vllm:request_prefill_kv_computed_tokens_sum")).toBe(40 + 8);
    expect(sampleValue(s, "vllm:request_success_total", { finished_reason: "stop" })).toBe(1);
  });

  test("aborted and disconnected requests: gauges back at 0, no finished-request metric for a disconnect", async () => {
    const r = recorder();
    r.onStep(step({ numPromptTokens: 10, numGenerationTokens: 2, batchSize: 2, numRunning: 2, numWaiting: 3, kvCacheUsage: 0.5, timeToFirstTokensS: [0.01, 0.02] }));
    let s = parseExposition(await r.exposition());
    expect(sampleValue(s, "vllm:num_requests_running")).toBe(2);
    expect(sampleValue(s, "vllm:num_requests_waiting")).toBe(3);
    expect(sampleValue(s, "vllm:kv_cache_usage_perc")).toBe(0.5);
    r.onRequestFinished(finished("gone", 5, 1, { finishReason: "abort", clientAborted: true }));
    r.onRequestFinished(finished("cancelled", 5, 1, { finishReason: "abort" }));
    r.onStep(step({ numRunning: 0, numWaiting: 0, kvCacheUsage: 0 }));
    s = parseExposition(await r.exposition());
    expect(sampleValue(s, "vllm:num_requests_running")).toBe(0);
    expect(sampleValue(s, "vllm:num_requests_waiting")).toBe(0);
    expect(sampleValue(s, "vllm:kv_cache_usage_perc")).toBe(0);
    expect(sampleValue(s, "vllm:request_success_total", { finished_reason: "abort" })).toBe(1);
    expect(sampleValue(s, "vllm:e2e_request_latency_seconds_count")).toBe(1);
    expect(sampleValue(s, "vllm:time_to_first_token_seconds_count")).toBe(2);
  });

  test("n > 1: request_params_n and request_max_num_generation_tokens once per parent, when its last child finishes", async () => {
    const r = recorder();
    r.onRequestFinished(finished("0_p", 4, 3, { n: 3 }));
    r.onRequestFinished(finished("1_p", 4, 9, { n: 3 }));
    let s = parseExposition(await r.exposition());
    expect(sampleValue(s, "vllm:request_params_n_count")).toBe(0);
    // the front end counts the children (frontend/parallel-sampling.ts): the last one carries the parent's figures
    r.onRequestFinished(finished("2_p", 4, 5, { n: 3, parent: { n: 3, maxNumGenerationTokens: 9 } }));
    r.onRequestFinished(finished("solo", 4, 2));
    s = parseExposition(await r.exposition());
    expect(sampleValue(s, "vllm:request_params_n_count")).toBe(2);
    expect(sampleValue(s, "vllm:request_params_n_sum")).toBe(3 + 1);
    expect(sampleValue(s, "vllm:request_max_num_generation_tokens_sum")).toBe(9 + 2);
    // every child counts in the per-sequence metrics
    expect(sampleValue(s, "vllm:request_success_total")).toBe(4);
    expect(sampleValue(s, "vllm:request_generation_tokens_count")).toBe(4);
  });

  test("a chunked prefill step without output is folded into the next observed iteration", async () => {
    const r = recorder();
    r.onStep(step({ numPromptTokens: 300 }));
    r.onStep(step({ numPromptTokens: 100, numGenerationTokens: 1 }));
    const s = parseExposition(await r.exposition());
    expect(sampleValue(s, "vllm:iteration_tokens_total_count")).toBe(1);
    expect(sampleValue(s, "vllm:iteration_tokens_total_sum")).toBe(401);
  });
});

describe("recorder: series and flags", () => {
  test.each([["1", "1.0"], ["0.005", "0.005"], ["2560", "2560.0"], ["100000", "100000.0"], ["1000000", "1e+06"], ["2147483648", "2.147483648e+09"], ["+Inf", "+Inf"]])(
    "bucket bound %p is written %p (prometheus_client's floatToGoString)", (bound, printed) => expect(goFloat(bound)).toBe(printed));

  test("every visible catalogue metric is pre-created at 0 for every engine and enumerated label", async () => {
    const r = recorder({ engineIndices: [0, 1] });
    const text = await r.exposition();
    const s = parseExposition(text);
    for (const key of METRIC_KEYS) {
      const def = CATALOGUE[key];
      // HTTP metrics get their series per request (the instrumentator's), tested below
      if (def.deprecatedIn !== undefined || def.flag !== undefined || def.connector !== undefined || def.scope === "http") continue;
      const sample = def.type === "histogram" ? `${def.name}_count` : def.name;
      for (const engine of ["0", "1"]) expect(hasSeries(s, sample, { engine })).toBe(true);
    }
    for (const reason of FINISHED_REASONS) expect(sampleValue(s, "vllm:request_success_total", { engine: "1", finished_reason: reason })).toBe(0);
    expect(sampleValue(s, "vllm:engine_sleep_state", { sleep_state: "awake", engine: "0" })).toBe(1);
    // 1-2-5 token buckets capped at max_model_len (512 -> ..., 200, 500)
    const les = s.filter((x) => x.name === "vllm:request_prompt_tokens_bucket" && x.labels["engine"] === "0").map((x) => x.labels["le"]);
    // bounds printed as vLLM (prometheus_client) prints them
    expect(les).toEqual(["1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "+Inf"]);
    const ttftLes = s.filter((x) => x.name === "vllm:time_to_first_token_seconds_bucket" && x.labels["engine"] === "0").map((x) => x.labels["le"]);
    expect(ttftLes.slice(0, 3)).toEqual(["0.001", "0.005", "0.01"]);
    expect(ttftLes.slice(-3)).toEqual(["640.0", "2560.0", "+Inf"]);
    expect(tokenBuckets(512)).toEqual([1, 2, 5, 10, 20, 50, 100, 200, 500]);
    expect(tokenBuckets(1024).at(-1)).toBe(1000);
    expect(tokenBuckets(131072).at(-1)).toBe(100000);
    // counters are exposed with _total in # HELP / # TYPE too
    expect(text).toContain("# TYPE vllm:prompt_tokens_total counter");
  });

  test("an engine (pipeline stage) the recorder was not told about gets every series at its first step; finished requests count on the last engine", async () => {
    const r = recorder();
    r.onStep(step({ engineIndex: 1, numGenerationTokens: 1 }));
    r.onRequestFinished(finished("x", 3, 1));
    const s = parseExposition(await r.exposition());
    for (const reason of FINISHED_REASONS) expect(hasSeries(s, "vllm:request_success_total", { engine: "1", finished_reason: reason })).toBe(true);
    expect(hasSeries(s, "vllm:prompt_tokens_by_source_total", { engine: "1", source: "external_kv_transfer" })).toBe(true);
    expect(sampleValue(s, "vllm:request_success_total", { engine: "1", finished_reason: "length" })).toBe(1);
    expect(sampleValue(s, "vllm:request_success_total", { engine: "0" })).toBe(0);
  });

  test("--disable-log-stats: no vllm:* series, process metrics stay", async () => {
    const r = recorder({ logStats: false, processMetrics: true });
    runRequest(r, "x", 4, 3);
    const text = await r.exposition();
    expect(text).not.toContain("vllm:");
    expect(text).toContain("process_cpu_seconds_total");
    expect(text).toContain("process_resident_memory_bytes");
  });

  test("--enable-mfu-metrics adds the three estimated_*_per_gpu_total counters, growing with the model's shapes", async () => {
    const off = parseExposition(await recorder().exposition());
    expect(hasSeries(off, "vllm:estimated_flops_per_gpu_total")).toBe(false);
    const config: ModelConfig = {
      architecture: "llama", name: "t", vocabSize: 512, dim: 64, hiddenDim: 172, numLayers: 5, numHeads: 8, numKvHeads: 4, headDim: 8, ropeDim: 8,
      ropeFreqBase: 10000, ropeNeox: false, rmsEps: 1e-5, contextLength: 512, tiedEmbeddings: true, hasQkvBias: false, hasQkNorm: false,
    };
    const r = recorder({ enableMfuMetrics: true, model: { config, bytesPerWeight: 4, bytesPerKvElement: 4 } });
    runRequest(r, "x", 8, 4);
    const s = parseExposition(await r.exposition());
    const matmulParams = 5 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 172) + 64 * 512;
    // prefill of 8 tokens + 3 decode tokens at mean context 0 (no request had finished yet): 2 x params x tokens
    expect(sampleValue(s, "vllm:estimated_flops_per_gpu_total")).toBe(2 * matmulParams * 11);
    expect(sampleValue(s, "vllm:estimated_write_bytes_per_gpu_total")).toBe(2 * 5 * 32 * 4 * 11);
    expect(sampleValue(s, "vllm:estimated_read_bytes_per_gpu_total")).toBe(4 * matmulParams * 4);
  });
});

describe("_created companions (prometheus_client, which vLLM does not turn off)", () => {
  test("every vllm: counter and histogram series has <name>_created (counter without _total) with its creation time; gauges have none", async () => {
    const before = Date.now() / 1000;
    const r = recorder({ engineIndices: [0, 1] });
    const after = Date.now() / 1000;
    const text = await r.exposition();
    const samples = parseExposition(text);
    for (const key of METRIC_KEYS) {
      const def = CATALOGUE[key];
      if (def.flag !== undefined || def.connector !== undefined || def.deprecatedIn !== undefined || def.scope === "http") continue;
      const base = def.type === "counter" ? def.name.replace(/_total$/, "") : def.name;
      const created = samples.filter((s) => s.name === `${base}_created`);
      if (def.type === "gauge") {
        expect(created).toHaveLength(0);
        continue;
      }
      // one per series: engines x enumerated label values
      const combos = Object.values(def.extraLabels ?? {}).reduce((n, values) => n * values.length, 1);
      expect(created).toHaveLength(2 * combos);
      for (const s of created) {
        expect(s.value).toBeGreaterThanOrEqual(Math.floor(before) - 1);
        expect(s.value).toBeLessThanOrEqual(after + 1);
      }
      expect(text).toContain(`# HELP ${base}_created ${def.help}\n# TYPE ${base}_created gauge\n`);
    }
    // the histogram whose name ends in _total keeps it; values are Go-style floats like prometheus_client's
    expect(text).toMatch(/\nvllm:iteration_tokens_total_created\{model_name="tiny",engine="0"\} \d\.\d+e\+09\n/);
    expect(text).not.toContain("vllm:prompt_tokens_total_created");
  });
});

describe("the series a fresh vLLM server shows", () => {
  test("before any request: vLLM's EXPECTED_METRICS_V1 names and the connector / multi-modal counters vLLM always registers, at 0", async () => {
    const samples = parseExposition(await recorder().exposition());
    const names = [
      "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:num_requests_waiting_by_reason", "vllm:kv_cache_usage_perc",
      "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:num_preemptions_total", "vllm:prompt_tokens_total",
      "vllm:generation_tokens_total", "vllm:iteration_tokens_total_count", "vllm:request_success_total",
      "vllm:external_prefix_cache_queries_total", "vllm:external_prefix_cache_hits_total", "vllm:mm_cache_queries_total", "vllm:mm_cache_hits_total",
    ];
    for (const name of names) {
      expect(hasSeries(samples, name, { model_name: "tiny", engine: "0" })).toBe(true);
      expect(sampleValue(samples, name)).toBe(0);
    }
  });
});

describe("HTTP metrics (prometheus-fastapi-instrumentator's, which vLLM mounts)", () => {
  test("requests by method, grouped status and route; unmatched routes are `none`; /metrics, /health, ... left out; kept with --disable-log-stats", async () => {
    for (const logStats of [true, false]) {
      const r = recorder({ logStats });
      const ok = { handler: "/v1/completions", method: "POST", status: 200, durationS: 0.2, requestBytes: 40, responseBytes: 300 };
      r.onHttpResponse(ok);
      r.onHttpResponse({ ...ok, status: 400, durationS: 0.7, responseBytes: 120 });
      r.onHttpResponse({ ...ok, handler: null, method: "GET", status: 404, requestBytes: null, responseBytes: null });
      r.onHttpResponse({ ...ok, handler: "/health", method: "GET" });
      r.onHttpResponse({ ...ok, handler: "/metrics", method: "GET" });
      const text = await r.exposition();
      const s = parseExposition(text);
      expect(sampleValue(s, "http_requests_total", { method: "POST", status: "2xx", handler: "/v1/completions" })).toBe(1);
      expect(sampleValue(s, "http_requests_total", { method: "POST", status: "4xx", handler: "/v1/completions" })).toBe(1);
      expect(sampleValue(s, "http_requests_total", { method: "GET", status: "4xx", handler: "none" })).toBe(1);
      expect(sampleValue(s, "http_requests_total")).toBe(3);
      expect(sampleValue(s, "http_request_size_bytes_sum", { handler: "/v1/completions" })).toBe(80);
      expect(sampleValue(s, "http_response_size_bytes_count", { handler: "/v1/completions" })).toBe(2);
      expect(hasSeries(s, "http_response_size_bytes_count", { handler: "none" })).toBe(false);
      // lowr buckets 0.1 / 0.5 / 1 by method and handler; highr without labels
      expect(sampleValue(s, "http_request_duration_seconds_bucket", { handler: "/v1/completions", le: "0.5" })).toBe(1);
      expect(sampleValue(s, "http_request_duration_seconds_bucket", { handler: "/v1/completions", le: "1.0" })).toBe(2);
      expect(sampleValue(s, "http_request_duration_highr_seconds_count")).toBe(3);
      expect(s.filter((x) => x.name === "http_request_duration_highr_seconds_bucket").map((x) => x.labels["le"]).slice(0, 3)).toEqual(["0.01", "0.025", "0.05"]);
      // Python's Summary has no quantiles; the counter's created companion drops _total like prometheus_client's
      expect(s.some((x) => x.name === "http_request_size_bytes" && "quantile" in x.labels)).toBe(false);
      expect(hasSeries(s, "http_requests_created", { handler: "none" })).toBe(true);
      expect(hasSeries(s, "vllm:num_requests_running")).toBe(logStats);
      // with --disable-log-stats there is no engine series to take a creation time from (was Infinity)
      const created = s.filter((x) => x.name.endsWith("_created"));
      expect(created.length).toBeGreaterThan(3);
      for (const sample of created) expect(Math.abs(sample.value - Date.now() / 1000)).toBeLessThan(60);
    }
  });
});

describe("waiting reasons", () => {
  test("capacity and deferred split num_requests_waiting (the engine's numWaitingDeferred), and go back to 0", async () => {
    const r = recorder();
    r.onStep(step({ numWaiting: 5, numWaitingDeferred: 2 }));
    let s = parseExposition(await r.exposition());
    expect(sampleValue(s, "vllm:num_requests_waiting")).toBe(5);
    expect(sampleValue(s, "vllm:num_requests_waiting_by_reason", { reason: "capacity" })).toBe(3);
    expect(sampleValue(s, "vllm:num_requests_waiting_by_reason", { reason: "deferred" })).toBe(2);
    r.onStep(step({ numWaiting: 0, numWaitingDeferred: 0 }));
    s = parseExposition(await r.exposition());
    expect(sampleValue(s, "vllm:num_requests_waiting_by_reason")).toBe(0);
    // an engine that does not report the split: all of it waits for capacity
    r.onStep(step({ numWaiting: 4 }));
    s = parseExposition(await r.exposition());
    expect(sampleValue(s, "vllm:num_requests_waiting_by_reason", { reason: "capacity" })).toBe(4);
    expect(sampleValue(s, "vllm:num_requests_waiting_by_reason", { reason: "deferred" })).toBe(0);
  });
});
