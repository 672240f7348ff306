/**
 * The engine's reasoning budget (engine/thinking-budget.ts through the Sampler): nothing changes before the budget or
 * after the reasoning ended; at the budget the end token ids are forced one per step, whatever the logits say, on the
 * greedy, random and llama.cpp chain paths.
 */
import { describe, expect, test } from "bun:test";
import { createRng } from "../../src/engine/rng.ts";
import { Sampler, type SamplingContext } from "../../src/engine/sampler.ts";
import { DEFAULT_SAMPLING_PARAMS, type SamplingParams } from "../../src/engine/sampling-params.ts";
import { forcedReasoningEnd } from "../../src/engine/thinking-budget.ts";

const PROMPT = [1, 2, 3];
const budget = (budgetTokens: number, endTokenIds: number[]) => ({ budgetTokens, endTokenIds });

function ctx(output: number[], over: Partial<SamplingParams>): SamplingContext {
  return { params: { ...DEFAULT_SAMPLING_PARAMS, ...over }, allTokenIds: [...PROMPT, ...output], numPromptTokens: PROMPT.length, outputCounts: new Map(), stopTokenIds: [], rng: createRng(7) };
}

describe("forcedReasoningEnd", () => {
  test("free before the budget, forced at it, free again once the end is out", () => {
    const b = budget(4, [9]);
    expect(forcedReasoningEnd(b, [...PROMPT, 5, 5, 5], 3)).toBeNull();
    expect(forcedReasoningEnd(b, [...PROMPT, 5, 5, 5, 5], 3)).toBe(9);
    expect(forcedReasoningEnd(b, [...PROMPT, 5, 5, 5, 5, 5, 5], 3)).toBe(9);
    expect(forcedReasoningEnd(b, [...PROMPT, 5, 9, 5, 5, 5], 3)).toBeNull();
    expect(forcedReasoningEnd(null, [...PROMPT, 5, 5, 5, 5], 3)).toBeNull();
  });

  test("a many-token end is forced token by token; an end inside the prompt does not count", () => {
    const b = budget(2, [7, 8, 9]);
    const prompt = [7, 8, 9];
    expect(forcedReasoningEnd(b, [...prompt, 5, 5], 3)).toBe(7);
    expect(forcedReasoningEnd(b, [...prompt, 5, 5, 7], 3)).toBe(8);
    expect(forcedReasoningEnd(b, [...prompt, 5, 5, 7, 8], 3)).toBe(9);
    expect(forcedReasoningEnd(b, [...prompt, 5, 5, 7, 8, 9], 3)).toBeNull();
  });
});

describe("forcedReasoningEnd counted from the reasoning start (vLLM's in_think)", () => {
  test("nothing is forced before the output opens the reasoning; the count starts after the start tokens", () => {
    const b = { budgetTokens: 2, endTokenIds: [9], startTokenIds: [6, 7] };
    // no start yet: free however long the output is
    expect(forcedReasoningEnd(b, [...PROMPT, 5, 5, 5, 5, 5], 3)).toBeNull();
    // the start after two tokens of preamble: two reasoning tokens, then the end
    expect(forcedReasoningEnd(b, [...PROMPT, 5, 5, 6, 7, 5], 3)).toBeNull();
    expect(forcedReasoningEnd(b, [...PROMPT, 5, 5, 6, 7, 5, 5], 3)).toBe(9);
    expect(forcedReasoningEnd(b, [...PROMPT, 5, 5, 6, 7, 5, 5, 9], 3)).toBeNull();
    // budget 0: the end follows the start at once
    expect(forcedReasoningEnd({ ...b, budgetTokens: 0 }, [...PROMPT, 6, 7], 3)).toBe(9);
    // a start inside the prompt does not open the output's reasoning
    expect(forcedReasoningEnd(b, [6, 7, 1, 5, 5, 5], 3)).toBeNull();
  });
});

describe("the Sampler honours the budget", () => {
  // token 0 is by far the likeliest: a model that would never close its reasoning
  const row = new Float32Array([10, 0, 0, 0, 0, 0, 0, 0, 0, -Infinity]);

  test("greedy, random and llama.cpp's chain all pick the forced end, even one the logits rule out", () => {
    const thinkingBudget = budget(2, [9]);
    const s = new Sampler();
    expect(s.sample(row, ctx([0], { temperature: 0, thinkingBudget })).tokenId).toBe(0);
    expect(s.sample(row, ctx([0, 0], { temperature: 0, thinkingBudget })).tokenId).toBe(9);
    expect(s.sample(row, ctx([0, 0], { temperature: 1, topK: 3, thinkingBudget })).tokenId).toBe(9);
    const llama = { repeatLastN: 64, typicalP: 1, mirostat: 0 as const, mirostatTau: 5, mirostatEta: 0.1, dryMultiplier: 0, dryBase: 1.75, dryAllowedLength: 2, dryPenaltyLastN: -1, drySequenceBreakers: [], xtcProbability: 0, xtcThreshold: 0.1, topNSigma: -1, dynatempRange: 0, dynatempExponent: 1, minKeep: 0, samplers: ["top_k", "temperature"] as const };
    expect(s.sample(row, ctx([0, 0], { temperature: 0.8, llama: llama as never, thinkingBudget })).tokenId).toBe(9);
    // after the end the model is free again
    expect(s.sample(row, ctx([0, 0, 9], { temperature: 0, thinkingBudget })).tokenId).toBe(0);
  });
});
