/**
 * The rejection sampler keeps the output distribution: on the default model (stories260K, vocabulary 512) the first
 * and second speculated positions' tokens, over a few thousand seeded samples, agree with the distribution sampling
 * draws from without speculation (chi-square, p = 0.001), for a likely, a middling and an excluded draft; and a
 * deliberately wrong rule (the replacement drawn from p itself, the draft not removed) fails the same test. With a
 * grammar bitmask at the speculated position the tokens follow the masked p (and fail it when the mask is left out).
 */
import { describe, expect, test } from "bun:test";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { openModelGguf } from "../../src/gguf/model-source.ts";
import { createRng } from "../../src/engine/rng.ts";
import { drawFrom, Sampler, type SamplingContext } from "../../src/engine/sampler.ts";
import { DEFAULT_SAMPLING_PARAMS, type SamplingParams } from "../../src/engine/sampling-params.ts";
import { STANDARD_REJECTION, verifyDrafts, type RejectionRule } from "../../src/engine/spec-decode/rejection-sampler.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";

const NUM_SAMPLES = 4000;
/** BOS "Once upon a time, there was a little girl named Lily. She" in stories260K's tokenizer */
const TEXT = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338];

async function rowsAfter(tokens: number[]): Promise<Float32Array> {
  const file = await openModelGguf(null);
  if (!file.ok) throw new Error(file.error);
  const model = loadModel(file.value);
  if (!model.ok) throw new Error(model.error);
  const runner = new Runner(model.value.config, model.value.weights, new ReferenceBackend());
  runner.allocateKvCache(4, 16);
  const { logits } = await runner.execute({ sequences: [{ tokenIds: Int32Array.from(tokens), startPos: 0, blockTable: Int32Array.of(0, 1, 2, 3), logits: "last" }] });
  runner.dispose();
  return logits.slice();
}

/** Wilson-Hilferty: the chi-square quantile for df degrees of freedom at upper tail 0.001 (z = 3.09) */
function chiSquareCritical(df: number): number {
  const z = 3.090232;
  return df * (1 - 2 / (9 * df) + z * Math.sqrt(2 / (9 * df))) ** 3;
}

/** Pearson's statistic of observed counts against probabilities; cells expected below 5 are pooled into one. */
function chiSquare(counts: Map<number, number>, probs: Float64Array, n: number): { stat: number; df: number } {
  let stat = 0, cells = 0, pooledExpected = 0, pooledObserved = 0;
  for (let id = 0; id < probs.length; id++) {
    const expected = probs[id]! * n;
    const observed = counts.get(id) ?? 0;
    if (expected === 0) { if (observed > 0) return { stat: Infinity, df: 1 }; continue; }
    if (expected < 5) { pooledExpected += expected; pooledObserved += observed; continue; }
    stat += (observed - expected) ** 2 / expected;
    cells++;
  }
  if (pooledExpected > 0) { stat += (pooledObserved - pooledExpected) ** 2 / pooledExpected; cells++; }
  return { stat, df: cells - 1 };
}

const PARAMS: SamplingParams = { ...DEFAULT_SAMPLING_PARAMS, temperature: 1, topK: 40, topP: 0.95, repetitionPenalty: 1.3, presencePenalty: 0.5, maxTokens: null };

function context(tokens: number[], seed: number, numPromptTokens = tokens.length): SamplingContext {
  return { params: PARAMS, allTokenIds: [...tokens], numPromptTokens, outputCounts: new Map(), stopTokenIds: [2], rng: createRng(seed) };
}

/** the prefix of TEXT after which the next token is least predictable (most chi-square cells) */
async function widestPrefix(sampler: Sampler): Promise<number[]> {
  let best: number[] = [];
  let bestCells = -1;
  for (let len = 4; len <= TEXT.length; len++) {
    const prefix = TEXT.slice(0, len);
    const probs = sampler.targetProbs(await rowsAfter(prefix), context(prefix, 0));
    const cells = [...probs].filter((q) => q * NUM_SAMPLES >= 5).length;
    if (cells > bestCells) { bestCells = cells; best = prefix; }
  }
  return best;
}

