/**
 * llama.cpp's samplers (src/llama-sampler.cpp), each on a known distribution with its effect computed by hand from
 * llama.cpp's definition; the chain's order; the hook in the Sampler (only a request with llama.cpp's fields takes
 * the chain; Mirostat's mu lives per request).
 */
import { describe, expect, test } from "bun:test";
import { applyDry } from "../../src/engine/llama-dry.ts";
import { llamaChainProbs, sampleLlamaChain, type LlamaChainInput } from "../../src/engine/llama-sampler-chain.ts";
import {
  applyMinP, applyPenalties, applyTemperature, applyTopK, applyTopNSigma, applyTopP, applyTypical, applyXtc, candidatesOf,
  drawMirostat, softmax, truncateMirostat, truncateMirostatV2, type Candidates,
} from "../../src/engine/llama-samplers.ts";
import { createRng, type Rng } from "../../src/engine/rng.ts";
import { Sampler, type SamplingContext } from "../../src/engine/sampler.ts";
import {
  DEFAULT_LLAMA_SAMPLING_PARAMS, DEFAULT_SAMPLING_PARAMS, drySequenceBreakerTokens, LLAMA_DEFAULT_SAMPLERS, parseLlamaSamplers,
  validateSamplingParams, type LlamaSamplingParams, type SamplingParams,
} from "../../src/engine/sampling-params.ts";

/** p = [0.5, 0.25, 0.125, 0.125] as logits */
const HALVES = new Float32Array([Math.log(0.5), Math.log(0.25), Math.log(0.125), Math.log(0.125)]);

/** an rng that returns the given uniforms in turn (and fails the test when it runs out) */
function scripted(...values: number[]): Rng & { readonly left: () => number } {
  return {
    nextFloat: () => { const v = values.shift(); if (v === undefined) throw new Error("rng ran out"); return v; },
    nextUint32: () => 0,
    left: () => values.length,
  };
}

const ids = (c: Candidates): number[] => c.list.map((t) => t.id);
const finiteIds = (c: Candidates): number[] => c.list.filter((t) => t.logit > -Infinity).map((t) => t.id);

