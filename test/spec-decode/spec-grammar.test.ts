/**
 * Speculative decoding with structured outputs (vLLM: drafts validated by the grammar, a bitmask per draft position
 * and the bonus one, the matcher advanced through the drafts and rolled back). On the fake model with GPT-2's real
 * 50257-token vocabulary, a proposer that drafts the known answer with a grammar-invalid token at the third draft:
 * greedy output equals speculation off, every counted draft is valid (the invalid one and those after it were cut
 * before verification), and drafts across a reasoning end token switch the grammar on in the same window. On the
 * default model (through the engine Worker) and a random-weight model of a real shape, with the ngram proposer: greedy
 * json / choice / regex output identical off and on, alone and 4 at once, drafts verified, every answer valid.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $ } from "bun";
import Ajv from "ajv";
import { readGguf } from "../../src/gguf/reader.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { EngineCore } from "../../src/engine/engine-core.ts";
import { resolveEngineConfig } from "../../src/engine/engine-sizing.ts";
import type { RequestState } from "../../src/engine/request.ts";
import type { DraftProposer } from "../../src/engine/spec-decode/proposer.ts";
import type { SpeculativeConfig } from "../../src/config/speculative-config.ts";
import type { EngineArgs } from "../../src/engine/protocol.ts";
import type { StepStats } from "../../src/engine/stats.ts";
import type { GrammarSpec } from "../../src/grammar/grammar-spec.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../../src/engine/sampling-params.ts";
import { createEngineFrontend } from "../../src/frontend/engine-frontend.ts";
import type { IterationStats, StatsListener } from "../../src/frontend/iteration-stats.ts";
import { openModelGguf } from "../../src/gguf/model-source.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { createBackend } from "../../src/backend/create-backend.ts";
import { nowMs } from "../../src/util/clock.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { FakeRunner } from "../engine/fake-runner.ts";
import { engineConfig, request, runToCompletion } from "../engine/helpers.ts";

const NGRAM: SpeculativeConfig = { method: "ngram", model: null, numSpeculativeTokens: 4, promptLookupMax: 4, promptLookupMin: 2 };

interface SpecTotals { drafts: number; draftTokens: number; accepted: number }
function specTotals(steps: readonly (StepStats | IterationStats)[]): SpecTotals {
  const t = { drafts: 0, draftTokens: 0, accepted: 0 };
  for (const s of steps) {
    const d = s.specDecoding;
    if (!d) continue;
    t.drafts += d.numDrafts; t.draftTokens += d.numDraftTokens; t.accepted += d.numAcceptedTokens;
  }
  return t;
}

/** The answer's text is what the constraint allows (the model is random or tiny: only the masks make it so). */
const ajv = new Ajv({ strict: false });
function expectValid(spec: GrammarSpec, text: string): void {
  if (spec.kind === "choice") expect(spec.choices).toContain(text);
  if (spec.kind === "regex") expect(text).toMatch(new RegExp(`^(?:${spec.pattern})$`));
  if (spec.kind === "grammar") expect(text).toMatch(/^\([a-c]+(,[a-c]+)*\)$/);
  if (spec.kind === "json") expect(ajv.validate(JSON.parse(spec.schema), JSON.parse(text)) ? null : `${text}: ${ajv.errorsText()}`).toBeNull();
}