describe("rejection sampling keeps the distribution (stories260K)", async () => {
  const sampler = new Sampler();
  const PROMPT = await widestPrefix(sampler);
  const row0 = await rowsAfter(PROMPT);
  const p0 = sampler.targetProbs(row0, context(PROMPT, 0));
  const byProb = [...p0.keys()].sort((a, b) => p0[b]! - p0[a]!);
  const likely = byProb[0]!;
  const middling = byProb.find((id) => p0[id]! < 0.15 && p0[id]! > 0.02) ?? byProb[3]!;
  const excluded = byProb[byProb.length - 1]!; // outside top_k: p = 0
  const row1 = await rowsAfter([...PROMPT, likely]);
  const p1 = sampler.targetProbs(row1, { ...context([...PROMPT, likely], 0, PROMPT.length), outputCounts: new Map([[likely, 1]]) });
  const second = [...p1.keys()].sort((a, b) => p1[b]! - p1[a]!)[1]!;

  /** first emitted token of NUM_SAMPLES verifications of [draft, second], and the second one where the first was accepted */
  function sampleSpec(draft: number, rule: RejectionRule, bitmasks?: readonly (Int32Array | undefined)[]) {
    const first = new Map<number, number>();
    const next = new Map<number, number>();
    let numNext = 0;
    for (let s = 0; s < NUM_SAMPLES; s++) {
      const emitted: number[] = [];
      const ctx = context(PROMPT, 1000 + s);
      const push = (id: number): boolean => {
        emitted.push(id);
        (ctx.allTokenIds as number[]).push(id); // the next position sees it, as the engine's request does
        (ctx.outputCounts as Map<number, number>).set(id, (ctx.outputCounts.get(id) ?? 0) + 1);
        return false;
      };
      verifyDrafts([row0, row1, row1], [draft, second], ctx, sampler, push, { rule, ...(bitmasks ? { bitmasks } : {}) });
      first.set(emitted[0]!, (first.get(emitted[0]!) ?? 0) + 1);
      if (emitted[0] === likely) { next.set(emitted[1]!, (next.get(emitted[1]!) ?? 0) + 1); numNext++; }
    }
    return { first, next, numNext };
  }

  test("without speculation the sampler draws from targetProbs (the reference distribution)", () => {
    const counts = new Map<number, number>();
    for (let s = 0; s < NUM_SAMPLES; s++) {
      const { tokenId } = sampler.sample(row0, context(PROMPT, 5000 + s));
      counts.set(tokenId, (counts.get(tokenId) ?? 0) + 1);
    }
    const { stat, df } = chiSquare(counts, p0, NUM_SAMPLES);
    expect(stat).toBeLessThan(chiSquareCritical(df));
  });

  test.each([["likely", () => likely], ["middling", () => middling], ["excluded by top_k", () => excluded]])(
    "standard rule, %s draft: first speculated position ~ p", (_name, draftOf) => {
      const draft = draftOf();
      const { first } = sampleSpec(draft, STANDARD_REJECTION);
      const { stat, df } = chiSquare(first, p0, NUM_SAMPLES);
      expect(df).toBeGreaterThan(3);
      expect(stat).toBeLessThan(chiSquareCritical(df));
    },
  );

  test("standard rule: the second speculated position (after an accepted first) ~ p at that position", () => {
    const { next, numNext } = sampleSpec(likely, STANDARD_REJECTION);
    expect(numNext).toBeGreaterThan(500);
    const { stat, df } = chiSquare(next, p1, numNext);
    expect(stat).toBeLessThan(chiSquareCritical(df));
  });

  // structured outputs: a grammar's bitmask at the first position (here: every id not divisible by 3) applies to p there
  const mask = new Int32Array(Math.ceil(p0.length / 32)); // [words] bit set = allowed
  for (let id = 0; id < p0.length; id++) if (id % 3 !== 0) mask[id >> 5]! |= 1 << (id & 31);
  const p0Masked = sampler.targetProbs(row0, { ...context(PROMPT, 0), tokenBitmask: mask });
  const maskedDraft = byProb.find((id) => id % 3 !== 0)!;

  test("with a grammar bitmask per position: the first speculated position ~ the masked p", () => {
    expect(byProb.slice(0, 10).some((id) => id % 3 === 0)).toBe(true); // the mask removes likely tokens
    const { first } = sampleSpec(maskedDraft, STANDARD_REJECTION, [mask, undefined, undefined]);
    const { stat, df } = chiSquare(first, p0Masked, NUM_SAMPLES);
    expect(df).toBeGreaterThan(3);
    expect(stat).toBeLessThan(chiSquareCritical(df));
  });

  test("the mask left out at the draft position fails the masked test", () => {
    const { first } = sampleSpec(maskedDraft, STANDARD_REJECTION);
    const { stat, df } = chiSquare(first, p0Masked, NUM_SAMPLES);
    expect(stat).toBeGreaterThan(chiSquareCritical(df));
  });

  test("a wrong rule (replacement drawn from p with the draft left in) fails the test", () => {
    const wrong: RejectionRule = { accept: STANDARD_REJECTION.accept, recover: (probs, _draft, rng) => drawFrom(probs, 1, rng) };
    const { first } = sampleSpec(middling, wrong);
    const { stat, df } = chiSquare(first, p0, NUM_SAMPLES);
    expect(stat).toBeGreaterThan(chiSquareCritical(df));
  });
});