describe("llama.cpp samplers on known distributions", () => {
  test("penalties: repeat divides positive and multiplies negative logits, then count x frequency + presence", () => {
    const c = candidatesOf(new Float32Array([2, -1, 0.5, 3]));
    applyPenalties(c, [0, 1, 1], 2, 0.5, 0.25);
    expect(c.list.map((t) => t.logit)).toEqual([2 / 2 - (0.5 + 0.25), -1 * 2 - (2 * 0.5 + 0.25), 0.5, 3]);
  });

  test("top-n-sigma keeps logits within n standard deviations of the best", () => {
    // mean 1.5, std sqrt(1.25) = 1.118: n = 1 keeps logits >= 1.882, n = 2 keeps >= 0.764
    const c1 = candidatesOf(new Float32Array([0, 1, 2, 3]));
    applyTopNSigma(c1, 1);
    expect(finiteIds(c1)).toEqual([2, 3]);
    const c2 = candidatesOf(new Float32Array([0, 1, 2, 3]));
    applyTopNSigma(c2, 2);
    expect(finiteIds(c2)).toEqual([1, 2, 3]);
  });

  test("top-k keeps the k best (k <= 0 keeps all)", () => {
    const c = candidatesOf(new Float32Array([0.1, 3, 2, 5]));
    applyTopK(c, 2);
    expect(ids(c)).toEqual([3, 1]);
    const all = candidatesOf(new Float32Array([0.1, 3, 2, 5]));
    applyTopK(all, 0);
    expect(all.list.length).toBe(4);
  });

  test("typical_p keeps the tokens whose surprise is nearest the entropy, not the likeliest", () => {
    // H = 1.75 ln 2; surprises ln2, 2 ln2, 3 ln2, 3 ln2 -> distances 0.75, 0.25, 1.25, 1.25 (x ln 2): order 1, 0, 2, 3
    const c = candidatesOf(HALVES);
    applyTypical(c, 0.5, 0);
    expect(ids(c)).toEqual([1, 0]); // 0.25 is not > 0.5, 0.75 is
    const one = candidatesOf(HALVES);
    applyTypical(one, 0.2, 0);
    expect(ids(one)).toEqual([1]);
    const kept = candidatesOf(HALVES);
    applyTypical(kept, 0.2, 3);
    expect(ids(kept)).toEqual([1, 0, 2]);
  });

  test("top_p keeps the best tokens until their mass reaches p, at least min_keep", () => {
    const c = candidatesOf(HALVES);
    applyTopP(c, 0.7, 0);
    expect(ids(c)).toEqual([0, 1]);
    const exact = candidatesOf(HALVES);
    applyTopP(exact, 0.75, 0);
    expect(ids(exact)).toEqual([0, 1]); // reaching p is enough
    const k = candidatesOf(HALVES);
    applyTopP(k, 0.7, 3);
    expect(ids(k)).toEqual([0, 1, 2]);
  });

  test("min_p keeps tokens at least p x the best probability", () => {
    const c = candidatesOf(HALVES);
    applyMinP(c, 0.3, 0); // 0.15 and up
    expect(ids(c)).toEqual([0, 1]);
    const k = candidatesOf(HALVES);
    applyMinP(k, 0.3, 3);
    expect(ids(k)).toEqual([0, 1, 2]);
  });

  test("XTC with probability 1 removes every token above the threshold but the least likely of them", () => {
    const logits = new Float32Array([0.4, 0.3, 0.2, 0.06, 0.04].map(Math.log));
    const c = candidatesOf(logits);
    const rng = scripted(0.99);
    applyXtc(c, 1, 0.1, 0, rng);
    expect(ids(c)).toEqual([2, 3, 4]);
    expect(rng.left()).toBe(0);
    // the draw decides: above the probability, nothing happens
    const skip = candidatesOf(logits);
    applyXtc(skip, 0.5, 0.1, 0, scripted(0.6));
    expect(skip.list.length).toBe(5);
    const hit = candidatesOf(logits);
    applyXtc(hit, 0.5, 0.1, 0, scripted(0.4));
    expect(ids(hit)).toEqual([2, 3, 4]);
    // min_keep: removing would leave 3 < 4 tokens
    const floor = candidatesOf(logits);
    applyXtc(floor, 1, 0.1, 4, scripted(0));
    expect(floor.list.length).toBe(5);
    // threshold above 0.5 turns XTC off without a draw
    const off = candidatesOf(logits);
    const unused = scripted(0);
    applyXtc(off, 1, 0.6, 0, unused);
    expect(off.list.length).toBe(5);
    expect(unused.left()).toBe(1);
  });

  test("dynamic temperature maps the normalized entropy into [t - range, t + range]", () => {
    // H / Hmax = 1.75 ln2 / 2 ln2 = 0.875
    const c = candidatesOf(HALVES);
    expect(applyTemperature(c, 1, 0.5, 1)).toBeCloseTo(0.5 + 1 * 0.875, 6);
    const byId = new Map(c.list.map((t) => [t.id, t.logit]));
    expect(byId.get(0)!).toBeCloseTo(Math.log(0.5) / 1.375, 5);
    expect(applyTemperature(candidatesOf(HALVES), 1, 0.5, 2)).toBeCloseTo(0.5 + 0.875 ** 2, 6);
    // no range: a fixed temperature; 0 keeps only the best logit
    const fixed = candidatesOf(HALVES);
    expect(applyTemperature(fixed, 2, 0, 1)).toBe(2);
    expect(fixed.list[1]!.logit).toBeCloseTo(Math.log(0.25) / 2, 6);
    const greedy = candidatesOf(new Float32Array([1, 3, 3, 2]));
    applyTemperature(greedy, 0, 0, 1);
    expect(finiteIds(greedy)).toEqual([1]);
  });

  test("Mirostat 1 keeps the top k the Zipf estimate gives for mu", () => {
    // p ~ 1/i^2: s_hat = 2, eps = 1, k = (2^mu / (1 - 1/4))^(1/2): mu = 2 -> 2.31 -> 2 tokens, mu = 0 -> 1.15 -> 1
    const zipf = new Float32Array([1, 1 / 4, 1 / 9, 1 / 16].map(Math.log));
    const c = candidatesOf(zipf);
    truncateMirostat(c, 100, 4, 2);
    expect(ids(c)).toEqual([0, 1]);
    const one = candidatesOf(zipf);
    truncateMirostat(one, 100, 4, 0);
    expect(ids(one)).toEqual([0]);
  });

  test("Mirostat 2 cuts tokens more surprising than mu and moves mu by eta x (tau - surprise)", () => {
    const c = candidatesOf(HALVES);
    truncateMirostatV2(c, 10); // surprises 1, 2, 3, 3 bits: all stay
    expect(c.list.length).toBe(4);
    const first = drawMirostat(c, 5, 0.1, 10, scripted(0.1));
    expect(first.tokenId).toBe(0);
    expect(first.mu).toBeCloseTo(10 - 0.1 * (1 - 5), 6);
    const cut = candidatesOf(HALVES);
    truncateMirostatV2(cut, 1.5); // only the 1-bit token
    expect(ids(cut)).toEqual([0]);
    const second = drawMirostat(cut, 5, 0.1, 1.5, scripted(0.7));
    expect(second.mu).toBeCloseTo(1.5 - 0.1 * (0 - 5), 6); // p = 1 after renormalizing: surprise 0
  });

  test("DRY: multiplier x base^(repeat length - allowed length) on the token that would extend the repeat", () => {
    const dry = { multiplier: 0.8, base: 1.75, allowedLength: 2, breakers: [] };
    // ... 1 9 2 3 | 4 | 1 9 2 3: emitting 4 would extend the 4-token repeat "1 9 2 3"
    const c = candidatesOf(new Float32Array(10));
    const extended = applyDry(c, [1, 9, 2, 3, 4, 1, 9, 2, 3], dry);
    expect([...extended]).toEqual([[4, 4]]);
    expect(c.list[4]!.logit).toBeCloseTo(-0.8 * 1.75 ** 2, 6);
    expect(c.list.filter((t) => t.logit !== 0).length).toBe(1);
    // a breaker (token 9) inside the repeat limits how far back it reaches: length 2, exponent 0
    const broken = candidatesOf(new Float32Array(10));
    applyDry(broken, [1, 9, 2, 3, 4, 1, 9, 2, 3], { ...dry, breakers: [{ headTokenId: 9, tailTokenIds: [] }] });
    expect(broken.list[4]!.logit).toBeCloseTo(-0.8, 6);
    // a repeat no longer than the allowed length is free; a single-token breaker is never penalized itself
    const short = candidatesOf(new Float32Array(10));
    expect(applyDry(short, [1, 5, 6, 2, 5, 6], { ...dry, allowedLength: 3 }).size).toBe(0);
    const breaker = candidatesOf(new Float32Array(10));
    applyDry(breaker, [1, 2, 9, 1, 2], { ...dry, breakers: [{ headTokenId: 9, tailTokenIds: [] }] });
    expect(breaker.list[9]!.logit).toBe(0);
  });

  test("DRY's breakers as tokens: a token containing the breaker, or ending with its start plus the rest tokenized", () => {
    const pieces = ["a", "b:", ":", "xa", "b", "ab"];
    const vocab = { vocabSize: pieces.length, piece: (id: number) => pieces[id]!, encode: (text: string) => [pieces.indexOf(text)] };
    expect(drySequenceBreakerTokens([":"], vocab)).toEqual([{ headTokenId: 1, tailTokenIds: [] }, { headTokenId: 2, tailTokenIds: [] }]);
    expect(drySequenceBreakerTokens(["ab"], vocab)).toEqual([
      { headTokenId: 0, tailTokenIds: [4] }, { headTokenId: 3, tailTokenIds: [4] }, { headTokenId: 5, tailTokenIds: [] },
    ]);
  });
});

