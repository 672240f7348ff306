/** One test per sampling parameter, each of which fails if the parameter were ignored; plus seeded reproducibility. */
import { describe, expect, test } from "bun:test";
import { sample, type SamplingContext } from "../../src/engine/sampler.ts";
import { createRng } from "../../src/engine/rng.ts";
import { DEFAULT_SAMPLING_PARAMS, validateSamplingParams, type SamplingParams } from "../../src/engine/sampling-params.ts";
import { promptLogprobRowsFor } from "../../src/engine/engine-sizing.ts";
import { rng } from "../helpers/prng.ts";
import { makeEngine, prompt, request, runAlone, runToCompletion } from "./helpers.ts";

/** token 5 is the best by a little, token 6 next, token 7 third; the rest far below */
function row(): Float32Array {
  const r = new Float32Array(16).fill(-10);
  r[5] = 3; r[6] = 2.5; r[7] = 2;
  return r;
}

function ctx(params: Partial<SamplingParams>, extra: Partial<SamplingContext> = {}): SamplingContext {
  return {
    params: { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, ...params }, allTokenIds: [1, 2], numPromptTokens: 2,
    outputCounts: new Map(), stopTokenIds: [], rng: createRng(1), ...extra,
  };
}

/** distinct tokens drawn over many seeds */
function distinct(params: Partial<SamplingParams>, r = row()): Set<number> {
  const seen = new Set<number>();
  for (let seed = 0; seed < 300; seed++) seen.add(sample(r, ctx(params, { rng: createRng(seed) })).tokenId);
  return seen;
}

describe("sampler", () => {
  test("temperature 0 is argmax; temperature > 0 samples other tokens", () => {
    expect(distinct({ temperature: 0 })).toEqual(new Set([5]));
    expect(distinct({ temperature: 1 }).size).toBeGreaterThanOrEqual(3);
  });
  test("temperature scales: a low temperature concentrates on the best token", () => {
    const count5 = (t: number): number => { let n = 0; for (let s = 0; s < 300; s++) if (sample(row(), ctx({ temperature: t }, { rng: createRng(s) })).tokenId === 5) n++; return n; };
    expect(count5(0.1)).toBeGreaterThan(295);
    expect(count5(2)).toBeLessThan(200);
  });
  test("top_k keeps only the k best tokens", () => {
    expect(distinct({ temperature: 1, topK: 2 })).toEqual(new Set([5, 6]));
    expect(distinct({ temperature: 1, topK: 1 })).toEqual(new Set([5]));
  });
  test("top_p keeps the smallest set reaching the mass", () => {
    expect(distinct({ temperature: 1, topP: 0.3 })).toEqual(new Set([5]));
    expect(distinct({ temperature: 1, topP: 0.7 })).toEqual(new Set([5, 6]));
  });
  test("top_k and top_p select exactly the set a full sort gives, ties broken by lower id (large vocabulary)", () => {
    const V = 5000;
    const r = new Float32Array(V);
    const random = rng(7);
    for (let i = 0; i < V; i++) r[i] = Math.round(random() * 40) / 10; // ties
    const expectedSet = (topK: number, topP: number): Set<number> => {
      const probs = Array.from(r, (v) => Math.exp(v - 4));
      const order = [...probs.keys()].sort((a, b) => probs[b]! - probs[a]! || a - b).slice(0, topK > 0 ? topK : V);
      const mass = order.reduce((m, id) => m + probs[id]!, 0);
      let cum = 0;
      const keep: number[] = [];
      for (const id of order) { if (topP < 1 && cum >= topP * mass) break; keep.push(id); cum += probs[id]!; }
      return new Set(keep);
    };
    for (const [topK, topP] of [[37, 1], [0, 0.3], [300, 0.5]] as const) {
      const want = expectedSet(topK, topP);
      const got = distinct({ temperature: 1, topK, topP }, r);
      for (const id of got) expect(want.has(id)).toBe(true);
      expect(got.size).toBeGreaterThan(Math.min(want.size, 300) / 4);
    }
  });
  test("min_p drops tokens below min_p x the top probability", () => {
    // p6/p5 = e^-0.5 = 0.61, p7/p5 = e^-1 = 0.37
    expect(distinct({ temperature: 1, minP: 0.5 })).toEqual(new Set([5, 6]));
  });
  test("presence_penalty lowers tokens already generated", () => {
    expect(sample(row(), ctx({ presencePenalty: 1 }, { outputCounts: new Map([[5, 1]]) })).tokenId).toBe(6);
    expect(sample(row(), ctx({ presencePenalty: 0 }, { outputCounts: new Map([[5, 1]]) })).tokenId).toBe(5);
  });
  test("frequency_penalty grows with the count", () => {
    expect(sample(row(), ctx({ frequencyPenalty: 0.3 }, { outputCounts: new Map([[5, 1]]) })).tokenId).toBe(5);
    expect(sample(row(), ctx({ frequencyPenalty: 0.3 }, { outputCounts: new Map([[5, 3]]) })).tokenId).toBe(6);
  });
  test("repetition_penalty divides positive logits of tokens in prompt or output", () => {
    expect(sample(row(), ctx({ repetitionPenalty: 1.5 }, { allTokenIds: [5, 2], numPromptTokens: 2 })).tokenId).toBe(6);
    expect(sample(row(), ctx({ repetitionPenalty: 1 }, { allTokenIds: [5, 2], numPromptTokens: 2 })).tokenId).toBe(5);
  });
  test("logit_bias adds to a token's logit", () => {
    expect(sample(row(), ctx({ logitBias: { 9: 20 } })).tokenId).toBe(9);
    expect(sample(row(), ctx({ logitBias: { 5: -5 } })).tokenId).toBe(6);
  });
  test("min_tokens masks stop tokens until enough tokens were generated", () => {
    expect(sample(row(), ctx({ minTokens: 2 }, { stopTokenIds: [5] })).tokenId).toBe(6);
    expect(sample(row(), ctx({ minTokens: 0 }, { stopTokenIds: [5] })).tokenId).toBe(5);
  });
  test("logprobs: the chosen token's logprob and rank, and the top k best first", () => {
    const r = row();
    const out = sample(r, ctx({ temperature: 1, logprobs: 2 }, { rng: createRng(3) }));
    let z = 0; for (const v of r) z += Math.exp(v);
    expect(out.logprobs!.top.map((t) => t.tokenId)).toEqual([5, 6]);
    expect(out.logprobs!.top[0]!.logprob).toBeCloseTo(3 - Math.log(z), 5);
    expect(out.logprobs!.chosen.tokenId).toBe(out.tokenId);
    expect(out.logprobs!.chosen.rank).toBe([5, 6, 7].indexOf(out.tokenId) + 1);
    expect(sample(r, ctx({ logprobs: null })).logprobs).toBeUndefined();
  });
  test("seeded sampling is reproducible and different seeds differ", () => {
    const seq = (seed: number): number[] => { const rng = createRng(seed); return Array.from({ length: 40 }, () => sample(row(), ctx({ temperature: 1.5 }, { rng })).tokenId); };
    expect(seq(42)).toEqual(seq(42));
    expect(seq(42)).not.toEqual(seq(43));
  });
});

