import { describe, expect, test } from "bun:test";
import { judgeGreedy, TIE_GAP, type ServedStep } from "./greedy-agreement.ts";

const step = (text: string, margin: number): ServedStep => ({ bytes: [...new TextEncoder().encode(text)], top_logprobs: [{ logprob: -0.1 }, { logprob: -0.1 - margin }] });

describe("judgeGreedy: served greedy text against llama-mtmd-cli's", () => {
  const steps = [step(" red", 1), step(" fox", TIE_GAP / 2), step(" runs", 2)];

  test("the same text agrees, whatever the margins", () => {
    expect(judgeGreedy(" red fox runs", steps, "red fox runs")).toMatchObject({ agrees: true, summary: "same", smallestMargin: TIE_GAP / 2 });
  });

  test("texts that part at a near tie agree; at a clear choice they do not", () => {
    expect(judgeGreedy(" red fox runs", steps, "red dog runs").agrees).toBe(true);
    const clear = judgeGreedy(" red fox runs", steps, "red fox walks");
    expect(clear.agrees).toBe(false);
    expect(clear.summary).toContain("step 2");
    expect(judgeGreedy(" red fox runs", steps, "blue fox runs").agrees).toBe(false);
  });

  test("fennec's token a prefix of llama.cpp's: the step before the parting byte counts too", () => {
    const tied = [step(" red", 1), step(" f", TIE_GAP / 2), step("ox", 2)];
    expect(judgeGreedy(" red fox", tied, "red fa").agrees).toBe(true);
    const clear = [step(" red", 1), step(" f", 1), step("ox", 2)];
    expect(judgeGreedy(" red fox", clear, "red fa").agrees).toBe(false);
  });

  test("steps whose bytes do not add up to the text: any step up to the parting byte may be the one", () => {
    const unaligned = [step("\uFFFD", TIE_GAP / 2), step(" cat", 1), step(" sat", 1)];
    const judgement = judgeGreedy("é cat sat", unaligned, "é cat sits");
    expect(judgement.agrees).toBe(true);
    expect(judgement.summary).toContain("not byte-aligned");
    expect(judgeGreedy("é cat sat", [step("\uFFFD", 1), step(" cat", 1), step(" sat", 1)], "é cat sits").agrees).toBe(false);
  });
});
