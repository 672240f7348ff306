/**
 * The KV offload tier through EngineCore with the fake runner (whose KV holds a hash chain over the real data path, so
 * a wrong or stale loaded block changes the output): evicted prefixes come back from host memory and from a real disk
 * file, every save outcome fennec can produce, failed and slow loads recompute, random aborts leak no block.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseKvTransfer, type KvOffloadConfig } from "../../src/config/kv-transfer-config.ts";
import { diskTierPath } from "../../src/engine/kv-connector/offload-tiers.ts";
import type { KvOffloadStepStats, SaveOutcome, StepStats } from "../../src/engine/stats.ts";
import type { EngineCore } from "../../src/engine/engine-core.ts";
import { randomInt, rng } from "../helpers/prng.ts";
import { collect, makeEngine, prompt, request, runAlone, type Collected } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "fennec-offload-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function offloadConfig(extra: Record<string, unknown>, connector = "SimpleCPUOffloadConnector"): KvOffloadConfig {
  const parsed = parseKvTransfer({
    kvOffloadingSize: null, kvOffloadingBackend: "native", useSimpleKvOffload: false, enablePrefixCaching: true,
    kvTransferConfig: JSON.stringify({ kv_connector: connector, kv_role: "kv_both", kv_connector_extra_config: extra }),
  }, 16);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value.config!;
}

/** fake runner: 4 bytes per position, 64 per block of 16 */
const BLOCK_BYTES = 64;

interface Run {
  outputs: Map<string, Collected>;
  steps: StepStats[];
}

/** Steps until idle (steps that only wait for a load are part of step()). */
async function drive(engine: EngineCore, run: Run = { outputs: new Map(), steps: [] }): Promise<Run> {
  for (let i = 0; i < 100_000 && engine.hasWork(); i++) {
    const r = await engine.step();
    if (!r) throw new Error("engine has work but scheduled nothing");
    run.steps.push(r.stats);
    collect(run.outputs, r.deltas);
  }
  return run;
}

function sumOffload(steps: readonly StepStats[], pick: (s: KvOffloadStepStats) => number): number {
  return steps.reduce((a, s) => a + (s.kvOffload ? pick(s.kvOffload) : 0), 0);
}
const outcome = (steps: readonly StepStats[], o: SaveOutcome): number => sumOffload(steps, (s) => s.saveOutcomes[o]);

const SHARED = prompt(100, 7);
const TARGET = request("again", [...SHARED, 5, 6, 7], { maxTokens: 6 });

/** A long prefix, then other traffic that evicts it from a 14-block primary pool, then the prefix again. */
async function evictThenReload(kvOffload: KvOffloadConfig | null): Promise<{ engine: EngineCore; again: Collected; run: Run; computedForAgain: number }> {
  const { engine, runner } = makeEngine({ numBlocks: 14, kvOffload });
  const run: Run = { outputs: new Map(), steps: [] };
  engine.addRequest(request("first", [...SHARED, 1, 2, 3], { maxTokens: 4 }));
  await drive(engine, run);
  // time passes between requests: the tier's writes return (drive() itself never yields to I/O)
  await engine.offload?.settle();
  for (let i = 0; i < 3; i++) {
    engine.addRequest(request(`other${i}`, prompt(150, 100 + i), { maxTokens: 4 }));
    await drive(engine, run);
    await engine.offload?.settle();
  }
  const before = runner.numTokensComputed;
  engine.addRequest(TARGET);
  await drive(engine, run);
  return { engine, again: run.outputs.get("again")!, run, computedForAgain: runner.numTokensComputed - before };
}

