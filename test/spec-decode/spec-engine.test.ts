/**
 * Speculative decoding in the engine step, on the fake runner (its logits hash the whole KV chain through the block
 * table, so a rejected draft's stale slot, a wrong block or a skipped position changes the output): greedy output is
 * identical with speculation off and on, alone and 8 at a time, with prefix caching, chunked prefill and preemption;
 * stops inside an accepted run emit nothing past the stop; the step's spec stats add up; no block leaks.
 */
import { describe, expect, test } from "bun:test";
import type { EngineConfig } from "../../src/engine/engine-sizing.ts";
import type { SpeculativeConfig } from "../../src/config/speculative-config.ts";
import type { StepStats } from "../../src/engine/stats.ts";
import type { SamplingParams } from "../../src/engine/sampling-params.ts";
import { engineConfig, makeEngine, prompt, request, runToCompletion, type Collected } from "../engine/helpers.ts";
import { FakeRunner, type FakeRunnerOptions } from "../engine/fake-runner.ts";
import { EngineCore } from "../../src/engine/engine-core.ts";
import type { DraftProposer } from "../../src/engine/spec-decode/proposer.ts";

const NGRAM: SpeculativeConfig = { method: "ngram", model: null, numSpeculativeTokens: 4, promptLookupMax: 3, promptLookupMin: 1 };
/** a small vocabulary makes the fake model's greedy output repeat, so drafts get accepted as well as rejected */
const RUNNER: FakeRunnerOptions = { vocabSize: 7 };

async function run(prompts: number[][], config: Partial<EngineConfig>, sampling: Partial<SamplingParams> = {}, runner: FakeRunnerOptions = RUNNER, eos?: number[]) {
  const { engine } = makeEngine(config, runner);
  prompts.forEach((p, i) => { const e = engine.addRequest(request(`r${i}`, p, sampling, eos)); if (e) throw new Error(e.message); });
  const { outputs, steps } = await runToCompletion(engine);
  expect(engine.kv.pool.numFreeBlocks).toBe(engine.config.numBlocks); // nothing leaked
  return { outputs: prompts.map((_, i) => outputs.get(`r${i}`)!), steps };
}

const tokensOf = (c: Collected[]): number[][] => c.map((o) => o.tokens);

function specTotals(steps: readonly StepStats[]): { drafts: number; draftTokens: number; accepted: number; perPos: number[]; generation: number } {
  const t = { drafts: 0, draftTokens: 0, accepted: 0, perPos: [0, 0, 0, 0], generation: 0 };
  for (const s of steps) {
    t.generation += s.numGenerationTokens;
    const d = s.specDecoding;
    if (!d) continue;
    t.drafts += d.numDrafts; t.draftTokens += d.numDraftTokens; t.accepted += d.numAcceptedTokens;
    d.numAcceptedTokensPerPos.forEach((n, i) => { t.perPos[i]! += n; });
  }
  return t;
}

