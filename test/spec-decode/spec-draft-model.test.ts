/**
 * method "draft_model": a smaller GGUF with the target's vocabulary drafts greedily on its own KV cache (the target's
 * block ids). Greedy output is identical with and without it (random-weight tiny-smollm2 target with a 1-layer draft,
 * alone and 8 at a time, with prefix caching and with preemption by a small KV pool; stories260K drafting for itself
 * through the engine Worker); the KV pool is sized for both models; a draft with another vocabulary is refused at
 * start-up with vLLM's message.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $ } from "bun";
import { createEngineFrontend } from "../../src/frontend/engine-frontend.ts";
import { EngineCore } from "../../src/engine/engine-core.ts";
import { resolveEngineConfig } from "../../src/engine/engine-sizing.ts";
import type { EngineArgs } from "../../src/engine/protocol.ts";
import type { SpeculativeConfig } from "../../src/config/speculative-config.ts";
import type { StepStats } from "../../src/engine/stats.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../../src/engine/sampling-params.ts";
import { openModelGguf } from "../../src/gguf/model-source.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { createBackend } from "../../src/backend/create-backend.ts";
import { nowMs } from "../../src/util/clock.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { request, runToCompletion } from "../engine/helpers.ts";

const ROOT = join(import.meta.dir, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "fennec-draft-"));
const TARGET = join(dir, "target.gguf");
const DRAFT = join(dir, "draft.gguf");
const STORIES_COPY = join(dir, "stories260K.gguf");
const ARGS: EngineArgs = {
  maxNumSeqs: 16, maxNumBatchedTokens: 128, maxModelLen: 256, blockSize: 16, kvCacheMemoryBytes: null,
  enablePrefixCaching: true, threads: 1, device: "cpu",
};
const draftConfig = (model: string, k = 3): SpeculativeConfig => ({ method: "draft_model", model, numSpeculativeTokens: k, promptLookupMax: 0, promptLookupMin: 0 });
const totals = (steps: readonly StepStats[]) => steps.reduce((a, s) => ({ drafted: a.drafted + (s.specDecoding?.numDraftTokens ?? 0), accepted: a.accepted + (s.specDecoding?.numAcceptedTokens ?? 0) }), { drafted: 0, accepted: 0 });

async function runnerOf(path: string): Promise<Runner> {
  const file = await openModelGguf(path);
  if (!file.ok) throw new Error(file.error);
  const model = loadModel(file.value);
  if (!model.ok) throw new Error(model.error);
  return new Runner(model.value.config, model.value.weights, await createBackend({ kind: "wasm", threads: 1 }));
}

beforeAll(async () => {
  await ensureKernels();
  for (const [out, layers] of [[TARGET, 2], [DRAFT, 1]] as const) {
    const made = await $`${process.execPath} scripts/make-model.ts --shape tiny-smollm2-135m --type q8_0 --layers ${layers} --seed 3 --out ${out}`.cwd(ROOT).quiet().nothrow();
    if (made.exitCode !== 0) throw new Error(made.stderr.toString());
  }
  copyFileSync(join(ROOT, "build", "default-model.gguf"), STORIES_COPY);
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("draft model (in-process engine, random-weight tiny-smollm2)", () => {
  test.each([
    ["8 requests, prefix caching", 8, 64],
    ["8 requests, preemption (small KV pool)", 8, 20],
    ["1 request", 1, 64],
  ] as const)("greedy identical with and without the draft: %s", async (_name, count, numBlocks) => {
    const target = await runnerOf(TARGET);
    const vocab = target.config.vocabSize;
    const prompts = Array.from({ length: count }, (_, i) => Array.from({ length: 10 + 9 * i }, (_, j) => (i * 7919 + j * 104729) % vocab));
    prompts.push(prompts[0]!.slice()); // a repeat: its prompt blocks come from the prefix cache
    const outputs: number[][][] = [];
    let stats = { drafted: 0, accepted: 0 };
    let preempted = 0;
    for (const speculative of [null, draftConfig(DRAFT)]) {
      const draft = speculative ? await runnerOf(DRAFT) : null;
      const cfg = resolveEngineConfig({ ...ARGS, numKvBlocksOverride: numBlocks, speculativeConfig: speculative, numDraftTokensPerStep: null }, target, 1e9);
      if (!cfg.ok) throw new Error(cfg.error);
      const engine = new EngineCore(target, cfg.value, 0, nowMs, 1, { draftRunner: draft });
      prompts.forEach((p, i) => { const e = engine.addRequest(request(`r${i}`, p, { maxTokens: 40, ignoreEos: true })); if (e) throw new Error(e.message); });
      const { outputs: out, steps } = await runToCompletion(engine);
      outputs.push(prompts.map((_, i) => out.get(`r${i}`)!.tokens));
      expect(engine.kv.pool.numFreeBlocks).toBe(numBlocks);
      if (speculative) { stats = totals(steps); preempted = steps.reduce((a, s) => a + s.numPreempted, 0); }
      engine.dispose();
    }
    target.dispose();
    expect(outputs[1]).toEqual(outputs[0]);
    expect(stats.drafted).toBeGreaterThan(0);
    expect(stats.accepted).toBeGreaterThan(0);
    if (numBlocks < 30) expect(preempted).toBeGreaterThan(0);
  }, 120_000);

  test("the KV pool is shared out for both models: a block costs the target's bytes plus the draft's", async () => {
    const target = await runnerOf(TARGET);
    const draft = await runnerOf(DRAFT);
    const bytes = 64 * (target.kvBytesPerBlock(16) + draft.kvBytesPerBlock(16));
    const withDraft = resolveEngineConfig({ ...ARGS, kvCacheMemoryBytes: bytes }, target, 1e9, undefined, draft.kvBytesPerBlock(16));
    const alone = resolveEngineConfig({ ...ARGS, kvCacheMemoryBytes: bytes }, target, 1e9);
    expect(withDraft.ok && withDraft.value.numBlocks).toBe(64);
    expect(alone.ok && alone.value.numBlocks).toBeGreaterThan(64);
    target.dispose();
    draft.dispose();
  });
});

describe("draft model through the engine Worker", () => {
  test("stories260K drafting for itself: greedy identical at 8 concurrent, nearly every draft accepted", async () => {
    const steps: StepStats[] = [];
    const listener = { onStep: (s: StepStats) => steps.push(s), onRequestFinished: () => {} };
    const base = { ...ARGS, maxModelLen: null, numDraftTokensPerStep: null };
    const off = await createEngineFrontend({ modelPath: null, engineArgs: base, listeners: [] });
    const on = await createEngineFrontend({ modelPath: null, engineArgs: { ...base, speculativeConfig: draftConfig(STORIES_COPY, 4) }, listeners: [listener] });
    const texts = ["Once upon a time", "Tom had a big red ball.", "The cat sat", "Lily and Max went to the park."];
    const prompts = [...texts, ...texts].map((t) => off.tokenizer.encode(t, { addSpecial: true, parseSpecial: false }));
    const greedy = async (orch: typeof off, id: string, p: number[]): Promise<number[]> => {
      const ids: number[] = [];
      const sampling = { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, maxTokens: 48, ignoreEos: true };
      for await (const out of orch.generate({ requestId: id, promptTokenIds: p, sampling, arrivalMs: nowMs() })) for (const c of out.outputs) ids.push(...c.tokenIdsDelta);
      return ids;
    };
    const a = await Promise.all(prompts.map((p, i) => greedy(off, `a${i}`, p)));
    const b = await Promise.all(prompts.map((p, i) => greedy(on, `b${i}`, p)));
    await off.shutdown();
    await on.shutdown();
    expect(b).toEqual(a);
    const t = totals(steps);
    expect(t.drafted).toBeGreaterThan(100);
    expect(t.accepted / t.drafted).toBeGreaterThan(0.9);
  }, 120_000);

  test("a draft with another vocabulary is refused at start-up with vLLM's message", async () => {
    const failed = await createEngineFrontend({ modelPath: TARGET, engineArgs: { ...ARGS, speculativeConfig: draftConfig(STORIES_COPY) }, listeners: [] }).then(() => null, (e: unknown) => e);
    expect(String(failed)).toMatch(/Target and draft model should have the same vocabulary size. Target model vocab_size=\d+. Draft model vocab_size=512. Using models with different tokenizers/);
  }, 60_000);
});