describe("an evicted prefix", () => {
  test("comes back from host memory: loaded, not recomputed, same greedy output as a cold run", async () => {
    const cold = await runAlone(TARGET, { numBlocks: 14 });
    const { again, run, computedForAgain, engine } = await evictThenReload(offloadConfig({ cpu_bytes_to_use: 64 * BLOCK_BYTES }));
    expect(again.tokens).toEqual(cold.tokens);
    expect(again.numCachedTokens).toBe(96);
    expect(sumOffload(run.steps, (s) => s.loadBlocksCompleted)).toBe(6);
    expect(sumOffload(run.steps, (s) => s.externalHits)).toBe(96);
    expect(computedForAgain).toBe(103 - 96 + 5);
    expect(outcome(run.steps, "stored")).toBeGreaterThan(0);
    expect(engine.offload!.numFreeSlots).toBe(64);
  });

  test("comes back through the native offload (--kv-offloading-size: OffloadingConnector), with its transfer records", async () => {
    const cold = await runAlone(TARGET, { numBlocks: 14 });
    const parsed = parseKvTransfer({ kvOffloadingSize: (64 * BLOCK_BYTES) / 2 ** 30, kvOffloadingBackend: "native", kvTransferConfig: null, useSimpleKvOffload: false, enablePrefixCaching: true }, 16);
    if (!parsed.ok) throw new Error(parsed.error);
    const { again, run } = await evictThenReload(parsed.value.config);
    expect(again.tokens).toEqual(cold.tokens);
    expect(again.numCachedTokens).toBe(96);
    const last = run.steps.at(-1)!.kvOffload!;
    expect(last.connector).toBe("OffloadingConnector");
    expect(last.capacityBlocks).toBe(64);
    const loads = run.steps.flatMap((s) => s.kvOffload?.loads ?? []);
    expect(loads.reduce((a, l) => a + l.bytes, 0)).toBe(6 * BLOCK_BYTES);
    expect(run.steps.flatMap((s) => s.kvOffload?.stores ?? []).length).toBeGreaterThan(0);
    expect(run.steps.flatMap((s) => s.kvOffload?.lookupSyncDelaysS ?? []).length).toBeGreaterThan(0);
  });

  test("is recomputed without the tier", async () => {
    const { again, computedForAgain, run } = await evictThenReload(null);
    expect(again.numCachedTokens).toBe(0);
    expect(computedForAgain).toBe(103 + 5);
    expect(run.steps.every((s) => s.kvOffload === undefined)).toBe(true);
  });

  test("comes back from a real disk file, lazy mode too", async () => {
    const cold = await runAlone(TARGET, { numBlocks: 14 });
    for (const lazy of [false, true]) {
      const path = join(dir, `lazy-${lazy}`, "kv");
      const cfg = offloadConfig({ kv_offload_backend: "disk", disk_path: path, disk_capacity_bytes: 64 * 4096, use_page_cache: lazy, lazy_offload: lazy });
      const { again, run, engine } = await evictThenReload(cfg);
      expect(existsSync(diskTierPath(path))).toBe(true);
      expect(again.tokens).toEqual(cold.tokens);
      expect(again.numCachedTokens).toBe(96);
      expect(sumOffload(run.steps, (s) => s.loadBlocksCompleted)).toBe(6);
      if (lazy) expect(outcome(run.steps, "stored")).toBe(0); // lazy stores are not classified, as in vLLM
      engine.dispose();
      expect(existsSync(diskTierPath(path))).toBe(false);
    }
  });
});

