/**
 * The offload tier's series through the recorder: SimpleCPUOffloadConnector's and OffloadingConnector's sets exist only
 * with their connector, every outcome / phase / transfer_type child is pre-created at 0, the step's deltas add up,
 * gauges follow the latest step, and tier hits count as external prefix hits and external_kv_transfer prompt tokens.
 */
import { describe, expect, test } from "bun:test";
import type { KvOffloadStepStats } from "../../src/engine/stats.ts";
import type { IterationStats as StepStats } from "../../src/frontend/iteration-stats.ts";
import { makeDeprecationGate } from "../../src/metrics/deprecation.ts";
import type { KvOffloadFacts } from "../../src/engine/stats.ts";
import { MetricsRecorder } from "../../src/metrics/recorder.ts";
import { CATALOGUE, METRIC_KEYS, SAVE_OUTCOMES } from "../../src/metrics/catalogue.ts";
import { hasSeries, parseExposition, sampleValue } from "./exposition.ts";

function recorder(kvOffload: KvOffloadFacts | null): MetricsRecorder {
  const gate = makeDeprecationGate("0.2.0", null);
  if (!gate.ok) throw new Error(gate.error);
  return new MetricsRecorder({ modelName: "tiny", maxModelLen: 512, logStats: true, enableMfuMetrics: false, deprecation: gate.value, processMetrics: false, kvOffload });
}

function offload(connector: KvOffloadStepStats["connector"], over: Partial<KvOffloadStepStats> = {}): KvOffloadStepStats {
  return {
    connector, saveOutcomes: Object.fromEntries(SAVE_OUTCOMES.map((o) => [o, 0])) as KvOffloadStepStats["saveOutcomes"],
    loadBlocksIssued: 0, loadBlocksCompleted: 0, loadBlocksFailed: 0, loads: [], stores: [], lookupSyncDelaysS: [], allocationFailures: 0,
    allocationSizes: [], usedBlocks: 0, pendingStoreBlocks: 0, pendingLoadBlocks: 0, capacityBlocks: 64, externalQueries: 0, externalHits: 0, ...over,
  };
}

function step(kvOffload: KvOffloadStepStats, over: Partial<StepStats> = {}): StepStats {
  return {
    engineIndex: 0, batchId: 0, stepStartMs: 0, stepEndMs: 1, batchSize: 1, numPromptTokens: 0, numGenerationTokens: 0, numPreempted: 0,
    numRunning: 1, numWaiting: 0, kvCacheUsage: 0.1, prefixCacheQueries: 0, prefixCacheHits: 0, timeToFirstTokensS: [], interTokenLatenciesS: [], kvOffload, ...over,
  };
}

const SIMPLE: KvOffloadFacts = { connector: "SimpleCPUOffloadConnector", backend: "disk", pageCache: false, lazy: true, capacityBlocks: 64 };
const NATIVE: KvOffloadFacts = { connector: "OffloadingConnector", backend: "cpu", pageCache: false, lazy: false, capacityBlocks: 64 };

const seriesOf = (connector: string) => METRIC_KEYS.filter((k) => CATALOGUE[k].connector === connector).map((k) => CATALOGUE[k]);