describe("sampling in the engine", () => {
  const p = prompt(12, 77);
  test("seed: the same seeded request gives the same tokens, alone or in a batch", async () => {
    const r = request("s", p, { temperature: 1, seed: 7, maxTokens: 20 });
    const alone = await runAlone(r);
    const { engine } = makeEngine();
    engine.addRequest(r);
    for (let i = 0; i < 5; i++) engine.addRequest(request(`o${i}`, prompt(10 + i, i), { temperature: 1, maxTokens: 20 }));
    const { outputs } = await runToCompletion(engine);
    expect(outputs.get("s")!.tokens).toEqual(alone.tokens);
    expect((await runAlone(request("s", p, { temperature: 1, seed: 8, maxTokens: 20 }))).tokens).not.toEqual(alone.tokens);
  });
  test("max_tokens: finishes with length after exactly max_tokens", async () => {
    const out = await runAlone(request("m", p, { maxTokens: 7 }));
    expect(out.tokens.length).toBe(7);
    expect(out.finishReason).toBe("length");
  });
  test("stop_token_ids: finishes with stop at that token and reports it", async () => {
    const free = await runAlone(request("f", p, { maxTokens: 10 }));
    const stopId = free.tokens[3]!;
    const out = await runAlone(request("t", p, { maxTokens: 10, stopTokenIds: [stopId] }));
    expect(out.tokens).toEqual(free.tokens.slice(0, free.tokens.indexOf(stopId) + 1));
    expect(out.finishReason).toBe("stop");
    expect(out.stopReason).toBe(stopId);
  });
  test("eos ends a request unless ignore_eos", async () => {
    const runner = { eosId: 2, eosAtLen: 20 };
    const stopped = await runAlone(request("e", p, { maxTokens: 30 }, [2]), {}, runner);
    expect(stopped.tokens.length).toBe(20 - 12);
    expect(stopped.finishReason).toBe("stop");
    expect(stopped.stopReason).toBeNull();
    const ignored = await runAlone(request("i", p, { maxTokens: 30, ignoreEos: true }, [2]), {}, runner);
    expect(ignored.tokens.length).toBe(30);
    expect(ignored.finishReason).toBe("length");
  });
  test("min_tokens keeps eos away until that many tokens were generated", async () => {
    const out = await runAlone(request("n", p, { maxTokens: 30, minTokens: 14 }, [2]), {}, { eosId: 2, eosAtLen: 20 });
    expect(out.tokens.length).toBe(15);
    expect(out.tokens.slice(0, 14)).not.toContain(2);
    expect(out.finishReason).toBe("stop");
  });
  test("prompt_logprobs: one entry per prompt token (first null), scored on the actual prompt tokens, over several chunks", async () => {
    const long = prompt(50, 4);
    const out = await runAlone(request("pl", long, { maxTokens: 2, promptLogprobs: 3 }), { maxNumBatchedTokens: 16 });
    const pl = out.promptLogprobs!;
    expect(pl.length).toBe(50);
    expect(pl[0]).toBeNull();
    for (let i = 1; i < 50; i++) {
      expect(pl[i]!.chosen.tokenId).toBe(long[i]!);
      expect(pl[i]!.top.length).toBe(3);
      expect(pl[i]!.chosen.logprob).toBeLessThanOrEqual(pl[i]!.top[0]!.logprob);
    }
    expect(out.tokens).toEqual((await runAlone(request("x", long, { maxTokens: 2 }))).tokens);
  });
  test("prompt_logprobs prefill in chunks of the logit rows reserved at start-up, same logprobs as unbounded", async () => {
    const long = prompt(100, 9);
    const sampling = { maxTokens: 3, promptLogprobs: 2 };
    const unbounded = await runAlone(request("u", long, sampling), { maxNumBatchedTokens: 128 });
    const { engine, runner } = makeEngine({ maxNumBatchedTokens: 128, maxNumSeqs: 4, maxPromptLogprobRows: 7 });
    // the largest step (tokens, logit rows) was reserved when the engine was built
    expect(runner.reserved).toEqual({ numTokens: 128, numLogitRows: 4 + 7 });
    engine.addRequest(request("b", long, sampling));
    engine.addRequest(request("plain", prompt(40, 3), { maxTokens: 3 }));
    const { outputs } = await runToCompletion(engine);
    const bounded = outputs.get("b")!;
    expect(bounded.promptLogprobs).toEqual(unbounded.promptLogprobs);
    expect(bounded.tokens).toEqual(unbounded.tokens);
    // 99 prompt positions at most 7 a step: 15 steps or more, never more rows than reserved
    expect(runner.logitRowsPerCall.length).toBeGreaterThanOrEqual(15);
    expect(Math.max(...runner.logitRowsPerCall)).toBeLessThanOrEqual(4 + 7);
    // the request beside it is not held back by the chunking: its 40-token prompt ran in the first step
    expect(outputs.get("plain")!.tokens.length).toBe(3);
  });
  test("the prompt-logprob row budget follows the vocabulary: 64 MiB of float rows", () => {
    expect(promptLogprobRowsFor(151_936)).toBe(110);
    expect(promptLogprobRowsFor(49_152)).toBe(341);
    expect(promptLogprobRowsFor(512)).toBe(32_768);
  });
  test("logprobs in the engine: one entry per generated token", async () => {
    const out = await runAlone(request("lp", p, { maxTokens: 5, logprobs: 1 }));
    expect(out.logprobs.map((l) => l.chosen.tokenId)).toEqual(out.tokens);
    expect(out.logprobs.every((l) => l.chosen.rank === 1)).toBe(true); // greedy picks rank 1
  });
});

