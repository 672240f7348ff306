/**
 * bad_words bans the word's text, not only vLLM's token sequence: vLLM forbids the last token of the sequence, so a
 * small vocabulary spells the rest with other tokens ("outside" banned, "outsides" written; "ed" banned, "e" + "d").
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createEngineFrontend } from "../../src/frontend/engine-frontend.ts";
import type { Orchestrator } from "../../src/frontend/orchestrator.ts";
import { createRng } from "../../src/engine/rng.ts";
import { Sampler, type SamplingContext } from "../../src/engine/sampler.ts";
import { compileBannedText, DEFAULT_SAMPLING_PARAMS, type SamplingParams } from "../../src/engine/sampling-params.ts";
import type { GrammarChecker } from "../../src/grammar/grammar-checker.ts";
import { samplingExtras } from "../../src/server/openai/sampling-extras.ts";
import { nowMs } from "../../src/util/clock.ts";

/** a vocabulary where " surrounded" is " s" u r r ou nd ed, and "ed" can also be spelled "e" + "d" */
const PIECES = [" s", "u", "r", "ou", "nd", "ed", "e", "d", " x", "."];
const VOCAB = { vocabSize: PIECES.length, tokenText: (id: number) => PIECES[id]! };
const WORD = [0, 1, 2, 2, 3, 4, 5];

/** the row after `output`: the model's wish list, best first */
function rowPreferring(...ids: number[]): Float32Array {
  const row = new Float32Array(PIECES.length).fill(-10); // [vocabSize]
  ids.forEach((id, rank) => { row[id] = 5 - rank; });
  return row;
}

function ctx(params: Partial<SamplingParams>, output: number[]): SamplingContext {
  return { params: { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, ...params }, allTokenIds: [8, ...output], numPromptTokens: 1, outputCounts: new Map(), stopTokenIds: [], rng: createRng(1) };
}

/** greedy decoding where the model wants "ed", else "e", then "d", else "." */
function decode(params: Partial<SamplingParams>): string {
  const sampler = new Sampler();
  const output = WORD.slice(0, -1);
  output.push(sampler.sample(rowPreferring(5, 6, 9), ctx(params, output)).tokenId);
  output.push(sampler.sample(rowPreferring(7, 9), ctx(params, output)).tokenId);
  return output.map((id) => PIECES[id]).join("");
}

describe("bad_words bans the text", () => {
  test("vLLM's token sequence alone lets the word be spelled another way; the compiled text does not", () => {
    expect(decode({ badWordsTokenIds: [WORD] })).toBe(" surrounded");
    const banned = decode({ badWordsTokenIds: [WORD], badWordsTexts: [compileBannedText(" surrounded", VOCAB)] });
    expect(banned).not.toContain("surrounded");
    expect(banned).toBe(" surrounde.");
  });

  test("the tables: containing, entering mid-token, advancing, completing", () => {
    const ban = compileBannedText("ab", { vocabSize: 5, tokenText: (id) => ["xab", "xa", "b", "bc", "a"][id]! });
    expect(ban).toEqual({ numChars: 2, containing: [0], entering: [[1, 1], [4, 1]], advancing: [], completing: [[2, 1], [3, 1]] });
  });

  test("a match only counts output tokens, and breaks on a token that does not continue it", () => {
    const ban = compileBannedText(" surrounded", VOCAB);
    const sampler = new Sampler();
    const pick = (output: number[], allTokenIds?: number[]): number => sampler.sample(rowPreferring(5, 9), { ...ctx({ badWordsTexts: [ban] }, output), ...(allTokenIds ? { allTokenIds, numPromptTokens: allTokenIds.length - output.length } : {}) }).tokenId;
    expect(pick(WORD.slice(0, -1))).toBe(9);
    expect(pick([0, 1, 2, 8, 2, 3, 4])).toBe(5); // " x" broke the match
    expect(pick([3, 4], [0, 1, 2, 2, 3, 4])).toBe(5); // the start is in the prompt (vLLM: past tokens are the output)
  });
});

describe("bad_words on the real model (stories260K)", () => {
  let orch: Orchestrator;
  beforeAll(async () => {
    orch = await createEngineFrontend({ modelPath: null, engineArgs: { maxNumSeqs: 4, maxNumBatchedTokens: 64, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: null, enablePrefixCaching: true, threads: 1, device: "cpu" }, listeners: [] });
  });
  afterAll(async () => { await orch.shutdown(); });

  async function greedy(id: string, extra: Partial<SamplingParams>): Promise<string> {
    const tok = orch.tokenizer;
    const promptTokenIds = tok.encode("Once upon a time, there was a little girl named Lily. She loved to play", { addSpecial: true, parseSpecial: false });
    const sampling = { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, maxTokens: 12, ...extra };
    const ids: number[] = [];
    for await (const out of orch.generate({ requestId: id, promptTokenIds, sampling, arrivalMs: nowMs() })) for (const c of out.outputs) ids.push(...c.tokenIdsDelta);
    return tok.decode(ids);
  }

  test("bad_words [\"outside\"] as the server builds it keeps the text out; the token sequence alone did not", async () => {
    // the server's bad_words step (no grammar in the request, so the checker is never called)
    const extrasCtx = { tokenizer: orch.tokenizer, checker: {} as GrammarChecker, structuredOutputs: { disableAnyWhitespace: false } };
    const extras = await samplingExtras({ bad_words: ["outside"] }, extrasCtx);
    expect(await greedy("free", {})).toStartWith("outside");
    expect(await greedy("sequence-only", { badWordsTokenIds: extras.badWordsTokenIds })).toContain("outside"); // "outsides"
    const banned = await greedy("banned", extras);
    expect(banned).not.toContain("outside");
    expect(banned.length).toBeGreaterThan(10);
  });
});