describe("grammar-validated drafts (fake model, GPT-2 vocabulary, drafts = the answer with an invalid third token)", () => {
  const file = readGguf(llamaVocabPath("gpt-2"));
  if (!file.ok) throw new Error(file.error);
  const tok: Tokenizer = createTokenizer(file.value);
  const vocab = tok.grammarVocabulary!();
  const V = tok.vocabSize;
  const engines: EngineCore[] = [];
  afterAll(() => { for (const e of engines) e.dispose(); });
  /** "Z": no position of any constraint below allows it */
  const INVALID = tok.encode("Z", { addSpecial: false, parseSpecial: false })[0]!;
  const PROMPT = [464, 3290, 318, 257];

  /** Drafts the next 4 tokens of each request's known output, the third replaced by INVALID. */
  class AnswerProposer implements DraftProposer {
    readonly drafted: number[][] = [];
    constructor(private readonly answers: ReadonlyMap<string, readonly number[]>, private readonly invalidAt: number | null = 2) {}
    propose(requests: readonly RequestState[]): void {
      for (const req of requests) {
        const n = req.numOutputTokens;
        const drafts = this.answers.get(req.requestId)!.slice(n, n + 4);
        if (this.invalidAt !== null && drafts.length > this.invalidAt) drafts[this.invalidAt] = INVALID;
        this.drafted.push(drafts);
        req.draftTokenIds = drafts;
      }
    }
  }

  function makeEngine(proposer: DraftProposer | null): EngineCore {
    const engine = new EngineCore(new FakeRunner({ vocabSize: V }), engineConfig({ maxNumBatchedTokens: 256, ...(proposer ? { speculative: NGRAM } : {}) }),
      0, () => performance.now(), 1, { grammarVocab: vocab, ...(proposer ? { proposer } : {}) });
    engines.push(engine);
    return engine;
  }

  const SPECS: [string, GrammarSpec][] = [
    ["json schema", { kind: "json", schema: JSON.stringify({ type: "object", properties: { id: { type: "integer", minimum: 0, maximum: 99 }, tag: { enum: ["a", "b"] } }, required: ["id", "tag"] }), anyWhitespace: false }],
    ["choice", { kind: "choice", choices: ["the quick brown fox jumps over the lazy dog", "a slow green turtle walks under the busy bridge"] }],
    ["regex", { kind: "regex", pattern: "[0-9]{3}-[a-z]{2,4}" }],
    ["ebnf", { kind: "grammar", ebnf: 'root ::= "(" item ("," item)* ")"\nitem ::= [a-c]+' }],
  ];

  test.each(SPECS)("%s: greedy identical off and on, alone and 8 at once; only valid drafts are verified and counted", async (_name, spec) => {
    for (const count of [1, 8]) {
      const ids = Array.from({ length: count }, (_, i) => `r${i}`);
      const prompts = ids.map((_, i) => [...PROMPT, 100 + i]);
      const off = makeEngine(null);
      ids.forEach((id, i) => off.addRequest(request(id, prompts[i]!, { maxTokens: 24, structuredOutputs: spec }, [...tok.stopIds])));
      const offRun = await runToCompletion(off);
      expect(offRun.errors.size).toBe(0);
      const answers = new Map(ids.map((id) => [id, offRun.outputs.get(id)!.tokens]));
      const proposer = new AnswerProposer(answers);
      const on = makeEngine(proposer);
      ids.forEach((id, i) => on.addRequest(request(id, prompts[i]!, { maxTokens: 24, structuredOutputs: spec }, [...tok.stopIds])));
      const onRun = await runToCompletion(on);
      expect(onRun.errors.size).toBe(0);
      for (const id of ids) {
        expect(onRun.outputs.get(id)!.tokens).toEqual(answers.get(id)!);
        expect(onRun.outputs.get(id)!.finishReason).toBe(offRun.outputs.get(id)!.finishReason);
        // an answer cut by max_tokens is a prefix of a valid one (the ebnf's items never have to end)
        if (offRun.outputs.get(id)!.finishReason === "stop") expectValid(spec, tok.decode(answers.get(id)!.filter((t) => !tok.stopIds.includes(t))));
      }
      const t = specTotals(onRun.steps);
      expect(proposer.drafted.some((d) => d.length > 2 && d[2] === INVALID)).toBe(true); // invalid drafts were offered
      expect(t.drafts).toBeGreaterThan(0);
      // the valid drafts are the answer itself, so every one is accepted; the invalid third never reached verification
      expect(t.draftTokens).toBe(t.accepted);
      expect(t.draftTokens).toBeLessThanOrEqual(2 * t.drafts);
      expect(onRun.steps.length).toBeLessThan(offRun.steps.length);
      expect(on.kv.usage()).toBe(0);
    }
  });

  test("valid drafts the target rejects (another request's answer): the emitted tokens are identical to speculation off", async () => {
    const spec = SPECS[0]![1];
    const ids = ["r0", "r1", "r2", "r3"];
    const off = makeEngine(null);
    ids.forEach((id, i) => off.addRequest(request(id, [...PROMPT, 200 + i], { maxTokens: 24, structuredOutputs: spec }, [...tok.stopIds])));
    const answers = (await runToCompletion(off)).outputs;
    // each request drafts its neighbour's answer: the same JSON keys, other values
    const crossed = new Map(ids.map((id, i) => [id, answers.get(ids[(i + 1) % ids.length]!)!.tokens]));
    expect(new Set(ids.map((id) => JSON.stringify(answers.get(id)!.tokens))).size).toBeGreaterThan(1);
    const on = makeEngine(new AnswerProposer(crossed, null));
    ids.forEach((id, i) => on.addRequest(request(id, [...PROMPT, 200 + i], { maxTokens: 24, structuredOutputs: spec }, [...tok.stopIds])));
    const { outputs, steps, errors } = await runToCompletion(on);
    expect(errors.size).toBe(0);
    for (const id of ids) expect(outputs.get(id)!.tokens).toEqual(answers.get(id)!.tokens);
    const t = specTotals(steps);
    expect(t.accepted).toBeGreaterThan(0);
    expect(t.draftTokens).toBeGreaterThan(t.accepted);
  });

  test("reasoning gate: drafts before the end token are free, after it the grammar masks them in the same step", async () => {
    const spec: GrammarSpec = { kind: "choice", choices: ["yes", "no", "maybe so"] };
    const free = makeEngine(null);
    free.addRequest(request("free", PROMPT, { maxTokens: 6 }, [...tok.stopIds]));
    const freeTokens = (await runToCompletion(free)).outputs.get("free")!.tokens;
    const k = 2; // the stand-in for </think>: the free output's third token, one that does not occur before it
    expect(freeTokens.slice(0, k)).not.toContain(freeTokens[k]!);
    const endId = freeTokens[k]!;
    const gated: GrammarSpec = { ...spec, reasoningEndTokenIds: [endId] };
    const off = makeEngine(null);
    off.addRequest(request("g", PROMPT, { maxTokens: 12, structuredOutputs: gated }, [...tok.stopIds]));
    const expected = (await runToCompletion(off)).outputs.get("g")!.tokens;
    expect(expected.slice(0, k + 1)).toEqual(freeTokens.slice(0, k + 1));
    const proposer = new AnswerProposer(new Map([["g", expected]]), null);
    const on = makeEngine(proposer);
    on.addRequest(request("g", PROMPT, { maxTokens: 12, structuredOutputs: gated }, [...tok.stopIds]));
    const { outputs, steps, errors } = await runToCompletion(on);
    expect(errors.size).toBe(0);
    expect(outputs.get("g")!.tokens).toEqual(expected);
    expect(["yes", "no", "maybe so"]).toContain(tok.decode(expected.slice(k + 1).filter((t) => !tok.stopIds.includes(t))));
    // a draft window that held the end token and grammar tokens after it was verified whole
    expect(proposer.drafted.some((d) => d.indexOf(endId) >= 0 && d.indexOf(endId) < d.length - 1)).toBe(true);
    const t = specTotals(steps);
    expect(t.accepted).toBe(t.draftTokens);
    expect(t.accepted).toBeGreaterThan(k);
  });
});