describe("offload tier metrics", () => {
  test("each connector's series exist only with it, every enumerated child at 0 before any step", async () => {
    const none = parseExposition(await recorder(null).exposition());
    for (const def of [...seriesOf("SimpleCPUOffloadConnector"), ...seriesOf("OffloadingConnector")]) expect(none.some((x) => x.name.startsWith(def.name))).toBe(false);
    const simple = parseExposition(await recorder(SIMPLE).exposition());
    for (const outcome of SAVE_OUTCOMES) expect(sampleValue(simple, "vllm:simple_kv_offload_save_outcomes_total", { outcome })).toBe(0);
    for (const phase of ["issued", "completed"]) expect(sampleValue(simple, "vllm:simple_kv_offload_load_blocks_total", { phase })).toBe(0);
    expect(sampleValue(simple, "vllm:simple_kv_offload_used_blocks")).toBe(0);
    expect(sampleValue(simple, "vllm:simple_kv_offload_pending_store_blocks")).toBe(0);
    // page_cache is "true" only for disk with use_page_cache; label values are vLLM's lower-case strings
    expect(sampleValue(simple, "vllm:simple_kv_offload_info", { model_name: "tiny", engine: "0", backend: "disk", page_cache: "false", lazy_offload: "true", capacity_blocks: "64" })).toBe(1);
    expect(simple.some((x) => x.name.startsWith("vllm:kv_offload_"))).toBe(false);
    const native = parseExposition(await recorder(NATIVE).exposition());
    for (const def of seriesOf("OffloadingConnector")) expect(hasSeries(native, def.type === "histogram" ? `${def.name}_count` : def.name)).toBe(true);
    for (const t of ["CPU_to_GPU", "GPU_to_CPU"]) expect(sampleValue(native, "vllm:kv_offload_total_bytes_total", { transfer_type: t })).toBe(0);
    expect(native.some((x) => x.name.startsWith("vllm:simple_kv_offload"))).toBe(false);
  });

  test("SimpleCPUOffloadConnector: outcomes and phases add up over steps; gauges take the latest step; tier hits are external", async () => {
    const r = recorder(SIMPLE);
    const outcomes = { ...offload("SimpleCPUOffloadConnector").saveOutcomes, stored: 3, skipped_in_flight: 1, dropped_cpu_full: 2 };
    r.onStep(step(offload("SimpleCPUOffloadConnector", { saveOutcomes: outcomes, usedBlocks: 5, pendingStoreBlocks: 3 })));
    r.onStep(step(offload("SimpleCPUOffloadConnector", { saveOutcomes: { ...outcomes, stored: 1 }, loadBlocksIssued: 6, usedBlocks: 7, pendingStoreBlocks: 0, externalQueries: 103, externalHits: 96 }),
      { numPromptTokens: 7, prefixCacheQueries: 103 }));
    r.onStep(step(offload("SimpleCPUOffloadConnector", { loadBlocksCompleted: 6, usedBlocks: 1 })));
    const s = parseExposition(await r.exposition());
    expect(sampleValue(s, "vllm:simple_kv_offload_save_outcomes_total", { outcome: "stored" })).toBe(4);
    expect(sampleValue(s, "vllm:simple_kv_offload_save_outcomes_total", { outcome: "skipped_in_flight" })).toBe(2);
    expect(sampleValue(s, "vllm:simple_kv_offload_save_outcomes_total", { outcome: "dropped_cpu_full" })).toBe(4);
    expect(sampleValue(s, "vllm:simple_kv_offload_load_blocks_total", { phase: "issued" })).toBe(6);
    expect(sampleValue(s, "vllm:simple_kv_offload_load_blocks_total", { phase: "completed" })).toBe(6);
    expect(sampleValue(s, "vllm:simple_kv_offload_used_blocks")).toBe(1);
    expect(sampleValue(s, "vllm:simple_kv_offload_pending_store_blocks")).toBe(0);
    expect(sampleValue(s, "vllm:external_prefix_cache_queries_total")).toBe(103);
    expect(sampleValue(s, "vllm:external_prefix_cache_hits_total")).toBe(96);
    expect(sampleValue(s, "vllm:prompt_tokens_by_source_total", { source: "external_kv_transfer" })).toBe(96);
    expect(sampleValue(s, "vllm:prompt_tokens_cached_total")).toBe(96);
    expect(sampleValue(s, "vllm:prompt_tokens_total")).toBe(103);
  });

  test("OffloadingConnector: bytes, times, sizes, allocation failures and usage fractions", async () => {
    const r = recorder(NATIVE);
    r.onStep(step(offload("OffloadingConnector", {
      stores: [{ bytes: 2e6, seconds: 0.01 }, { bytes: 3e6, seconds: 0.02 }], allocationSizes: [4, 2], allocationFailures: 1,
      lookupSyncDelaysS: [2e-5], usedBlocks: 16, pendingStoreBlocks: 8, pendingLoadBlocks: 4,
    })));
    r.onStep(step(offload("OffloadingConnector", { loads: [{ bytes: 6e6, seconds: 0.004 }] })));
    const s = parseExposition(await r.exposition());
    expect(sampleValue(s, "vllm:kv_offload_store_bytes_total")).toBe(5e6);
    expect(sampleValue(s, "vllm:kv_offload_store_time_total")).toBeCloseTo(0.03, 9);
    expect(sampleValue(s, "vllm:kv_offload_store_size_count")).toBe(2);
    expect(sampleValue(s, "vllm:kv_offload_load_bytes_total")).toBe(6e6);
    expect(sampleValue(s, "vllm:kv_offload_load_size_bucket", { le: "1e+07" })).toBe(1);
    expect(sampleValue(s, "vllm:kv_offload_total_bytes_total", { transfer_type: "GPU_to_CPU" })).toBe(5e6);
    expect(sampleValue(s, "vllm:kv_offload_total_bytes_total", { transfer_type: "CPU_to_GPU" })).toBe(6e6);
    expect(sampleValue(s, "vllm:kv_offload_allocation_failure_total")).toBe(1);
    expect(sampleValue(s, "vllm:kv_offload_cpu_allocation_size_sum")).toBe(6);
    expect(sampleValue(s, "vllm:kv_offload_lookup_sync_delay_seconds_count")).toBe(1);
    // the latest step's gauges: everything settled
    expect(sampleValue(s, "vllm:kv_offload_cpu_cache_usage_perc")).toBe(0);
    r.onStep(step(offload("OffloadingConnector", { usedBlocks: 16, pendingStoreBlocks: 8, pendingLoadBlocks: 4 })));
    const t = parseExposition(await r.exposition());
    expect(sampleValue(t, "vllm:kv_offload_cpu_cache_usage_perc")).toBe(0.25);
    expect(sampleValue(t, "vllm:kv_offload_cpu_cache_write_usage_perc")).toBe(0.125);
    expect(sampleValue(t, "vllm:kv_offload_cpu_cache_read_usage_perc")).toBe(0.0625);
  });
});
