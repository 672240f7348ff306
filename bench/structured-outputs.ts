/**
 * `npx bun bench/structured-outputs.ts -- --model F [--output-len 64] [--rounds 2]`: the grammar's cost per generated
 * token, side by side in one run: output tokens/s of the same requests with and without a JSON schema, at 1 and at 8
 * concurrent requests, alternating (plain, schema, plain, schema ...) so machine noise hits both alike. The schema run
 * keeps every request inside one long string field, so both runs generate exactly output-len tokens. Also the grammar
 * thread's compile time of a new and of a cached schema (the first request pays the tokenizer info too).
 * Requests go through the orchestrator and its engine Worker (grammar thread included), temperature 1, seeded.
 */
import { cpus } from "node:os";
import { createEngineFrontend } from "../src/frontend/engine-frontend.ts";
import type { Orchestrator } from "../src/frontend/orchestrator.ts";
import { DEFAULT_SAMPLING_PARAMS, type SamplingParams } from "../src/engine/sampling-params.ts";
import type { GrammarSpec } from "../src/grammar/grammar-spec.ts";
import { GrammarThreadClient } from "../src/grammar/grammar-thread.ts";
import { nowMs } from "../src/util/clock.ts";
import { applyTokenBitmask } from "../src/engine/sampler.ts";

const argv = process.argv.slice(2).filter((a) => a !== "--");
const flag = (name: string, fallback: string | null): string | null => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1]! : fallback;
};
const model = flag("model", null);
const outputLen = Number(flag("output-len", "64"));
const rounds = Number(flag("rounds", "2"));

const SCHEMA: GrammarSpec = { kind: "json", schema: JSON.stringify({ type: "object", properties: { story: { type: "string" } }, required: ["story"] }), anyWhitespace: false };

async function run(orch: Orchestrator, concurrency: number, grammar: boolean, round: number): Promise<number> {
  const prompt = orch.tokenizer.encode("Once upon a time there was a", { addSpecial: true, parseSpecial: false });
  const sampling: SamplingParams = { ...DEFAULT_SAMPLING_PARAMS, temperature: 1, maxTokens: outputLen, ignoreEos: true, structuredOutputs: grammar ? SCHEMA : null };
  const t0 = nowMs();
  let tokens = 0;
  await Promise.all(Array.from({ length: concurrency }, async (_, i) => {
    const request = { requestId: `b${round}-${concurrency}-${grammar ? "g" : "p"}-${i}`, promptTokenIds: prompt, sampling: { ...sampling, seed: i }, arrivalMs: nowMs() };
    for await (const out of orch.generate(request)) for (const c of out.outputs) tokens += c.tokenIdsDelta.length;
  }));
  return tokens / ((nowMs() - t0) / 1000);
}

const orch = await createEngineFrontend({
  modelPath: model,
  engineArgs: { maxNumSeqs: 16, maxNumBatchedTokens: 512, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: null, enablePrefixCaching: true, threads: cpus().length, device: "cpu" },
});
try {
  // warm: kernels, the grammar thread's tokenizer info and the schema's compile
  await run(orch, 1, true, -1);
  await run(orch, 1, false, -1);
  const rows: string[] = [];
  for (const concurrency of [1, 8]) {
    const plain: number[] = [];
    const withSchema: number[] = [];
    for (let r = 0; r < rounds; r++) {
      plain.push(await run(orch, concurrency, false, r));
      withSchema.push(await run(orch, concurrency, true, r));
    }
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    rows.push(`| ${concurrency} | ${mean(plain).toFixed(1)} | ${mean(withSchema).toFixed(1)} | ${(mean(withSchema) / mean(plain)).toFixed(3)} |`);
  }
  // compile times on a grammar thread of its own (same vocabulary, same code path as the engine's)
  const vocab = orch.tokenizer.grammarVocabulary!();
  const thread = new GrammarThreadClient({ vocab, vocabSize: orch.modelConfig.vocabSize, cacheSize: 8 }, () => {});
  const t0 = nowMs();
  const first = await thread.compile("c0", SCHEMA, orch.tokenizer.stopIds);
  const firstWallMs = nowMs() - t0;
  const fresh = await thread.compile("c1", { kind: "json", schema: JSON.stringify({ type: "object", properties: { n: { type: "integer" } } }), anyWhitespace: true }, orch.tokenizer.stopIds);
  const cached = await thread.compile("c2", SCHEMA, orch.tokenizer.stopIds);
  // the grammar's own CPU per generated token, free of machine noise: 8 matchers inside the schema's string, each
  // fill accepts one token per row and writes 8 masks (the grammar thread's work), then the sampler's masking of a row
  const ids = Array.from({ length: 8 }, (_, i) => `f${i}`);
  await Promise.all(ids.map((id) => thread.compile(id, SCHEMA, orch.tokenizer.stopIds)));
  const prefix = orch.tokenizer.encode('{"story": "', { addSpecial: false, parseSpecial: false });
  for (const id of ids) for (const t of prefix) thread.accept(id, t);
  let mask = (await thread.fill(ids)).masks;
  const letter = orch.tokenizer.encode("a", { addSpecial: false, parseSpecial: false })[0]!;
  const numFills = 50;
  const tFill = nowMs();
  for (let k = 0; k < numFills; k++) {
    for (const id of ids) thread.accept(id, letter);
    mask = (await thread.fill(ids)).masks;
  }
  const fillMsPerToken = (nowMs() - tFill) / numFills / ids.length;
  const row = new Float32Array(orch.modelConfig.vocabSize).fill(1);
  const words = Math.ceil(row.length / 32);
  const tApply = nowMs();
  for (let k = 0; k < 200; k++) applyTokenBitmask(row, mask.subarray(0, words));
  const applyMsPerToken = (nowMs() - tApply) / 200;
  thread.dispose();
  const ms = (r: typeof first): string => (r.ok ? `${r.compileMs.toFixed(2)} ms${r.cached ? " (cached)" : ""}` : r.message);
  console.log(`model ${model ?? "default"}, ${outputLen} output tokens per request, ${rounds} alternating rounds, ${cpus().length} threads`);
  console.log("| concurrent requests | output tok/s, no grammar | output tok/s, JSON schema | ratio |\n| --- | --- | --- | --- |");
  for (const r of rows) console.log(r);
  console.log(`grammar CPU per generated token: ${fillMsPerToken.toFixed(3)} ms on the grammar thread (accept + bitmask, 8 rows per fill, round trip included; overlaps the forward pass) + ${applyMsPerToken.toFixed(3)} ms masking the logits row in the sampler`);
  console.log(`grammar thread: first request ${firstWallMs.toFixed(0)} ms wall (tokenizer info ${thread.tokenizerInfoMs?.toFixed(0)} ms + compile ${ms(first)}); a new schema ${ms(fresh)}; the cached schema ${ms(cached)}`);
} finally {
  await orch.shutdown();
}
