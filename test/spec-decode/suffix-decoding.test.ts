/**
 * Suffix decoding (vLLM method "suffix", Arctic Inference's algorithm on fennec's own trie): the trie's counts and
 * drafts equal a brute-force count over the stored sequences (random sequences, depths, removals and parameters);
 * vLLM's suffix_decoding_* keys, defaults and bound errors; in the engine (fake runner) greedy output is identical with
 * suffix decoding off and on (1 and 8 requests, preemption), a repeated prompt drafts from the global tree of earlier
 * responses (not with suffix_decoding_max_cached_requests 0, nor once FIFO eviction dropped it); on the default model
 * through the engine Worker greedy output is identical and drafts are accepted.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { SuffixTree, type SuffixSpeculation } from "../../src/engine/spec-decode/suffix-tree.ts";
import { parseSpeculativeConfig, speculativeConfigNote, speculativeConfigRepr, SUFFIX_DECODING_DEFAULTS, type SpeculativeConfig } from "../../src/config/speculative-config.ts";
import type { StepStats } from "../../src/engine/stats.ts";
import type { EngineConfig } from "../../src/engine/engine-sizing.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../../src/engine/sampling-params.ts";
import { createEngineFrontend } from "../../src/frontend/engine-frontend.ts";
import type { IterationStats, StatsListener } from "../../src/frontend/iteration-stats.ts";
import type { EngineArgs } from "../../src/engine/protocol.ts";
import { nowMs } from "../../src/util/clock.ts";
import { makeEngine, prompt, request, runToCompletion } from "../engine/helpers.ts";

/** xorshift for reproducible random cases */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; return (s >>> 0) / 2 ** 32; };
}

/** The reference: counts straight from the sequences, the draft rule spelled out without a tree. */
class BruteForce {
  readonly seqs = new Map<number, number[]>();
  constructor(readonly depth: number, readonly vocab: number) {}
  count(s: readonly number[]): number {
    if (s.length > this.depth) return 0;
    let n = 0;
    for (const seq of this.seqs.values()) {
      for (let i = 0; i + s.length <= seq.length; i++) if (s.every((t, j) => seq[i + j] === t)) n++;
    }
    return n;
  }
  distinctSubstrings(): number {
    const seen = new Set<string>();
    for (const seq of this.seqs.values()) for (let i = 0; i < seq.length; i++) for (let l = 1; l <= this.depth && i + l <= seq.length; l++) seen.add(seq.slice(i, i + l).join(","));
    return seen.size;
  }
  speculate(pattern: readonly number[], spec: SuffixSpeculation): { tokenIds: number[]; score: number; matchLen: number } {
    let best = { tokenIds: [] as number[], score: 0, matchLen: 0 };
    for (let m = 1; m < pattern.length; m++) {
      const s = pattern.slice(pattern.length - m);
      if (this.count(s) === 0) break;
      const maxTokens = Math.max(0, Math.min(spec.maxSpecTokens, Math.floor(m * spec.maxSpecFactor + 1e-6)));
      let cur = [...s];
      let prob = 1;
      let score = 0;
      const tokenIds: number[] = [];
      while (tokenIds.length < maxTokens) {
        let bestT = -1;
        let bestC = 0;
        for (let t = 0; t < this.vocab; t++) {
          const c = this.count([...cur, t]);
          if (c > bestC) { bestC = c; bestT = t; }
        }
        if (bestC === 0) break;
        prob *= bestC / this.count(cur);
        if (prob < spec.minTokenProb) break;
        tokenIds.push(bestT);
        score += prob;
        cur = [...cur, bestT];
      }
      if (score >= best.score) best = { tokenIds, score, matchLen: m };
    }
    return best;
  }
}