describe("validateSamplingParams", () => {
  const cases: [string, Partial<SamplingParams>, string][] = [
    ["temperature", { temperature: 3 }, "temperature must be in [0, 2], got 3.0."],
    ["top_p", { topP: 0 }, "top_p must be in (0, 1], got 0.0."],
    ["top_k", { topK: -2 }, "top_k must be 0 (disable), -1 (disable), or at least 1, got -2."],
    ["min_p", { minP: 1.5 }, "min_p must be in [0, 1], got 1.5."],
    ["presence_penalty", { presencePenalty: 2.5 }, "presence_penalty must be in [-2, 2], got 2.5."],
    ["frequency_penalty", { frequencyPenalty: -3 }, "frequency_penalty must be in [-2, 2], got -3.0."],
    ["repetition_penalty", { repetitionPenalty: 0 }, "repetition_penalty must be greater than zero, got 0.0."],
    ["n", { n: 0 }, "n must be at least 1, got 0."],
    ["n", { n: 2, temperature: 0 }, "n must be 1 when using greedy sampling, got 2."],
    ["max_tokens", { maxTokens: 0 }, "max_tokens must be at least 1, got 0."],
    ["min_tokens", { minTokens: 5, maxTokens: 3 }, "min_tokens must be less than or equal to max_tokens=3, got 5."],
    ["logprobs", { logprobs: 21 }, "Requested sample logprobs of 21, which is greater than max allowed: 20"],
    ["stop", { stop: [""] }, "stop cannot contain an empty string."],
  ];
  test.each(cases)("rejects a bad %s", (param, bad, message) => {
    const e = validateSamplingParams({ ...DEFAULT_SAMPLING_PARAMS, ...bad });
    expect(e?.param).toBe(param);
    expect(e?.message).toBe(message);
  });
  test("defaults are valid; out-of-vocab ids are named", () => {
    expect(validateSamplingParams(DEFAULT_SAMPLING_PARAMS)).toBeNull();
    expect(validateSamplingParams({ ...DEFAULT_SAMPLING_PARAMS, logitBias: { 500: 1 } }, { vocabSize: 100 })?.param).toBe("logit_bias");
    expect(validateSamplingParams({ ...DEFAULT_SAMPLING_PARAMS, stopTokenIds: [100] }, { vocabSize: 100 })?.param).toBe("stop_token_ids");
  });
});