describe("save outcomes", () => {
  test("stored, skipped_already_cached: the second request's locally cached blocks are in the tier already", async () => {
    const { engine } = makeEngine({ kvOffload: offloadConfig({ cpu_bytes_to_use: 64 * BLOCK_BYTES }) });
    engine.addRequest(request("a", [...SHARED, 1], { maxTokens: 2 }));
    const run = await drive(engine);
    expect(outcome(run.steps, "stored")).toBe(6);
    engine.addRequest(request("b", [...SHARED, 2], { maxTokens: 2 }));
    await drive(engine, run);
    expect(outcome(run.steps, "skipped_already_cached")).toBe(6);
    expect(outcome(run.steps, "stored")).toBe(6);
  });

  test("stored: a request that finishes after one token (the prefill leg of disaggregated serving) stores its prompt's full blocks", async () => {
    for (const connector of ["SimpleCPUOffloadConnector", "OffloadingConnector"]) {
      // the whole prompt in one step: the request finishes in the step that computed it
      const { engine } = makeEngine({ maxNumBatchedTokens: 256, kvOffload: offloadConfig({ cpu_bytes_to_use: 64 * BLOCK_BYTES }, connector) });
      engine.addRequest(request("a", [...SHARED, 1], { maxTokens: 1 }));
      const run = await drive(engine);
      expect(run.steps.length).toBe(1);
      expect(run.outputs.get("a")!.tokens.length).toBe(1);
      // 101 prompt tokens: 6 full blocks of 16, handed off when the request finishes (vLLM request_finished)
      expect(outcome(run.steps, "stored")).toBe(6);
      await engine.offload!.settle();
      // they are in the tier: the same prompt again finds every block there
      engine.addRequest(request("b", [...SHARED, 2], { maxTokens: 1 }));
      await drive(engine, run);
      expect(outcome(run.steps, "skipped_already_cached")).toBe(6);
      engine.dispose();
    }
  });

  test("skipped_in_flight: a block whose disk write has not returned is not stored twice", async () => {
    const path = join(dir, "inflight", "kv");
    const { engine } = makeEngine({ kvOffload: offloadConfig({ kv_offload_backend: "disk", disk_path: path, disk_capacity_bytes: 64 * 4096, use_page_cache: true }) });
    // two requests with one prompt: the second waits for the first's blocks, then reuses them while they are written
    engine.addRequest(request("a", [...SHARED, 1], { maxTokens: 3 }));
    engine.addRequest(request("b", [...SHARED, 1], { maxTokens: 3 }));
    const run = await drive(engine);
    expect(outcome(run.steps, "stored")).toBe(6);
    expect(outcome(run.steps, "skipped_in_flight") + outcome(run.steps, "skipped_already_cached")).toBe(6);
    expect(outcome(run.steps, "skipped_in_flight")).toBeGreaterThan(0);
    await engine.offload!.settle();
    engine.dispose();
  });

  test("dropped_cpu_full: no free tier block while every block is pinned by in-flight writes", async () => {
    const path = join(dir, "full", "kv");
    const { engine } = makeEngine({ kvOffload: offloadConfig({ kv_offload_backend: "disk", disk_path: path, disk_capacity_bytes: 2 * BLOCK_BYTES, use_page_cache: true }) });
    engine.addRequest(request("a", [...SHARED, 1], { maxTokens: 2 }));
    const run = await drive(engine);
    expect(outcome(run.steps, "stored")).toBe(2);
    expect(outcome(run.steps, "dropped_cpu_full")).toBe(4);
    expect(sumOffload(run.steps, (s) => s.allocationFailures)).toBeGreaterThan(0);
    await engine.offload!.settle();
    engine.dispose();
  });

  test("dropped_request_gone: an abort drops the blocks queued for the next hand-off", async () => {
    const { engine } = makeEngine({ maxNumBatchedTokens: 64, kvOffload: offloadConfig({ cpu_bytes_to_use: 64 * BLOCK_BYTES }) });
    engine.addRequest(request("a", [...SHARED, 1], { maxTokens: 2 }));
    const r = await engine.step(); // one 64-token chunk: 4 full blocks queued
    engine.abort(["a"]);
    const stats = engine.idleStats();
    expect(stats.kvOffload!.saveOutcomes.dropped_request_gone).toBe(4);
    expect(r!.stats.kvOffload!.saveOutcomes.stored).toBe(0);
  });

  test("dropped_null_block and dropped_not_hashed cannot happen: every fennec block is real and hashed", async () => {
    const { engine } = makeEngine({ kvOffload: offloadConfig({ cpu_bytes_to_use: 64 * BLOCK_BYTES }) });
    engine.addRequest(request("a", [...SHARED, 1], { maxTokens: 2 }));
    const run = await drive(engine);
    expect(outcome(run.steps, "dropped_null_block") + outcome(run.steps, "dropped_not_hashed")).toBe(0);
    expect(Object.keys(run.steps[0]!.kvOffload!.saveOutcomes).sort()).toEqual([
      "dropped_cpu_full", "dropped_not_hashed", "dropped_null_block", "dropped_request_gone", "skipped_already_cached", "skipped_in_flight", "stored",
    ]);
  });
});