describe("suffix trie (Arctic SuffixTree semantics)", () => {
  test("counts, node set and drafts equal the brute-force reference over 60 random cases with removals", () => {
    for (let c = 0; c < 60; c++) {
      const r = rng(c + 1);
      const depth = 1 + Math.floor(r() * 8);
      const vocab = 2 + Math.floor(r() * 4);
      const tree = new SuffixTree(depth);
      const ref = new BruteForce(depth, vocab);
      const numSeqs = 1 + Math.floor(r() * 4);
      for (let s = 0; s < numSeqs; s++) {
        const len = Math.floor(r() * 40);
        const seq = Array.from({ length: len }, () => Math.floor(r() * vocab));
        // appended in two parts: growing sequences are how the proposer uses it
        tree.extend(s, seq.slice(0, len >> 1));
        tree.extend(s, seq.slice(len >> 1));
        if (len > 0) ref.seqs.set(s, seq);
      }
      if (numSeqs > 1 && r() < 0.5) { tree.remove(0); ref.seqs.delete(0); }
      expect(tree.numNodes).toBe(ref.distinctSubstrings());
      for (let q = 0; q < 8; q++) {
        const pattern = Array.from({ length: 1 + Math.floor(r() * (depth + 2)) }, () => Math.floor(r() * vocab));
        const spec = { maxSpecTokens: 1 + Math.floor(r() * 8), maxSpecFactor: [0.5, 1, 2, 4][Math.floor(r() * 4)]!, minTokenProb: [0, 0.1, 0.3, 0.6][Math.floor(r() * 4)]! };
        const got = tree.speculate(pattern, spec);
        const want = ref.speculate(pattern, spec);
        expect({ ...got, tokenIds: [...got.tokenIds] }).toEqual(want);
      }
    }
  });

  test("removing every sequence leaves an empty trie", () => {
    const tree = new SuffixTree(5);
    tree.extend(1, [1, 2, 3, 1, 2, 3, 4]);
    tree.extend(2, [2, 3, 4, 4]);
    tree.remove(1);
    tree.remove(2);
    expect(tree.numNodes).toBe(0);
    expect(tree.speculate([1, 2, 3], { maxSpecTokens: 4, maxSpecFactor: 1, minTokenProb: 0 }).tokenIds).toEqual([]);
  });

  test("a repeated span drafts its continuation; min_token_prob and max_spec_factor cut it", () => {
    const tree = new SuffixTree(24);
    tree.extend(0, [5, 6, 7, 8, 9, 10, 11, 5, 6, 7]);
    // "5 6 7" occurred before, followed by 8 9 10 ...: match length 3 allows 3 tokens at factor 1
    expect(tree.speculate([5, 6, 7], { maxSpecTokens: 8, maxSpecFactor: 1, minTokenProb: 0.1 }).tokenIds).toEqual([8, 9]);
    // match lengths stop one short of the pattern: "5 6 7" matches for [11, 5, 6, 7] and allows 3
    expect(tree.speculate([11, 5, 6, 7], { maxSpecTokens: 8, maxSpecFactor: 1, minTokenProb: 0.1 }).tokenIds).toEqual([8, 9, 10]);
    expect(tree.speculate([9, 5, 6, 7], { maxSpecTokens: 8, maxSpecFactor: 2, minTokenProb: 0.1 }).tokenIds).toEqual([8, 9, 10, 11, 5, 6]);
    expect(tree.speculate([9, 5, 6, 7], { maxSpecTokens: 4, maxSpecFactor: 2, minTokenProb: 0.1 }).tokenIds).toEqual([8, 9, 10, 11]);
    // "7" occurs twice (once at the end, with nothing after it): every token after it has probability 1/2
    expect(tree.speculate([9, 5, 6, 7], { maxSpecTokens: 8, maxSpecFactor: 2, minTokenProb: 0.6 }).tokenIds).toEqual([]);
  });
});