/** one case of llama.cpp's tests/test-sampling.cpp: input probabilities, the sampler, the probabilities it expects after the draw's normalization, in list order */
interface LlamaTestCase {
  readonly name: string;
  readonly probs: readonly number[];
  readonly apply: (c: Candidates) => void;
  readonly expected: readonly number[];
}

const LLAMA_TEST_CASES: readonly LlamaTestCase[] = [
  { name: "min_p 0.26", probs: [0.1, 0.2, 0.3, 0.4], apply: (c) => applyMinP(c, 0.26, 0), expected: [0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9] },
  { name: "min_p 0.51", probs: [0.1, 0.2, 0.3, 0.4], apply: (c) => applyMinP(c, 0.51, 0), expected: [0.3 / 0.7, 0.4 / 0.7] },
  { name: "min_p 1.05", probs: [0.1, 0.2, 0.3, 0.4], apply: (c) => applyMinP(c, 1.05, 0), expected: [1] },
  { name: "xtc 0.09", probs: [0.4, 0.3, 0.2, 0.1], apply: (c) => applyXtc(c, 0.99, 0.09, 0, scripted(0)), expected: [1] },
  { name: "xtc 0.19", probs: [0.4, 0.3, 0.2, 0.1], apply: (c) => applyXtc(c, 0.99, 0.19, 0, scripted(0)), expected: [2 / 3, 1 / 3] },
  { name: "xtc 0.29", probs: [0.4, 0.3, 0.2, 0.1], apply: (c) => applyXtc(c, 0.99, 0.29, 0, scripted(0)), expected: [0.5, 1 / 3, 1 / 6] },
  { name: "xtc 0.39 (not)", probs: [0.4, 0.3, 0.2, 0.1], apply: (c) => applyXtc(c, 0.99, 0.39, 0, scripted(0)), expected: [0.4, 0.3, 0.2, 0.1] },
  { name: "typical 0.97", probs: [0.97, 0.01, 0.01, 0.01], apply: (c) => applyTypical(c, 0.5, 0), expected: [1] },
  { name: "typical 0.4", probs: [0.4, 0.2, 0.2, 0.2], apply: (c) => applyTypical(c, 0.5, 0), expected: [1 / 3, 1 / 3, 1 / 3] },
  { name: "penalties repeat 50, {0}", probs: [0.2, 0.2, 0.2, 0.2, 0.2], apply: (c) => applyPenalties(c, [0], 50, 0, 0), expected: [0, 0.25, 0.25, 0.25, 0.25] },
  { name: "penalties repeat 50, {0,1,2,0,0}", probs: [0.2, 0.2, 0.2, 0.2, 0.2], apply: (c) => applyPenalties(c, [0, 1, 2, 0, 0], 50, 0, 0), expected: [0, 0, 0, 0.5, 0.5] },
  { name: "penalties freq 5 presence 5, {0}", probs: [0.2, 0.2, 0.2, 0.2, 0.2], apply: (c) => applyPenalties(c, [0], 1, 5, 5), expected: [0.000011, 0.249997, 0.249997, 0.249997, 0.249997] },
  { name: "penalties freq 5 presence 5, {0,1,2,0,0}", probs: [0.2, 0.2, 0.2, 0.2, 0.2], apply: (c) => applyPenalties(c, [0, 1, 2, 0, 0], 1, 5, 5), expected: [0, 0.000023, 0.000023, 0.499977, 0.499977] },
  { name: "dry {0,1}", probs: [0.25, 0.25, 0.25, 0.25], apply: (c) => applyDry(c, [0, 1], { multiplier: 1, base: 1.1, allowedLength: 2, breakers: [] }), expected: [0.25, 0.25, 0.25, 0.25] },
  { name: "dry {0,1,2,0,1}", probs: [0.25, 0.25, 0.25, 0.25], apply: (c) => applyDry(c, [0, 1, 2, 0, 1], { multiplier: 1, base: 1.1, allowedLength: 2, breakers: [] }), expected: [0.296923, 0.296923, 0.109232, 0.296923] },
  { name: "dry breaker {3}", probs: [0.2, 0.2, 0.2, 0.2, 0.2], apply: (c) => applyDry(c, [0, 1, 3, 4, 0, 1], { multiplier: 1, base: 1.1, allowedLength: 2, breakers: [{ headTokenId: 3, tailTokenIds: [] }] }), expected: [0.2, 0.2, 0.2, 0.2, 0.2] },
  { name: "dry multiplier 2", probs: [0.2, 0.2, 0.2, 0.2, 0.2], apply: (c) => applyDry(c, [0, 1, 2, 0, 1], { multiplier: 2, base: 1.1, allowedLength: 2, breakers: [] }), expected: [0.241818, 0.241818, 0.032727, 0.241818, 0.241818] },
  { name: "dry allowed 4", probs: [0.2, 0.2, 0.2, 0.2, 0.2], apply: (c) => applyDry(c, [0, 1, 2, 3, 4, 0, 1], { multiplier: 1, base: 1.1, allowedLength: 4, breakers: [] }), expected: [0.2, 0.2, 0.2, 0.2, 0.2] },
  { name: "top_n_sigma 1", probs: [0.1, 0.2, 0.3, 0.4], apply: (c) => applyTopNSigma(c, 1), expected: [0, 0, 0.428571, 0.571429] },
  { name: "top_n_sigma 0 (off)", probs: [0.1, 0.2, 0.3, 0.4], apply: (c) => applyTopNSigma(c, 0), expected: [0.1, 0.2, 0.3, 0.4] },
  { name: "top_n_sigma 3", probs: [0.1, 0.2, 0.3, 0.4], apply: (c) => applyTopNSigma(c, 3), expected: [0.1, 0.2, 0.3, 0.4] },
];