/** Greedy json / choice / regex requests for a real model, ngram-friendly: the prompt holds text the answer can copy. */
const REAL_SPECS: [string, GrammarSpec, string][] = [
  ["json schema", { kind: "json", schema: JSON.stringify({ type: "object", properties: { name: { type: "string", maxLength: 20 }, friends: { type: "array", items: { type: "string", maxLength: 12 }, maxItems: 3 } }, required: ["name", "friends"] }), anyWhitespace: false },
    'Once upon a time, there was a little girl named Lily. {"name": "Lily", "friends": ["Tom", "Sue", "Ben"]} Lily had friends named Tom, Sue and Ben.'],
  ["choice", { kind: "choice", choices: ["Lily and Tom went to the park to play with the ball", "Lily and Tom went to the park to play with the dog", "no"] },
    "Lily and Tom went to the park to play with the ball. Lily and Tom went to the park."],
  ["regex", { kind: "regex", pattern: "(the (big|little) (cat|dog|girl)\\. ){2,4}" }, "the big cat. the little dog. the big cat. the little girl."],
];

class StepLog implements StatsListener {
  readonly steps: IterationStats[] = [];
  onStep(s: IterationStats): void { this.steps.push(s); }
  onRequestFinished(): void {}
}

const ARGS: EngineArgs = {
  maxNumSeqs: 16, maxNumBatchedTokens: 128, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: null,
  enablePrefixCaching: true, threads: 1, device: "cpu",
};

