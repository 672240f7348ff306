/**
 * Structured outputs inside the engine (EngineCore + the real grammar thread, on the fake model with GPT-2's real
 * 50257-token byte-level vocabulary): greedy output under a grammar equals a reference written here (the same fake
 * logits, this test's own xgrammar matcher, its own masking loop, argmax), alone and 8 at once; a request waits for
 * its grammar without holding up others; bad grammars, dead ends and max_tokens end requests instead of hanging.
 */
import { afterAll, describe, expect, test } from "bun:test";
import * as xg from "@mlc-ai/web-xgrammar";
import { readGguf } from "../../src/gguf/reader.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { EngineCore } from "../../src/engine/engine-core.ts";
import { compileGrammar, type GrammarSpec } from "../../src/grammar/grammar-spec.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { FakeRunner } from "../engine/fake-runner.ts";
import { engineConfig, request, runToCompletion } from "../engine/helpers.ts";

const file = readGguf(llamaVocabPath("gpt-2"));
if (!file.ok) throw new Error(file.error);
const tok: Tokenizer = createTokenizer(file.value);
const vocab = tok.grammarVocabulary!();
const V = tok.vocabSize;
const engines: EngineCore[] = [];
afterAll(() => { for (const e of engines) e.dispose(); });

function makeEngine(): EngineCore {
  const engine = new EngineCore(new FakeRunner({ vocabSize: V }), engineConfig({ maxNumBatchedTokens: 256 }), 0, () => performance.now(), 1, { grammarVocab: vocab });
  engines.push(engine);
  return engine;
}

/** the reference: plain greedy over the fake model's logits with this test's own xgrammar matcher */
let refCompiler: xg.GrammarCompiler | null = null;
async function referenceGreedy(promptIds: number[], spec: GrammarSpec, maxTokens: number): Promise<number[]> {
  if (!refCompiler) {
    const info = await xg.TokenizerInfo.createTokenizerInfo([...vocab.encodedVocab], vocab.vocabType, vocab.prependSpace, V);
    refCompiler = await xg.GrammarCompiler.createGrammarCompiler(info, true);
  }
  const matcher = await xg.GrammarMatcher.createGrammarMatcher(await compileGrammar(xg, refCompiler, spec), [...tok.stopIds]);
  const tokens = [...promptIds];
  const out: number[] = [];
  while (out.length < maxTokens) {
    const runner = new FakeRunner({ vocabSize: V });
    runner.allocateKvCache(64, 16);
    const table = Int32Array.from({ length: 64 }, (_, i) => i);
    const { logits } = await runner.execute({ sequences: [{ tokenIds: Int32Array.from(tokens), startPos: 0, blockTable: table, logits: "last" }] });
    const mask = await matcher.getNextTokenBitmask();
    let best = -1;
    for (let id = 0; id < V; id++) {
      const allowed = ((mask[id >> 5]! >>> (id & 31)) & 1) === 1;
      if (allowed && (best < 0 || logits[id]! > logits[best]!)) best = id;
    }
    out.push(best);
    tokens.push(best);
    expect(matcher.acceptToken(best)).toBe(true);
    if (tok.stopIds.includes(best)) break;
  }
  matcher.dispose();
  return out;
}

const SPECS: [string, GrammarSpec][] = [
  ["choice", { kind: "choice", choices: ["yes", "no", "maybe so"] }],
  ["regex", { kind: "regex", pattern: "[0-9]{3}-[a-z]{2,4}" }],
  ["ebnf", { kind: "grammar", ebnf: 'root ::= "(" item ("," item)* ")"\nitem ::= [a-c]+' }],
  ["json", { kind: "json", schema: JSON.stringify({ type: "object", properties: { id: { type: "integer", minimum: 0, maximum: 99 }, tag: { enum: ["a", "b"] } }, required: ["id", "tag"] }), anyWhitespace: false }],
];
const PROMPT = [464, 3290, 318, 257];

