/**
 * The engine on the real default model (stories260K) through the orchestrator and an engine Worker on the kernel
 * backend: greedy output equals llama.cpp's golden ids, is the same alone and in a batch of 8, with prefix caching on
 * and off, and under preemption.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createEngineFrontend } from "../../src/frontend/engine-frontend.ts";
import type { EngineArgs } from "../../src/engine/protocol.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../../src/engine/sampling-params.ts";
import type { IterationStats as StepStats, StatsListener } from "../../src/frontend/iteration-stats.ts";
import type { Orchestrator } from "../../src/frontend/orchestrator.ts";
import { readGolden } from "../helpers/default-model-files.ts";

const golden = readGolden();
import { nowMs } from "../../src/util/clock.ts";

const ARGS: EngineArgs = {
  maxNumSeqs: 16, maxNumBatchedTokens: 64, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: null,
  enablePrefixCaching: true, threads: 1, device: "cpu",
};

const STORIES = [
  "Once upon a time, there was a little girl named Lily.",
  "Tom had a big red ball. He liked to play with it in the park every day with his friends.",
  "The cat",
  "One day, a small bird flew into the garden and sat on the tree. The bird was sad because it lost its mom. A kind boy saw the bird and wanted to help.",
  "Sue and Ben were best friends.",
  "It was a sunny day.",
  "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her dog, Max.",
  "The old man",
];

class StepLog implements StatsListener {
  readonly steps: StepStats[] = [];
  onStep(s: StepStats): void { this.steps.push(s); }
  onRequestFinished(): void {}
}

const started: Orchestrator[] = [];
async function start(args: Partial<EngineArgs> = {}): Promise<{ orch: Orchestrator; log: StepLog }> {
  const log = new StepLog();
  const orch = await createEngineFrontend({ modelPath: null, engineArgs: { ...ARGS, ...args }, listeners: [log] });
  started.push(orch);
  return { orch, log };
}
afterAll(async () => { await Promise.all(started.map((o) => o.shutdown())); });

async function greedy(orch: Orchestrator, id: string, promptTokenIds: number[], maxTokens: number): Promise<{ ids: number[]; cached: number }> {
  const ids: number[] = [];
  let cached = 0;
  const sampling = { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, maxTokens, ignoreEos: true };
  for await (const out of orch.generate({ requestId: id, promptTokenIds, sampling, arrivalMs: nowMs() })) {
    for (const c of out.outputs) ids.push(...c.tokenIdsDelta);
    cached = out.numCachedTokens;
  }
  return { ids, cached };
}

describe("real model (stories260K, kernel backend)", () => {
  let base: Orchestrator;
  let prompts: number[][];
  let alone: number[][];
  const maxTokens = (i: number): number => 10 + 7 * i;

  beforeAll(async () => {
    base = (await start()).orch;
    prompts = STORIES.map((s) => base.tokenizer.encode(s, { addSpecial: true, parseSpecial: false }));
    alone = [];
    for (let i = 0; i < prompts.length; i++) alone.push((await greedy(base, `alone${i}`, prompts[i]!, maxTokens(i))).ids);
  });

  test("greedy from BOS reproduces llama.cpp's golden ids", async () => {
    const ids = (await greedy(base, "golden", [base.tokenizer.bosId!], 128)).ids;
    expect(ids).toEqual(golden.greedyFromBos.ids.slice(0, 128));
  });

  test("greedy output is identical alone and inside a batch of 8 mixed requests", async () => {
    const { orch, log } = await start();
    const batched = await Promise.all(prompts.map((p, i) => greedy(orch, `b${i}`, p, maxTokens(i))));
    batched.forEach((b, i) => expect(b.ids).toEqual(alone[i]!));
    expect(Math.max(...log.steps.map((s) => s.batchSize))).toBeGreaterThanOrEqual(6);
  });

  test("greedy output is identical with prefix caching off, and a shared prefix is served from the cache", async () => {
    const { orch } = await start({ enablePrefixCaching: false });
    const off = await Promise.all(prompts.map((p, i) => greedy(orch, `off${i}`, p, maxTokens(i))));
    off.forEach((o, i) => expect(o.ids).toEqual(alone[i]!));
    expect(off.every((o) => o.cached === 0)).toBe(true);
    // prompt 6 starts with prompt 0's sentence: after prompt 0 ran, the shared full blocks come from the cache
    const { orch: cachedOrch, log } = await start();
    await greedy(cachedOrch, "first", prompts[0]!, maxTokens(0));
    let common = 0;
    while (prompts[0]![common] === prompts[6]![common]) common++;
    expect(common).toBeGreaterThanOrEqual(16);
    const second = await greedy(cachedOrch, "second", prompts[6]!, maxTokens(6));
    expect(second.ids).toEqual(alone[6]!);
    expect(second.cached).toBe(Math.floor(common / 16) * 16);
    const last = log.steps[log.steps.length - 1]!;
    expect(last.kvCacheUsage).toBe(0);
  });

  test("seeded sampling is reproducible and n = 3 children differ", async () => {
    const p = prompts[3]!;
    const run = async (id: string): Promise<{ texts: string[] }> => {
      const texts: string[] = ["", "", ""];
      const sampling = { ...DEFAULT_SAMPLING_PARAMS, n: 3, temperature: 1, topP: 0.9, seed: 1234, maxTokens: 24 };
      for await (const out of base.generate({ requestId: id, promptTokenIds: p, sampling, arrivalMs: nowMs() })) {
        for (const c of out.outputs) texts[c.index] += c.textDelta;
      }
      return { texts };
    };
    const a = await run("seeded-a");
    const b = await run("seeded-b");
    expect(a.texts).toEqual(b.texts);
    expect(new Set(a.texts).size).toBeGreaterThan(1);
    expect(a.texts.every((t) => t.length > 0)).toBe(true);
  });

  test("a KV cache too small for all running requests preempts and keeps the greedy output", async () => {
    // 14 blocks of 16: the longest request needs 7, the 8 together about 40
    const { orch, log } = await start({ numKvBlocksOverride: 14, maxNumBatchedTokens: 32 });
    const out = await Promise.all(prompts.map((p, i) => greedy(orch, `pre${i}`, p, maxTokens(i))));
    out.forEach((o, i) => expect(o.ids).toEqual(alone[i]!));
    expect(log.steps.reduce((s, x) => s + x.numPreempted, 0)).toBeGreaterThan(0);
  });
});