describe("llama.cpp's own expectations (tests/test-sampling.cpp)", () => {
  for (const t of LLAMA_TEST_CASES) {
    test(t.name, () => {
      const c = candidatesOf(new Float32Array(t.probs.map(Math.log)));
      t.apply(c);
      softmax(c, false); // llama_sampler_dist normalizes in list order
      expect(c.list.length).toBe(t.expected.length);
      c.list.forEach((cand, i) => expect(Math.abs(cand.p - t.expected[i]!)).toBeLessThan(1e-5));
    });
  }
});

/**
 * llama.cpp's sampler-queue test (tests/test-sampling.cpp test_sampler_queue): logits ln(id) over 10000 tokens, top_k /
 * top_p / min_p in the order of the letters, each followed by the draw's normalization; after each sampler the
 * number of candidates left is the one the definition gives (p(id) = id / sum of the ids still in play).
 */
function samplerQueueSizes(sequence: string, topK: number, topP: number, minP: number): { readonly sizes: number[]; readonly expected: number[] } {
  const numVocab = 10000;
  const c = candidatesOf(new Float32Array(Array.from({ length: numVocab }, (_, id) => Math.log(id))));
  const sizes: number[] = [];
  const expected: number[] = [];
  let minTokenId = 0;
  for (const code of sequence) {
    const size = c.list.length;
    if (code === "k") {
      applyTopK(c, topK);
      expected.push(Math.min(size, topK));
      minTokenId = Math.max(minTokenId, numVocab - topK);
    } else if (code === "p") {
      applyTopP(c, topP, 1);
      // the fewest best ids whose sum reaches top_p of the ids in play (id 0 has p = 0 and comes along at the end)
      const target = Math.ceil(Math.fround(topP) * (numVocab * (numVocab - 1) / 2 - minTokenId * (minTokenId - 1) / 2));
      let count = 0;
      let sum = 0;
      let id = numVocab;
      do { id--; count++; sum += id; } while (sum < target);
      if (id === 1) { id = 0; count++; }
      minTokenId = id;
      expected.push(count);
    } else {
      applyMinP(c, Math.fround(minP), 1);
      expected.push(Math.min(Math.max(Math.ceil((1 - Math.fround(minP)) * numVocab), 1), size));
      minTokenId = Math.min(Math.max(Math.floor(Math.fround(minP) * numVocab), 1, numVocab - c.list.length), numVocab - 1);
    }
    softmax(c, false);
    sizes.push(c.list.length);
  }
  return { sizes, expected };
}