describe("default model (stories260K) through the engine Worker, ngram drafts", () => {
  const started: { shutdown(): Promise<void> }[] = [];
  afterAll(async () => { await Promise.all(started.map((o) => o.shutdown())); });
  async function start(args: Partial<EngineArgs>) {
    const log = new StepLog();
    const orch = await createEngineFrontend({ modelPath: null, engineArgs: { ...ARGS, ...args }, listeners: [log] });
    started.push(orch);
    return { orch, log };
  }
  type Orch = Awaited<ReturnType<typeof start>>["orch"];
  async function greedy(orch: Orch, id: string, text: string, spec: GrammarSpec): Promise<number[]> {
    const promptTokenIds = orch.tokenizer.encode(text, { addSpecial: true, parseSpecial: false });
    const ids: number[] = [];
    const sampling = { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, maxTokens: 120, structuredOutputs: spec };
    for await (const out of orch.generate({ requestId: id, promptTokenIds, sampling, arrivalMs: nowMs() })) for (const c of out.outputs) ids.push(...c.tokenIdsDelta);
    return ids;
  }

  test("json schema, choice, regex: identical off and on, alone and 4 at once; drafts verified; answers valid", async () => {
    const off = await start({});
    const on = await start({ speculativeConfig: NGRAM, numDraftTokensPerStep: null });
    for (const [name, spec, text] of REAL_SPECS) {
      const expected = await greedy(off.orch, `off-${name}`, text, spec);
      const decoded = off.orch.tokenizer.decode(expected.filter((t) => !off.orch.tokenizer.stopIds.includes(t)));
      expectValid(spec, decoded);
      expect(await greedy(on.orch, `on-${name}`, text, spec)).toEqual(expected);
      const four = await Promise.all([0, 1, 2, 3].map((i) => greedy(on.orch, `on4-${name}-${i}`, text, spec)));
      for (const ids of four) expect(ids).toEqual(expected);
    }
    const t = specTotals(on.log.steps);
    expect(t.drafts).toBeGreaterThan(0);
    expect(t.accepted).toBeGreaterThan(0);
    expect(t.accepted).toBeLessThanOrEqual(t.draftTokens);
  });
});

describe("random-weight model of a real shape (tiny-smollm2-135m, GPT-2 vocabulary), in-process engine", () => {
  const dir = mkdtempSync(join(tmpdir(), "fennec-spec-grammar-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  beforeAll(async () => { await ensureKernels(); });

  test("json schema, choice, regex: identical off and on, 1 and 4 concurrent; drafts verified; answers valid", async () => {
    const out = join(dir, "tiny-smollm2-135m.gguf");
    const made = await $`${process.execPath} scripts/make-model.ts --shape tiny-smollm2-135m --type q8_0 --layers 2 --seed 3 --out ${out}`.quiet().nothrow();
    expect(made.exitCode).toBe(0);
    const file = await openModelGguf(out);
    if (!file.ok) throw new Error(file.error);
    const model = loadModel(file.value);
    if (!model.ok) throw new Error(model.error);
    const tok = createTokenizer(file.value);
    const runner = new Runner(model.value.config, model.value.weights, await createBackend({ kind: "wasm", threads: 1 }));
    const grammarVocab = tok.grammarVocabulary!();
    const results: number[][][] = [];
    const specSteps: StepStats[] = [];
    try {
      for (const speculative of [null, NGRAM]) {
        const cfg = resolveEngineConfig({ ...ARGS, maxModelLen: 512, numKvBlocksOverride: 64, speculativeConfig: speculative, numDraftTokensPerStep: null }, runner, 1e9);
        if (!cfg.ok) throw new Error(cfg.error);
        const engine = new EngineCore(runner, cfg.value, 0, nowMs, 1, { grammarVocab });
        const byRun: number[][] = [];
        try {
          for (const count of [1, 4]) {
            REAL_SPECS.forEach(([name, spec, text]) => {
              for (let i = 0; i < count; i++) engine.addRequest(request(`${name}-${count}-${i}`, tok.encode(text, { addSpecial: true, parseSpecial: false }), { maxTokens: 64, structuredOutputs: spec }, [...tok.stopIds]));
            });
            const { outputs, steps, errors } = await runToCompletion(engine);
            expect(errors.size).toBe(0);
            REAL_SPECS.forEach(([name, spec]) => {
              for (let i = 0; i < count; i++) {
                const o = outputs.get(`${name}-${count}-${i}`)!;
                byRun.push(o.tokens);
                // random weights rarely finish within max_tokens; a finished answer is whole and valid
                if (o.finishReason === "stop") expectValid(spec, tok.decode(o.tokens.filter((t) => !tok.stopIds.includes(t))));
              }
            });
            if (speculative) specSteps.push(...steps);
          }
          expect(engine.kv.pool.numFreeBlocks).toBe(64);
        } finally {
          engine.dispose();
        }
        results.push(byRun);
      }
    } finally {
      runner.dispose();
    }
    expect(results[1]).toEqual(results[0]);
    const t = specTotals(specSteps);
    expect(t.drafts).toBeGreaterThan(0);
    expect(t.accepted).toBeGreaterThan(0);
  });
});