describe("grammar-constrained greedy decoding in the engine", () => {
  test.each(SPECS)("%s: equals the reference mask, alone and 8 at once", async (_name, spec) => {
    const maxTokens = 24;
    const expected = await referenceGreedy(PROMPT, spec, maxTokens);
    const alone = makeEngine();
    alone.addRequest(request("alone", PROMPT, { maxTokens, structuredOutputs: spec }, [...tok.stopIds]));
    const a = await runToCompletion(alone);
    expect(a.errors.size).toBe(0);
    expect(a.outputs.get("alone")!.tokens).toEqual(expected);
    const batch = makeEngine();
    for (let i = 0; i < 8; i++) batch.addRequest(request(`b${i}`, PROMPT, { maxTokens, structuredOutputs: spec }, [...tok.stopIds]));
    const b = await runToCompletion(batch);
    for (let i = 0; i < 8; i++) expect(b.outputs.get(`b${i}`)!.tokens).toEqual(expected);
    // the fake model is random: only the mask can make these valid
    const text = tok.decode(expected);
    if (spec.kind === "choice") expect(spec.choices).toContain(text);
    if (spec.kind === "regex") expect(text).toMatch(new RegExp(`^(?:${spec.pattern})$`));
    if (spec.kind === "grammar") expect(text).toMatch(/^\([a-c]+(,[a-c]+)*\)$/);
    if (spec.kind === "json") expect(["a", "b"]).toContain(JSON.parse(text).tag);
    expect(a.outputs.get("alone")!.finishReason).toBe("stop");
  });

  test("n > 1 under an integer range: every child (`${i}_id`, seed + i, its own matcher) stays inside it", async () => {
    // xgrammar's own rule for maximum 120 is "1" [0-2] [0-9]: one child of three wrote 126
    const schema = { type: "object", properties: { age: { type: "integer", minimum: 0, maximum: 120 }, t: { type: "number", exclusiveMinimum: -1, maximum: 1.5 } }, required: ["age", "t"] };
    const spec: GrammarSpec = { kind: "json", schema: JSON.stringify(schema), anyWhitespace: false };
    const engine = makeEngine();
    const ids: string[] = [];
    for (let parent = 0; parent < 12; parent++) {
      for (let i = 0; i < 3; i++) {
        ids.push(`${i}_p${parent}`);
        engine.addRequest(request(`${i}_p${parent}`, PROMPT, { maxTokens: 40, temperature: 1, seed: parent * 10 + i, structuredOutputs: spec }, [...tok.stopIds]));
      }
    }
    const { outputs, errors } = await runToCompletion(engine);
    expect(errors.size).toBe(0);
    const texts = ids.map((id) => tok.decode(outputs.get(id)!.tokens));
    expect(new Set(texts).size).toBeGreaterThan(1); // the children sampled apart
    for (const text of texts) {
      const doc = JSON.parse(text) as { age: number; t: number };
      expect([text, Number.isInteger(doc.age) && doc.age >= 0 && doc.age <= 120 && doc.t > -1 && doc.t <= 1.5]).toEqual([text, true]);
    }
  });

  test("a request waits in the queue while its grammar compiles; others run", async () => {
    const engine = makeEngine();
    const spec: GrammarSpec = { kind: "json", schema: JSON.stringify({ type: "object", properties: { fresh: { type: "string", pattern: "^x+$" } } }), anyWhitespace: true };
    expect(engine.addRequest(request("g", PROMPT, { maxTokens: 8, structuredOutputs: spec }, [...tok.stopIds]))).toBeNull();
    expect(engine.addRequest(request("plain", PROMPT, { maxTokens: 8 }))).toBeNull();
    const first = await engine.step();
    expect(engine.numCompilingGrammars).toBe(1);
    expect(first!.deltas.map((d) => d.requestId)).toEqual(["plain"]);
    const rest = await runToCompletion(engine);
    expect(rest.outputs.get("g")!.tokens.length).toBeGreaterThan(0);
    expect(rest.errors.size).toBe(0);
  });

  test("a grammar xgrammar refuses fails its request; the grammar thread is replaced and others go on", async () => {
    const engine = makeEngine();
    const good: GrammarSpec = { kind: "choice", choices: ["left", "right"] };
    engine.addRequest(request("good", PROMPT, { maxTokens: 8, structuredOutputs: good }, [...tok.stopIds]));
    engine.addRequest(request("bad", PROMPT, { maxTokens: 8, structuredOutputs: { kind: "grammar", ebnf: "root ::= undefined_rule" } }, [...tok.stopIds]));
    const { outputs, errors } = await runToCompletion(engine);
    expect(errors.get("bad")).toContain('Invalid grammar specification. EBNF parser error at line 1, column 10: Rule "undefined_rule" is not defined');
    expect(["left", "right"]).toContain(tok.decode(outputs.get("good")!.tokens));
    expect(engine.kv.usage()).toBe(0);
  });

  test("a grammar longer than max_tokens ends with finish_reason length, not a hang", async () => {
    const engine = makeEngine();
    engine.addRequest(request("long", PROMPT, { maxTokens: 5, structuredOutputs: { kind: "regex", pattern: "[a-z]{400}" } }, [...tok.stopIds]));
    const { outputs } = await runToCompletion(engine);
    expect(outputs.get("long")!.finishReason).toBe("length");
    expect(outputs.get("long")!.tokens.length).toBe(5);
    expect(tok.decode(outputs.get("long")!.tokens)).toMatch(/^[a-z]+$/);
  });

  test("a grammar no token can continue ends the request with an error", async () => {
    // a raw 97-token vocabulary of lowercase pieces: nothing spells "Z" (a byte-level vocabulary spells everything)
    const raw = Array.from({ length: 97 }, (_, i) => (i === 2 ? "</s>" : String.fromCharCode(97 + (i % 26)).repeat(1 + Math.floor(i / 26))));
    const engine = new EngineCore(new FakeRunner(), engineConfig(), 0, () => performance.now(), 1, { grammarVocab: { encodedVocab: raw, vocabType: "raw", prependSpace: false } });
    engines.push(engine);
    engine.addRequest(request("dead", [5, 6], { maxTokens: 5, structuredOutputs: { kind: "grammar", ebnf: 'root ::= "a" "Z"' } }, [2]));
    const { errors } = await runToCompletion(engine);
    expect(errors.get("dead")).toContain("grammar_dead_end");
    expect(engine.kv.usage()).toBe(0);
  });
});