describe("llama.cpp's sampler queue (tests/test-sampling.cpp)", () => {
  // left out: its min_p = 1e-12 case, whose expected size counts token 0 (logit ln 0 = -inf) as kept; min_p here never
  // keeps a -inf token (logit >= max + ln p is false for it), which is llama_sampler_min_p_apply's comparison too
  const cases: readonly [string, number, number, number][] = [
    ["k", 10000, 1, 1], ["k", 1, 1, 1], ["p", 10000, 1, 1], ["p", 10000, 0, 1], ["m", 10000, 1, 1],
    ["k", 100, 1, 1], ["p", 10000, 0.0003, 1], ["p", 10000, 0.8, 1], ["m", 10000, 1, 9997.9 / 9999.0], ["m", 10000, 1, 0.1],
    ["kp", 100, 0.8, 0.1], ["km", 100, 0.8, 0.1], ["pk", 100, 0.8, 0.1], ["pm", 100, 0.8, 0.1], ["mk", 100, 0.8, 0.1],
    ["mp", 100, 0.8, 9997.9 / 9999.0], ["mp", 100, 0.8, 0.1], ["kpm", 100, 0.8, 0.1], ["kmp", 100, 0.8, 0.1],
    ["pkm", 100, 0.8, 0.1], ["pmk", 100, 0.8, 0.1], ["mkp", 100, 0.8, 0.1], ["mpk", 100, 0.8, 0.1],
  ];
  for (const [sequence, topK, topP, minP] of cases) {
    test(`${sequence} top_k=${topK} top_p=${topP} min_p=${minP}`, () => {
      const { sizes, expected } = samplerQueueSizes(sequence, topK, topP, minP);
      expect(sizes).toEqual(expected);
    });
  }
});