describe("--speculative-config method suffix (vLLM's keys, defaults and errors)", () => {
  test("defaults: k is the tree depth (vLLM's log line), the four keys at vLLM's values; the repr", () => {
    const c = parseSpeculativeConfig('{"method": "suffix"}');
    if (!c.ok) throw new Error(c.error);
    expect(c.value.suffix).toEqual(SUFFIX_DECODING_DEFAULTS);
    expect(SUFFIX_DECODING_DEFAULTS).toEqual({ maxTreeDepth: 24, maxCachedRequests: 10000, maxSpecFactor: 1, minTokenProb: 0.1 });
    expect(c.value.numSpeculativeTokens).toBe(24);
    expect(speculativeConfigNote(c.value)).toBe("Defaulted num_speculative_tokens to 24 for suffix decoding.");
    expect(speculativeConfigRepr(c.value)).toBe("SpeculativeConfig(method='suffix', model=None, num_spec_tokens=24)");
    const d = parseSpeculativeConfig({ method: "suffix", "num-speculative-tokens": 6, suffix_decoding_max_tree_depth: 12, suffix_decoding_max_cached_requests: 0, suffix_decoding_max_spec_factor: 2.5, suffix_decoding_min_token_prob: 0.25 });
    if (!d.ok) throw new Error(d.error);
    expect(d.value.suffix).toEqual({ maxTreeDepth: 12, maxCachedRequests: 0, maxSpecFactor: 2.5, minTokenProb: 0.25 });
    expect(d.value.numSpeculativeTokens).toBe(6);
    expect(speculativeConfigNote(d.value)).toBeNull();
  });

  test.each([
    ['{"method":"suffix","suffix_decoding_max_tree_depth":0}', "suffix_decoding_max_tree_depth=0 must be >= 1"],
    ['{"method":"suffix","suffix_decoding_max_cached_requests":-1}', "suffix_decoding_max_cached_requests=-1 must be >= 0"],
    ['{"method":"suffix","suffix_decoding_max_spec_factor":-0.5}', "suffix_decoding_max_spec_factor=-0.5 must be >= 0"],
    ['{"method":"suffix","suffix_decoding_min_token_prob":1.5}', "suffix_decoding_min_token_prob=1.5 must be in [0, 1]"],
    ['{"method":"suffix","suffix_decoding_max_tree_depth":2.5}', "SpeculativeConfig: suffix_decoding_max_tree_depth: Input should be a valid integer (got 2.5)"],
    ['{"method":"suffix","num_speculative_tokens":0}', "SpeculativeConfig: num_speculative_tokens: Input should be greater than 0 (got 0)"],
    ['{"method":"ngram","num_speculative_tokens":3,"suffix_decoding_min_token_prob":0.2}', "suffix_decoding_min_token_prob applies to method 'suffix' only; remove it for method 'ngram'"],
    ['{"method":"suffix","prompt_lookup_max":3}', "prompt_lookup_max applies to method 'ngram' only; remove it for method 'suffix'"],
  ])("%s -> %s", (json, message) => {
    const c = parseSpeculativeConfig(json);
    expect(c.ok).toBe(false);
    if (!c.ok) expect(c.error).toBe(message);
  });
});

function specTotals(steps: readonly (StepStats | IterationStats)[]): { drafts: number; draftTokens: number; accepted: number } {
  const t = { drafts: 0, draftTokens: 0, accepted: 0 };
  for (const s of steps) {
    const d = s.specDecoding;
    if (!d) continue;
    t.drafts += d.numDrafts; t.draftTokens += d.numDraftTokens; t.accepted += d.numAcceptedTokens;
  }
  return t;
}

function suffix(overrides: Record<string, unknown> = {}): SpeculativeConfig {
  const c = parseSpeculativeConfig({ method: "suffix", num_speculative_tokens: 8, ...overrides });
  if (!c.ok) throw new Error(c.error);
  return c.value;
}

