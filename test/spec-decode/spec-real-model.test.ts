/**
 * Speculation on real models, kernel backend: the default model (stories260K) through the orchestrator and an engine
 * Worker, and random-weight models of real shapes (make-model tiny shapes, 2 layers) on an in-process engine. Greedy
 * output is the same with the ngram proposer on as off, alone and 8 at a time, with prefix caching, and with
 * preemption forced by a small KV pool.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $ } from "bun";
import { createEngineFrontend } from "../../src/frontend/engine-frontend.ts";
import type { EngineArgs } from "../../src/engine/protocol.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../../src/engine/sampling-params.ts";
import type { StepStats } from "../../src/engine/stats.ts";
import type { IterationStats, StatsListener } from "../../src/frontend/iteration-stats.ts";
import type { SpeculativeConfig } from "../../src/config/speculative-config.ts";
import { nowMs } from "../../src/util/clock.ts";
import { EngineCore } from "../../src/engine/engine-core.ts";
import { resolveEngineConfig } from "../../src/engine/engine-sizing.ts";
import { openModelGguf } from "../../src/gguf/model-source.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { request, runToCompletion } from "../engine/helpers.ts";

const NGRAM: SpeculativeConfig = { method: "ngram", model: null, numSpeculativeTokens: 4, promptLookupMax: 4, promptLookupMin: 2 };
const ARGS: EngineArgs = {
  maxNumSeqs: 16, maxNumBatchedTokens: 128, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: null,
  enablePrefixCaching: true, threads: 1, device: "cpu",
};
const STORIES = [
  "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her dog, Max.",
  "Tom had a big red ball. He liked to play with it in the park every day with his friends.",
  "The cat",
  "One day, a small bird flew into the garden and sat on the tree. The bird was sad because it lost its mom.",
  "Sue and Ben were best friends.",
  "It was a sunny day.",
  "Once upon a time, there was a little girl named Lily.",
  "The old man",
];

class StepLog implements StatsListener {
  readonly steps: IterationStats[] = [];
  onStep(s: IterationStats): void { this.steps.push(s); }
  onRequestFinished(): void {}
}
const accepted = (steps: readonly StepStats[]): number => steps.reduce((a, s) => a + (s.specDecoding?.numAcceptedTokens ?? 0), 0);

describe("default model (stories260K) through the engine Worker", () => {
  const started: { shutdown(): Promise<void> }[] = [];
  afterAll(async () => { await Promise.all(started.map((o) => o.shutdown())); });
  async function start(args: Partial<EngineArgs>) {
    const log = new StepLog();
    const orch = await createEngineFrontend({ modelPath: null, engineArgs: { ...ARGS, ...args }, listeners: [log] });
    started.push(orch);
    return { orch, log };
  }
  async function greedy(orch: Awaited<ReturnType<typeof start>>["orch"], id: string, promptTokenIds: number[], maxTokens: number): Promise<number[]> {
    const ids: number[] = [];
    const sampling = { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, maxTokens, ignoreEos: true };
    for await (const out of orch.generate({ requestId: id, promptTokenIds, sampling, arrivalMs: nowMs() })) for (const c of out.outputs) ids.push(...c.tokenIdsDelta);
    return ids;
  }

  let prompts: number[][] = [];
  let off: number[][] = [];
  beforeAll(async () => {
    const { orch } = await start({});
    prompts = STORIES.map((s) => orch.tokenizer.encode(s, { addSpecial: true, parseSpecial: false }));
    off = await Promise.all(prompts.map((p, i) => greedy(orch, `off${i}`, p, 60 + 5 * i)));
  });

  test("1 request and 8 concurrent: identical greedy ids, drafts accepted", async () => {
    // no draft cap: every one of the 8 verifies drafts (the default cap would leave a full batch without any)
    const { orch, log } = await start({ speculativeConfig: NGRAM, numDraftTokensPerStep: null });
    expect(await greedy(orch, "alone", prompts[0]!, 60)).toEqual(off[0]!);
    const on = await Promise.all(prompts.map((p, i) => greedy(orch, `on${i}`, p, 60 + 5 * i)));
    expect(on).toEqual(off);
    expect(accepted(log.steps)).toBeGreaterThan(50);
    // prompt 6 is a prefix of prompt 0: served from the prefix cache
    expect(log.steps.reduce((a, s) => a + s.prefixCacheHits, 0)).toBeGreaterThan(0);
  });

  test("preemption by a small KV pool, prefix caching off: identical greedy ids", async () => {
    const { orch, log } = await start({ speculativeConfig: NGRAM, numDraftTokensPerStep: null, numKvBlocksOverride: 20, maxNumBatchedTokens: 32, enablePrefixCaching: false });
    const on = await Promise.all(prompts.map((p, i) => greedy(orch, `pre${i}`, p, 60 + 5 * i)));
    expect(on).toEqual(off);
    expect(log.steps.reduce((a, s) => a + s.numPreempted, 0)).toBeGreaterThan(0);
    expect(log.steps[log.steps.length - 1]!.kvCacheUsage).toBe(0);
  });
});

describe("random-weight models of real shapes (in-process engine)", () => {
  const dir = mkdtempSync(join(tmpdir(), "fennec-spec-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  beforeAll(async () => { await ensureKernels(); });

  test.each(["tiny-smollm2-135m", "tiny-qwen2.5-0.5b"])("%s: greedy identical off and on, 8 requests, small KV pool", async (shape) => {
    const out = join(dir, `${shape}.gguf`);
    const made = await $`${process.execPath} scripts/make-model.ts --shape ${shape} --type q8_0 --layers 2 --seed 3 --out ${out}`.quiet().nothrow();
    expect(made.exitCode).toBe(0);
    const file = await openModelGguf(out);
    if (!file.ok) throw new Error(file.error);
    const model = loadModel(file.value);
    if (!model.ok) throw new Error(model.error);
    const runner = new Runner(model.value.config, model.value.weights, await createBackend({ kind: "wasm", threads: 1 }));
    const vocab = model.value.config.vocabSize;
    const prompts = Array.from({ length: 8 }, (_, i) => Array.from({ length: 12 + 5 * i }, (_, j) => (i * 7919 + j * 104729) % vocab));
    const results: number[][][] = [];
    for (const speculative of [null, NGRAM]) {
      const cfg = resolveEngineConfig({ ...ARGS, maxModelLen: 256, numKvBlocksOverride: 24, speculativeConfig: speculative, numDraftTokensPerStep: null }, runner, 1e9);
      if (!cfg.ok) throw new Error(cfg.error);
      const engine = new EngineCore(runner, cfg.value, 0, nowMs, 1);
      prompts.forEach((p, i) => engine.addRequest(request(`r${i}`, p, { maxTokens: 48, ignoreEos: true })));
      const { outputs, steps } = await runToCompletion(engine);
      results.push(prompts.map((_, i) => outputs.get(`r${i}`)!.tokens));
      if (speculative) expect(accepted(steps)).toBeGreaterThan(0);
      expect(engine.kv.pool.numFreeBlocks).toBe(24);
    }
    runner.dispose();
    expect(results[1]).toEqual(results[0]);
  });
});