function chainInput(logits: Float32Array, params: Partial<SamplingParams>, llama: Partial<LlamaSamplingParams>, rng: Rng = createRng(1)): LlamaChainInput {
  const l = { ...DEFAULT_LLAMA_SAMPLING_PARAMS, ...llama };
  const full = { ...DEFAULT_SAMPLING_PARAMS, ...params, llama: l };
  return { logits, params: full, llama: l, temperature: full.temperature, allTokenIds: [], rng };
}

const nonzero = (probs: Float64Array): number[] => [...probs.keys()].filter((i) => probs[i]! > 0);

describe("llama.cpp's chain", () => {
  test("order matters: min_p before temperature cuts what temperature after it would have kept", () => {
    // min_p 0.3 on p = [.5, .25, .125, .125] keeps 2; at temperature 3 first, every ratio is above 0.3 (0.125^(1/3) / 0.5^(1/3) = 0.63)
    const p = { temperature: 3, minP: 0.3 };
    expect(nonzero(llamaChainProbs(chainInput(HALVES, p, {}), { mu: null }))).toEqual([0, 1]);
    expect(nonzero(llamaChainProbs(chainInput(HALVES, p, { samplers: ["temperature", "min_p"] }), { mu: null }))).toEqual([0, 1, 2, 3]);
    // a sampler left out of the list does not run
    expect(nonzero(llamaChainProbs(chainInput(HALVES, p, { samplers: ["temperature"] }), { mu: null }))).toEqual([0, 1, 2, 3]);
  });

  test("the default chain with no sampler active draws from softmax(logits / temperature)", () => {
    const probs = llamaChainProbs(chainInput(HALVES, { temperature: 2 }, {}), { mu: null });
    const e = [0.5, 0.25, 0.125, 0.125].map((q) => Math.sqrt(q));
    const sum = e.reduce((a, b) => a + b);
    e.forEach((v, i) => expect(probs[i]!).toBeCloseTo(v / sum, 6));
  });

  test("penalties look at the last repeat_last_n tokens of prompt and output only", () => {
    const logits = new Float32Array([2, 2, 2]);
    const input = { ...chainInput(logits, { temperature: 1, repetitionPenalty: 2 }, { repeatLastN: 2 }), allTokenIds: [0, 1, 2, 2] };
    const probs = llamaChainProbs(input, { mu: null });
    // token 0 is outside the window: e^2 against e^1 for the others
    expect(probs[0]! / probs[2]!).toBeCloseTo(Math.E, 5);
    expect(probs[1]!).toBeCloseTo(probs[0]!, 6);
  });

  test("mirostat replaces the chain: top_k is not applied", () => {
    const input = chainInput(HALVES, { temperature: 1, topK: 1 }, { mirostat: 2, mirostatTau: 5 });
    expect(nonzero(llamaChainProbs(input, { mu: null })).length).toBe(4);
    expect(nonzero(llamaChainProbs(chainInput(HALVES, { temperature: 1, topK: 1 }, {}), { mu: null }))).toEqual([0]);
  });

  test("a seeded chain is reproducible, and greedy picks the best token", () => {
    const logits = new Float32Array(Array.from({ length: 50 }, (_, i) => Math.sin(i * 1.7) * 3));
    const draw = (seed: number): number[] => {
      const rng = createRng(seed);
      return Array.from({ length: 20 }, () => sampleLlamaChain(chainInput(logits, { temperature: 1 }, { xtcProbability: 0.5, typicalP: 0.9 }, rng), { mu: null }));
    };
    expect(draw(7)).toEqual(draw(7));
    expect(new Set(draw(7)).size).toBeGreaterThan(1);
    const best = logits.indexOf(Math.max(...logits));
    expect(sampleLlamaChain(chainInput(logits, { temperature: 0 }, {}), { mu: null })).toBe(best);
  });
});