describe("suffix decoding in the engine (fake runner)", () => {
  const prompts = Array.from({ length: 8 }, (_, i) => prompt(10 + 7 * i, i + 1, 7));

  test.each([
    ["1 request", 1, {}],
    ["8 concurrent", 8, {}],
    ["8 concurrent, preemption (small KV pool)", 8, { numBlocks: 30, blockSize: 4 }],
  ] as const)("greedy output is identical off and on: %s", async (_name, count, config: Partial<EngineConfig>) => {
    const outputs: number[][][] = [];
    let onSteps: StepStats[] = [];
    for (const speculative of [null, suffix()]) {
      const { engine } = makeEngine({ ...config, ...(speculative ? { speculative, maxDraftTokensPerStep: null } : {}) }, { vocabSize: 7 });
      prompts.slice(0, count).forEach((p, i) => engine.addRequest(request(`r${i}`, p, { maxTokens: 40 })));
      const { outputs: o, steps } = await runToCompletion(engine);
      outputs.push(prompts.slice(0, count).map((_, i) => o.get(`r${i}`)!.tokens));
      if (speculative) onSteps = steps;
      expect(engine.kv.pool.numFreeBlocks).toBe(engine.config.numBlocks);
      engine.dispose();
    }
    expect(outputs[1]).toEqual(outputs[0]);
    const t = specTotals(onSteps);
    expect(t.accepted).toBeGreaterThan(0);
    expect(t.draftTokens).toBeGreaterThan(t.accepted);
    if ("numBlocks" in config) expect(onSteps.some((s) => s.numPreempted > 0)).toBe(true);
  });

  test("the logit rows reserved at start-up are bounded by the draft cap (k + 1 tokens a step), not max_num_seqs x k", async () => {
    const { engine, runner } = makeEngine({ speculative: suffix({ num_speculative_tokens: 24 }), maxDraftTokensPerStep: 25, maxNumSeqs: 16, maxNumBatchedTokens: 512, maxPromptLogprobRows: 10 }, { vocabSize: 7 });
    expect(runner.reserved).toEqual({ numTokens: 512, numLogitRows: 16 + 25 + 10 });
    prompts.forEach((p, i) => engine.addRequest(request(`r${i}`, p, { maxTokens: 30 })));
    await runToCompletion(engine);
    expect(Math.max(...runner.logitRowsPerCall)).toBeLessThanOrEqual(16 + 25 + 10);
    engine.dispose();
  });

  /** Runs `first` requests to the end, then `again` (the first prompt once more); the drafts of that last run. */
  async function repeatRun(speculative: SpeculativeConfig, others: number) {
    const { engine } = makeEngine({ speculative, maxDraftTokensPerStep: null, enablePrefixCaching: false }, { vocabSize: 97 });
    const p = prompt(20, 99, 97);
    engine.addRequest(request("first", p, { maxTokens: 48, ignoreEos: true }));
    const first = await runToCompletion(engine);
    for (let i = 0; i < others; i++) {
      engine.addRequest(request(`other${i}`, prompt(20, 200 + i, 97), { maxTokens: 48, ignoreEos: true }));
      await runToCompletion(engine);
    }
    engine.addRequest(request("again", p, { maxTokens: 48, ignoreEos: true }));
    const again = await runToCompletion(engine);
    engine.dispose();
    expect(again.outputs.get("again")!.tokens).toEqual(first.outputs.get("first")!.tokens);
    return specTotals(again.steps);
  }

  test("a repeated prompt drafts from the global tree of earlier responses; max_cached_requests 0 or FIFO eviction loses it", async () => {
    const cached = await repeatRun(suffix(), 1);
    // 97 random tokens: the request's own prompt and output rarely repeat, the earlier response does, whole
    expect(cached.accepted).toBeGreaterThanOrEqual(35);
    const off = await repeatRun(suffix({ suffix_decoding_max_cached_requests: 0 }), 1);
    expect(off.accepted).toBeLessThan(10);
    // two slots: the running request takes one (as in vLLM), so the other request's response pushed the first's out
    const evicted = await repeatRun(suffix({ suffix_decoding_max_cached_requests: 2 }), 1);
    expect(evicted.accepted).toBeLessThan(10);
    // three slots hold both earlier responses
    expect((await repeatRun(suffix({ suffix_decoding_max_cached_requests: 3 }), 1)).accepted).toBeGreaterThanOrEqual(35);
  });
});

class StepLog implements StatsListener {
  readonly steps: IterationStats[] = [];
  onStep(s: IterationStats): void { this.steps.push(s); }
  onRequestFinished(): void {}
}

describe("default model (stories260K) through the engine Worker, suffix decoding", () => {
  const started: { shutdown(): Promise<void> }[] = [];
  afterAll(async () => { await Promise.all(started.map((o) => o.shutdown())); });
  const ARGS: EngineArgs = { maxNumSeqs: 16, maxNumBatchedTokens: 128, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: null, enablePrefixCaching: true, threads: 1, device: "cpu" };

  test("greedy ids identical off and on, alone and 4 at once; drafts accepted", async () => {
    const runs: number[][][] = [];
    let log: StepLog | null = null;
    for (const speculativeConfig of [null, suffix()]) {
      const l = new StepLog();
      const orch = await createEngineFrontend({ modelPath: null, engineArgs: { ...ARGS, ...(speculativeConfig ? { speculativeConfig, numDraftTokensPerStep: null } : {}) }, listeners: [l] });
      started.push(orch);
      const texts = ["Once upon a time, there was a little girl named Lily.", "Tom had a big red ball.", "The cat", "Sue and Ben were best friends."];
      const greedy = async (id: string, text: string): Promise<number[]> => {
        const ids: number[] = [];
        const promptTokenIds = orch.tokenizer.encode(text, { addSpecial: true, parseSpecial: false });
        for await (const out of orch.generate({ requestId: id, promptTokenIds, sampling: { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, maxTokens: 80, ignoreEos: true }, arrivalMs: nowMs() })) for (const c of out.outputs) ids.push(...c.tokenIdsDelta);
        return ids;
      };
      const alone = await greedy("alone", texts[0]!);
      const four = await Promise.all(texts.map((t, i) => greedy(`four${i}`, t)));
      runs.push([alone, ...four]);
      if (speculativeConfig) log = l;
    }
    expect(runs[1]).toEqual(runs[0]);
    const t = specTotals(log!.steps);
    expect(t.accepted).toBeGreaterThan(20);
    expect(t.accepted).toBeLessThanOrEqual(t.draftTokens);
  });
});