describe("loads that go wrong", () => {
  test("a load that fails falls back to recompute with the same output", async () => {
    const cold = await runAlone(TARGET, { numBlocks: 14 });
    const { engine, runner } = makeEngine({ numBlocks: 14, kvOffload: offloadConfig({ cpu_bytes_to_use: 64 * BLOCK_BYTES }) });
    engine.addRequest(request("first", [...SHARED, 1, 2, 3], { maxTokens: 4 }));
    await drive(engine);
    for (let i = 0; i < 3; i++) { engine.addRequest(request(`o${i}`, prompt(150, 100 + i), { maxTokens: 4 })); await drive(engine); }
    // the tier's reads fail from now on (a real device error cannot be produced here: injected into the tier object)
    const tier = (engine.offload as unknown as { tier: { read: (s: number) => Promise<Uint8Array> } }).tier;
    tier.read = () => Promise.reject(new Error("injected read error"));
    const before = runner.numTokensComputed;
    engine.addRequest(TARGET);
    const run = await drive(engine);
    expect(run.outputs.get("again")!.tokens).toEqual(cold.tokens);
    expect(sumOffload(run.steps, (s) => s.loadBlocksIssued)).toBe(6);
    expect(sumOffload(run.steps, (s) => s.loadBlocksFailed)).toBe(6);
    expect(sumOffload(run.steps, (s) => s.loadBlocksCompleted)).toBe(0);
    expect(runner.numTokensComputed - before).toBe(103 + 5);
    expect(engine.offload!.numFreeSlots).toBe(64);
    expect(engine.kv.pool.numFreeBlocks).toBe(14);
  });

  test("a load slower than the deadline is abandoned and recomputed", async () => {
    const cold = await runAlone(TARGET, { numBlocks: 14 });
    const { engine } = makeEngine({ numBlocks: 14, kvOffload: offloadConfig({ cpu_bytes_to_use: 64 * BLOCK_BYTES }) });
    (engine.offload as unknown as { loadTimeoutMs: number }).loadTimeoutMs = 20;
    engine.addRequest(request("first", [...SHARED, 1, 2, 3], { maxTokens: 4 }));
    await drive(engine);
    for (let i = 0; i < 3; i++) { engine.addRequest(request(`o${i}`, prompt(150, 100 + i), { maxTokens: 4 })); await drive(engine); }
    const tier = (engine.offload as unknown as { tier: { read: (s: number) => Promise<Uint8Array> } }).tier;
    const realRead = tier.read.bind(tier);
    tier.read = (s) => new Promise((resolve) => setTimeout(() => resolve(realRead(s)), 200));
    engine.addRequest(TARGET);
    const run = await drive(engine);
    expect(run.outputs.get("again")!.tokens).toEqual(cold.tokens);
    expect(sumOffload(run.steps, (s) => s.loadBlocksFailed)).toBe(6);
    await engine.offload!.settle();
    expect(engine.offload!.numFreeSlots).toBe(64);
  });
});