describe("samplers field and llama.cpp ranges", () => {
  test("names, aliases and one-letter codes; an unknown name is an error", () => {
    expect(parseLlamaSamplers(["Top-K", "nucleus", "temp", "typ", "minp", "penalties"])).toEqual(["top_k", "top_p", "temperature", "typ_p", "min_p", "penalties"]);
    expect(parseLlamaSamplers("edskypmxt")).toEqual([...LLAMA_DEFAULT_SAMPLERS]);
    expect(parseLlamaSamplers(["top_k", "tfs_z"])).toEqual({ error: "samplers has an unknown sampler 'tfs_z'; the samplers are penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature." });
    expect(parseLlamaSamplers("kq")).toHaveProperty("error");
  });

  test("out-of-range llama.cpp fields fail validation with the wire name", () => {
    const bad = (llama: Partial<LlamaSamplingParams>) => validateSamplingParams({ ...DEFAULT_SAMPLING_PARAMS, llama: { ...DEFAULT_LLAMA_SAMPLING_PARAMS, ...llama } });
    expect(bad({})).toBeNull();
    expect(bad({ xtcProbability: 1.5 })).toEqual({ param: "xtc_probability", value: 1.5, message: "xtc_probability must be in [0.0, 1.0], got 1.5." });
    expect(bad({ mirostat: 3 as 2 })?.param).toBe("mirostat");
    expect(bad({ repeatLastN: -2 })?.message).toBe("repeat_last_n must be an integer of at least -1, got -2.");
    expect(bad({ dryBase: 0.5 })?.param).toBe("dry_base");
    expect(bad({ typicalP: Number.NaN })?.param).toBe("typical_p");
  });
});

describe("the Sampler's hook", () => {
  const row = new Float32Array([Math.log(0.5), Math.log(0.25), Math.log(0.125), Math.log(0.125)]);
  const ctx = (params: Partial<SamplingParams>, rng: Rng): SamplingContext => ({
    params: { ...DEFAULT_SAMPLING_PARAMS, ...params }, allTokenIds: [0, 0, 3], numPromptTokens: 2, outputCounts: new Map([[3, 1]]),
    stopTokenIds: [], rng,
  });

  test("llama: null samples exactly as no field (vLLM's path), seeded and greedy", () => {
    const run = (params: Partial<SamplingParams>): number[] => {
      const s = new Sampler();
      const rng = createRng(3);
      return Array.from({ length: 30 }, () => s.sample(row, ctx(params, rng)).tokenId);
    };
    for (const p of [{ temperature: 1 }, { temperature: 0.7, topK: 3, repetitionPenalty: 1.3, frequencyPenalty: 0.5 }, { temperature: 0 }]) {
      expect(run({ ...p, llama: null })).toEqual(run(p));
    }
  });

  test("a llama.cpp field moves the penalties into its window: vLLM's path penalizes the whole prompt", () => {
    const s = new Sampler();
    // token 0 appears only in the prompt, 2 tokens before the end: outside a window of 1
    const vllm = s.targetProbs(row, ctx({ temperature: 1, repetitionPenalty: 4 }, createRng(1)));
    const llama = s.targetProbs(row, ctx({ temperature: 1, repetitionPenalty: 4, llama: { ...DEFAULT_LLAMA_SAMPLING_PARAMS, repeatLastN: 1 } }, createRng(1)));
    expect(vllm[0]!).toBeLessThan(0.5);
    expect(llama[0]! / llama[1]!).toBeCloseTo(2, 5);
  });

  test("Mirostat's mu is kept per request between tokens", () => {
    // tau 0.5, eta 1: mu starts at 1 (only the 1-bit token); each draw of it (surprise 0) raises mu by 0.5
    const s = new Sampler();
    const llama = { ...DEFAULT_LLAMA_SAMPLING_PARAMS, mirostat: 2 as const, mirostatTau: 0.5, mirostatEta: 1 };
    const mine = createRng(1);
    const other = createRng(1);
    expect(nonzero(s.targetProbs(row, ctx({ temperature: 1, llama }, mine)))).toEqual([0]);
    for (let i = 0; i < 3; i++) expect(s.sample(row, ctx({ temperature: 1, llama }, mine)).tokenId).toBe(0);
    expect(nonzero(s.targetProbs(row, ctx({ temperature: 1, llama }, mine)))).toEqual([0, 1]); // mu = 2.5
    expect(nonzero(s.targetProbs(row, ctx({ temperature: 1, llama }, other)))).toEqual([0]);
  });
});