describe("a reasoning-gated grammar (vLLM should_advance / should_fill_bitmask on is_reasoning_end)", () => {
  test("tokens up to the reasoning end token are free; from the next one the output is the grammar's", async () => {
    const spec: GrammarSpec = { kind: "choice", choices: ["yes", "no", "maybe so"] };
    const free = makeEngine();
    free.addRequest(request("free", PROMPT, { maxTokens: 6 }, [...tok.stopIds]));
    const freeTokens = (await runToCompletion(free)).outputs.get("free")!.tokens;
    // the stand-in for `</think>`: the free output's third token (one that does not occur before it)
    const k = 2;
    expect(freeTokens.slice(0, k)).not.toContain(freeTokens[k]!);
    const endId = freeTokens[k]!;
    const thinking = freeTokens.slice(0, k + 1);
    const fromStart = await referenceGreedy(PROMPT, spec, 12);
    expect(fromStart.slice(0, k + 1)).not.toEqual(thinking); // the grammar would not have allowed the free start
    const after = await referenceGreedy([...PROMPT, ...thinking], spec, 12 - thinking.length);
    const engine = makeEngine();
    engine.addRequest(request("gated", PROMPT, { maxTokens: 12, structuredOutputs: { ...spec, reasoningEndTokenIds: [endId] } }, [...tok.stopIds]));
    const { outputs, errors } = await runToCompletion(engine);
    expect(errors.size).toBe(0);
    const out = outputs.get("gated")!.tokens;
    expect(out).toEqual([...thinking, ...after]);
    expect(["yes", "no", "maybe so"]).toContain(tok.decode(out.slice(thinking.length).filter((t) => !tok.stopIds.includes(t))));
  });

  test("never reaching the end token: the grammar never starts (all output is free, as without one)", async () => {
    const free = makeEngine();
    free.addRequest(request("free", PROMPT, { maxTokens: 8 }, [...tok.stopIds]));
    const freeTokens = (await runToCompletion(free)).outputs.get("free")!.tokens;
    const unused = [...Array(V).keys()].find((id) => !freeTokens.includes(id) && !tok.stopIds.includes(id))!;
    const engine = makeEngine();
    engine.addRequest(request("gated", PROMPT, { maxTokens: 8, structuredOutputs: { kind: "regex", pattern: "[0-9]+", reasoningEndTokenIds: [unused] } }, [...tok.stopIds]));
    expect((await runToCompletion(engine)).outputs.get("gated")!.tokens).toEqual(freeTokens);
  });
});

describe("the grammar thread's per-request matcher (the API speculative decoding will use)", () => {
  test("rollBack undoes accepted tokens, sent or not: the masks equal those of the shorter history", async () => {
    const { GrammarThreadClient } = await import("../../src/grammar/grammar-thread.ts");
    const client = new GrammarThreadClient({ vocab, vocabSize: V, cacheSize: 4 }, () => {});
    try {
      const spec: GrammarSpec = { kind: "regex", pattern: "ab(cd|ef)gh" };
      const ids = (s: string) => tok.encode(s, { addSpecial: false, parseSpecial: false });
      for (const id of ["short", "long"]) expect((await client.compile(id, spec, tok.stopIds)).ok).toBe(true);
      for (const t of ids("a")) client.accept("short", t);
      for (const t of ids("a")) client.accept("long", t);
      await client.fill(["short", "long"]);
      // "long" takes b, c, d: two sent with a fill, then rolled back over a sent and an unsent token
      client.accept("long", ids("b")[0]!);
      client.accept("long", ids("c")[0]!);
      await client.fill(["long"]);
      client.accept("long", ids("d")[0]!);
      client.rollBack("long", 2); // drops d (unsent) and c (sent)
      client.accept("short", ids("b")[0]!);
      const both = await client.fill(["short", "long"]);
      const w = both.words;
      expect(Array.from(both.masks.subarray(w, 2 * w))).toEqual(Array.from(both.masks.subarray(0, w)));
      expect(both.status.map((s) => s.kind)).toEqual(["ok", "ok"]);
    } finally {
      client.dispose();
    }
  });
});