describe("per-request facts", () => {
  test("a prefix from the tier counts in cached tokens, and its TTFT includes the load", async () => {
    const { engine } = makeEngine({ numBlocks: 14, kvOffload: offloadConfig({ cpu_bytes_to_use: 64 * BLOCK_BYTES }) });
    engine.addRequest(request("first", [...SHARED, 1, 2, 3], { maxTokens: 4 }));
    await drive(engine);
    for (let i = 0; i < 3; i++) { engine.addRequest(request(`o${i}`, prompt(150, 100 + i), { maxTokens: 4 })); await drive(engine); }
    // the tier answers after 60 ms (a slow disk; still under the deadline)
    const tier = (engine.offload as unknown as { tier: { read: (s: number) => Promise<Uint8Array> } }).tier;
    const realRead = tier.read.bind(tier);
    tier.read = (s) => new Promise((resolve) => setTimeout(() => resolve(realRead(s)), 60));
    engine.addRequest(TARGET);
    const run = await drive(engine);
    const first = run.outputs.get("again")!.deltas[0]!;
    expect(first.numCachedTokens).toBe(96);
    expect(first.times.firstTokenMs! - first.times.arrivalMs).toBeGreaterThanOrEqual(60);
    // it was not scheduled while it waited: its first scheduling comes after the load
    expect(first.times.scheduledMs! - first.times.arrivalMs).toBeGreaterThanOrEqual(60);
    expect(sumOffload(run.steps, (s) => s.loadBlocksCompleted)).toBe(6);
  });
});

describe("aborts", () => {
  test("1,000 random aborts mid-load and mid-store leak no block in either tier", async () => {
    const path = join(dir, "aborts", "kv");
    const cfg = offloadConfig({ kv_offload_backend: "disk", disk_path: path, disk_capacity_bytes: 24 * 4096, use_page_cache: true });
    const { engine } = makeEngine({ numBlocks: 16, maxNumBatchedTokens: 48, kvOffload: cfg });
    const prefixes = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => prompt(64, 500 + i));
    const random = rng(12345);
    const rand = (n: number): number => randomInt(random, n);
    let aborted = 0;
    let sawLoading = 0;
    let sawStoring = 0;
    let next = 0;
    const live: string[] = [];
    const outputs = new Map<string, Collected>();
    const sent = new Map<string, ReturnType<typeof request>>();
    while (aborted < 1000) {
      while (live.length < 3) {
        const id = `r${next++}`;
        const r = request(id, [...prefixes[rand(8)]!, ...prompt(1 + rand(20), next)], { maxTokens: 1 + rand(6) });
        sent.set(id, r);
        engine.addRequest(r);
        live.push(id);
      }
      const r = await engine.step();
      if (r) collect(outputs, r.deltas);
      // like the engine Worker between steps: sometimes the tier's I/O gets to run
      if (rand(2) === 0) await new Promise((resolve) => setImmediate(resolve));
      for (const d of r?.deltas ?? []) if (d.finishReason) live.splice(live.indexOf(d.requestId), 1);
      if ((engine.offload?.numLoading ?? 0) > 0) sawLoading++;
      if ((r?.stats.kvOffload?.pendingStoreBlocks ?? 0) > 0) sawStoring++;
      const victims = live.filter(() => rand(3) === 0);
      engine.abort(victims);
      for (const v of victims) live.splice(live.indexOf(v), 1);
      aborted += victims.length;
    }
    engine.abort(live);
    await engine.offload!.settle();
    engine.offload!.drain([]);
    expect(sawLoading).toBeGreaterThan(20);
    expect(sawStoring).toBeGreaterThan(20);
    expect(engine.hasWork()).toBe(false);
    expect(engine.kv.pool.numFreeBlocks).toBe(16);
    expect(engine.offload!.numFreeSlots).toBe(engine.offload!.capacityBlocks);
    expect(engine.offload!.numInFlight).toBe(0);
    expect(statSync(diskTierPath(path)).size).toBe(24 * 4096);
    engine.dispose();
    // the requests that ran to the end, many of them on loaded prefixes, said what a cold run says
    const finished = [...outputs].filter(([, c]) => c.finishReason === "length");
    expect(finished.length).toBeGreaterThan(100);
    expect(finished.filter(([, c]) => c.numCachedTokens > 0).length).toBeGreaterThan(20);
    for (const [id, c] of finished.slice(0, 60)) expect(c.tokens).toEqual((await runAlone(sent.get(id)!)).tokens);
  });
});