describe("speculative decoding in the engine (fake runner)", () => {
  const prompts = Array.from({ length: 8 }, (_, i) => prompt(10 + 7 * i, i + 1, 7));

  test.each([
    ["1 request", 1, {}],
    ["8 concurrent", 8, {}],
    ["8 concurrent, chunked prefill (budget 8)", 8, { maxNumBatchedTokens: 8 }],
    ["8 concurrent, no prefix caching", 8, { enablePrefixCaching: false }],
    ["8 concurrent, preemption (small KV pool)", 8, { numBlocks: 30, blockSize: 4 }],
  ] as const)("greedy output is identical off and on: %s", async (_name, count, config) => {
    const ps = prompts.slice(0, count);
    const off = await run(ps, { ...config }, { maxTokens: 40 });
    const on = await run(ps, { ...config, speculative: NGRAM }, { maxTokens: 40 });
    expect(tokensOf(on.outputs)).toEqual(tokensOf(off.outputs));
    const t = specTotals(on.steps);
    expect(t.accepted).toBeGreaterThan(0); // speculation really happened
    expect(t.draftTokens).toBeGreaterThan(t.accepted); // and some drafts were rejected
    // a small token budget is shared with the drafts, so only a roomy one must save steps
    if (!("maxNumBatchedTokens" in config)) expect(on.steps.length).toBeLessThan(off.steps.length);
    if ("numBlocks" in config) expect(on.steps.some((s) => s.numPreempted > 0)).toBe(true);
  });

  test("prefix caching: a repeated prompt hits the cache and still decodes the same", async () => {
    const p = prompts[3]!;
    const { engine } = makeEngine({ speculative: NGRAM }, RUNNER);
    engine.addRequest(request("a", p, { maxTokens: 40 }));
    const first = (await runToCompletion(engine)).outputs.get("a")!;
    engine.addRequest(request("b", p, { maxTokens: 40 }));
    const second = (await runToCompletion(engine)).outputs.get("b")!;
    expect(second.numCachedTokens).toBeGreaterThan(0);
    expect(second.tokens).toEqual(first.tokens);
  });

  test("metric arithmetic: accepted <= drafted, drafts <= steps, per-position non-increasing, generation = tokens received", async () => {
    const on = await run(prompts, { speculative: NGRAM }, { maxTokens: 40 });
    const t = specTotals(on.steps);
    expect(t.accepted).toBeLessThanOrEqual(t.draftTokens);
    expect(t.draftTokens).toBeLessThanOrEqual(t.drafts * NGRAM.numSpeculativeTokens);
    for (let i = 1; i < t.perPos.length; i++) expect(t.perPos[i]!).toBeLessThanOrEqual(t.perPos[i - 1]!);
    expect(t.perPos.reduce((a, b) => a + b, 0)).toBe(t.accepted);
    expect(t.perPos[0]!).toBeLessThanOrEqual(t.drafts);
    for (const s of on.steps) expect(s.specDecoding!.numDrafts).toBeLessThanOrEqual(s.batchSize);
    expect(t.generation).toBe(on.outputs.reduce((a, o) => a + o.tokens.length, 0));
  });

  test("a stop inside an accepted run: drafts past it still count as accepted (vLLM counts before check_stop truncates)", async () => {
    const p = prompts[3]!;
    const full = (await run([p], {}, { maxTokens: 40 })).outputs[0]!.tokens;
    // drafts = the true continuation: every one is accepted, including those past max_tokens
    const proposer: DraftProposer = {
      propose(requests) { for (const req of requests) req.draftTokenIds = full.slice(req.numOutputTokens, req.numOutputTokens + 4); },
    };
    const engine = new EngineCore(new FakeRunner(RUNNER), engineConfig({ speculative: NGRAM }), 0, () => performance.now(), 1234, { proposer });
    engine.addRequest(request("r", p, { maxTokens: 9 }));
    const { outputs, steps } = await runToCompletion(engine);
    expect(outputs.get("r")!.tokens).toEqual(full.slice(0, 9));
    const t = specTotals(steps);
    // 1 token from the prefill, 5 from the first verifying step; the second stops at its third draft, the fourth counts
    expect(t.drafts).toBe(2);
    expect(t.draftTokens).toBe(8);
    expect(t.accepted).toBe(8);
    expect(t.generation).toBe(9);
  });

  test("max_tokens, stop token ids, EOS and min_tokens inside an accepted run: the same tokens and reasons as without", async () => {
    for (const sampling of [{ maxTokens: 13 }, { maxTokens: 40, stopTokenIds: [4] }, { maxTokens: 40, stopTokenIds: [4], minTokens: 9 }, { maxTokens: 7 }] as Partial<SamplingParams>[]) {
      for (const eos of [undefined, [3]]) {
        const off = await run(prompts, {}, sampling, RUNNER, eos);
        const on = await run(prompts, { speculative: NGRAM }, sampling, RUNNER, eos);
        expect(tokensOf(on.outputs)).toEqual(tokensOf(off.outputs));
        expect(on.outputs.map((o) => [o.finishReason, o.stopReason])).toEqual(off.outputs.map((o) => [o.finishReason, o.stopReason]));
        for (const o of on.outputs) expect(o.tokens.length).toBeLessThanOrEqual(sampling.maxTokens!);
      }
    }
  });

  test("logprobs: one entry per emitted token, equal to speculation off", async () => {
    const off = await run(prompts.slice(0, 3), {}, { maxTokens: 30, logprobs: 2 });
    const on = await run(prompts.slice(0, 3), { speculative: NGRAM }, { maxTokens: 30, logprobs: 2 });
    for (let i = 0; i < 3; i++) {
      expect(on.outputs[i]!.logprobs.length).toBe(on.outputs[i]!.tokens.length);
      expect(on.outputs[i]!.logprobs).toEqual(off.outputs[i]!.logprobs);
    }
    expect(on.outputs.some((o) => o.deltas.some((d) => d.newTokenIds.length > 1))).toBe(true);
  });

  test("max-model-len bounds the drafts: the runner never sees a position past it", async () => {
    const off = await run(prompts.slice(0, 2), { maxModelLen: 40 }, { maxTokens: null });
    const on = await run(prompts.slice(0, 2), { maxModelLen: 40, speculative: NGRAM }, { maxTokens: null });
    expect(tokensOf(on.outputs)).toEqual(tokensOf(off.outputs));
    expect(on.outputs.map((o) => o.finishReason)).toEqual(["length", "length"]);
  });

  test("seeded random sampling runs with speculation (penalties, top_k, top_p) and is reproducible", async () => {
    const sampling: Partial<SamplingParams> = { temperature: 0.8, topK: 5, topP: 0.9, seed: 7, maxTokens: 40, frequencyPenalty: 0.2, repetitionPenalty: 1.1 };
    const a = await run(prompts, { speculative: NGRAM }, sampling);
    const b = await run(prompts, { speculative: NGRAM }, sampling);
    expect(tokensOf(a.outputs)).toEqual(tokensOf(b.outputs));
    expect(specTotals(a.steps).accepted).toBeGreaterThan(0);
  });

  test("the draft cap is shared by the decoding requests: a full batch verifies none, a lone request all k", async () => {
    const capped = await run(prompts, { speculative: NGRAM, maxDraftTokensPerStep: NGRAM.numSpeculativeTokens + 1 }, { maxTokens: 40 });
    const off = await run(prompts, {}, { maxTokens: 40 });
    expect(tokensOf(capped.outputs)).toEqual(tokensOf(off.outputs));
    for (const s of capped.steps) {
      const d = s.specDecoding!;
      expect(d.numDraftTokens).toBeLessThanOrEqual(NGRAM.numSpeculativeTokens + 1);
      if (s.numRunning >= 6 && s.numPromptTokens === 0) expect(d.numDraftTokens).toBe(0);
    }
    const alone = await run(prompts.slice(0, 1), { speculative: NGRAM, maxDraftTokensPerStep: NGRAM.numSpeculativeTokens + 1 }, { maxTokens: 40 });
    expect(alone.steps.some((s) => s.specDecoding!.numDraftTokens === NGRAM.numSpeculativeTokens)).toBe(true);
  });

  test("min_p and logit_bias are refused per request, as vLLM does", () => {
    const { engine } = makeEngine({ speculative: NGRAM }, RUNNER);
    expect(engine.addRequest(request("x", [1, 2, 3], { temperature: 1, minP: 0.1 }))?.message).toBe("The min_p and logit_bias sampling parameters are not yet supported with speculative decoding.");
    expect(engine.addRequest(request("y", [1, 2, 3], { logitBias: { "2": 1 } }))?.code).toBe("invalid_sampling_params");
    expect(engine.addRequest(request("z", [1, 2, 3], { temperature: 0, minP: 0.1 }))).toBeNull(); // greedy forces min_p 0
  });
});
