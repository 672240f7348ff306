/**
 * `bun run bench:spec-decode -- [--model F] [--speculative-config JSON] [--output-len N] [--threads T] [--rounds R] [--concurrency C] [--json]`
 * Speculative decoding off vs on, side by side in one run, through the orchestrator and its engine Worker:
 * - copy-heavy: greedy continuations of story prompts (the output repeats spans of the prompt and of itself: small
 *   and random-weight models fall into loops), ignore_eos;
 * - no-match: random prompts, temperature 1 (seeded), so the ngram proposer rarely finds anything to draft;
 * each at 1 and at 8 concurrent requests. Prints decode tokens/s (single stream: (n - 1) / (last token - first
 * token), averaged; 8 concurrent: output tokens / wall time), the on/off ratio, acceptance rate and mean acceptance
 * length (vLLM's formulas over vllm:spec_decode_* deltas), and, where node-llama-cpp is installed, llama.cpp's
 * decode tokens/s on the same single-stream copy-heavy prompts for scale (node-llama-cpp 3.21's InputLookupTokenPredictor
 * is used when it exists; its absence is printed).
 */
import { cpus } from "node:os";
import { createEngineFrontend } from "../src/frontend/engine-frontend.ts";
import { DEFAULT_SAMPLING_PARAMS, type SamplingParams } from "../src/engine/sampling-params.ts";
import type { Orchestrator } from "../src/frontend/orchestrator.ts";
import type { StepStats } from "../src/engine/stats.ts";
import type { StatsListener } from "../src/frontend/iteration-stats.ts";
import { parseSpeculativeConfig, type SpeculativeConfig } from "../src/config/speculative-config.ts";
import type { EngineArgs } from "../src/engine/protocol.ts";
import { nowMs } from "../src/util/clock.ts";

const STORIES = [
  "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her dog, Max.",
  "Tom had a big red ball. He liked to play with it in the park every day with his friends.",
  "One day, a small bird flew into the garden and sat on the tree. The bird was sad because it lost its mom.",
  "Sue and Ben were best friends. They liked to build towers with blocks.",
  "It was a sunny day. The sun was shining and the birds were singing.",
  "The old man had a little boat. Every morning he went to the sea to catch fish.",
  "Anna wanted to bake a cake for her mom. She got the flour, the eggs and the milk.",
  "A big dog lived next to the school. The children loved him and gave him bones.",
];

interface Args { model: string | null; spec: SpeculativeConfig; outputLen: number; threads: number; json: boolean; rounds: number; concurrency: number[] }

function parseArgs(argv: string[]): Args {
  let specText = '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}';
  const a = { model: null as string | null, outputLen: 128, threads: Math.min(2, cpus().length), json: false, rounds: 3, concurrency: [1, 8] };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    if (flag === "--model") a.model = argv[++i] ?? null;
    else if (flag === "--speculative-config") specText = argv[++i] ?? "";
    else if (flag === "--output-len") a.outputLen = Number(argv[++i]);
    else if (flag === "--threads") a.threads = Number(argv[++i]);
    else if (flag === "--json") a.json = true;
    else if (flag === "--rounds") a.rounds = Number(argv[++i]);
    else if (flag === "--concurrency") a.concurrency = [Number(argv[++i])];
    else throw new Error(`unknown flag ${flag}`);
  }
  const spec = parseSpeculativeConfig(specText);
  if (!spec.ok) throw new Error(spec.error);
  return { ...a, spec: spec.value };
}

class SpecTotals implements StatsListener {
  drafts = 0; draftTokens = 0; accepted = 0; generation = 0;
  onStep(s: StepStats): void {
    this.generation += s.numGenerationTokens;
    if (!s.specDecoding) return;
    this.drafts += s.specDecoding.numDrafts; this.draftTokens += s.specDecoding.numDraftTokens; this.accepted += s.specDecoding.numAcceptedTokens;
  }
  onRequestFinished(): void {}
}

interface RunResult { decodeTokS: number; outputTokS: number; outputs: number[][] }

async function runOne(orch: Orchestrator, id: string, prompt: number[], sampling: SamplingParams): Promise<{ ids: number[]; firstMs: number; lastMs: number }> {
  const ids: number[] = [];
  let firstMs = 0, lastMs = 0;
  // the engine's own first / last token times: the main thread may take several steps' outputs at once
  for await (const out of orch.generate({ requestId: id, promptTokenIds: prompt, sampling, arrivalMs: nowMs() })) {
    for (const c of out.outputs) ids.push(...c.tokenIdsDelta);
    firstMs = out.times.firstTokenMs ?? firstMs;
    lastMs = out.times.lastTokenMs ?? lastMs;
  }
  return { ids, firstMs, lastMs };
}

async function measure(orch: Orchestrator, _totals: SpecTotals, prompts: number[][], sampling: SamplingParams, concurrency: number, tag: string): Promise<RunResult> {
  const t0 = nowMs();
  const results: { ids: number[]; firstMs: number; lastMs: number }[] = [];
  if (concurrency === 1) for (let i = 0; i < prompts.length; i++) results.push(await runOne(orch, `${tag}${i}`, prompts[i]!, sampling));
  else results.push(...await Promise.all(prompts.map((p, i) => runOne(orch, `${tag}${i}`, p, sampling))));
  const wallS = (nowMs() - t0) / 1000;
  const numOut = results.reduce((a, r) => a + r.ids.length, 0);
  const decode = results.map((r) => (r.ids.length - 1) / ((r.lastMs - r.firstMs) / 1000));
  return { decodeTokS: decode.reduce((a, b) => a + b, 0) / decode.length, outputTokS: numOut / wallS, outputs: results.map((r) => r.ids) };
}

/** llama.cpp through node-llama-cpp on the same file and threads: plain greedy, and with its prompt-lookup predictor */
async function llamaCpp(modelPath: string, threads: number, spec: SpeculativeConfig) {
  const { getLlama, LlamaLogLevel, InputLookupTokenPredictor } = await import("node-llama-cpp");
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath });
  const context = await model.createContext({ contextSize: 1024, sequences: 2, threads });
  const plain = context.getSequence();
  // its prompt-lookup predictor is the ngram method; other methods have no llama.cpp counterpart here (its window
  // would be 0..0: node-llama-cpp never returned)
  const lookup = spec.method !== "ngram" ? null : context.getSequence({
    tokenPredictor: new InputLookupTokenPredictor({ patternLength: { min: Math.max(1, spec.promptLookupMin), max: spec.promptLookupMax }, predictionLength: { max: spec.numSpeculativeTokens } }),
  });
  const decode = async (seq: typeof plain, prompt: number[], n: number): Promise<number> => {
    await seq.clearHistory();
    let first = 0, count = 0;
    for await (const _t of seq.evaluate(prompt as never, { temperature: 0 })) {
      if (count === 0) first = performance.now();
      if (++count === n) break;
    }
    return (n - 1) / ((performance.now() - first) / 1000);
  };
  return { decode, plain, lookup, dispose: async () => { await context.dispose(); await model.dispose(); } };
}

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const rounds = args.rounds;
  const engineArgs: EngineArgs = {
    maxNumSeqs: 16, maxNumBatchedTokens: 512, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: null, enablePrefixCaching: false,
    threads: args.threads, device: "cpu",
  };
  const totals = new SpecTotals();
  const off = await createEngineFrontend({ modelPath: args.model, engineArgs, listeners: [] });
  const on = await createEngineFrontend({ modelPath: args.model, engineArgs: { ...engineArgs, speculativeConfig: args.spec }, listeners: [totals] });
  const tok = off.tokenizer;
  const vocab = off.modelConfig.vocabSize;
  const copyPrompts = STORIES.map((s) => tok.encode(s, { addSpecial: true, parseSpecial: false }));
  let seed = 12345;
  const rand = (): number => { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return seed >>> 8; };
  const randomPrompts = STORIES.map(() => Array.from({ length: 48 }, () => 10 + (rand() % (vocab - 10))));
  const greedy: SamplingParams = { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, maxTokens: args.outputLen, ignoreEos: true };
  const random: SamplingParams = { ...DEFAULT_SAMPLING_PARAMS, temperature: 1, seed: 7, maxTokens: args.outputLen, ignoreEos: true };
  let lcpp: Awaited<ReturnType<typeof llamaCpp>> | null = null;
  try {
    lcpp = await llamaCpp(args.model ?? new URL("../build/default-model.gguf", import.meta.url).pathname, args.threads, args.spec);
  } catch (e) {
    console.error(`llama.cpp not available: ${e instanceof Error ? e.message : String(e)}`);
  }
  // warm both engines (kernels, first-request costs)
  await measure(off, totals, copyPrompts.slice(0, 1), greedy, 1, "warm-off");
  await measure(on, totals, copyPrompts.slice(0, 1), greedy, 1, "warm-on");
  const rows: Record<string, unknown>[] = [];
  for (const [workload, prompts, sampling] of [["copy-heavy", copyPrompts, greedy], ["no-match", randomPrompts, random]] as const) {
    for (const concurrency of args.concurrency) {
      const ps = concurrency === 1 ? prompts.slice(0, 3) : prompts;
      const offRuns: number[] = [], onRuns: number[] = [], lcppPlain: number[] = [], lcppLookup: number[] = [];
      let same: boolean | null = null;
      const before = { ...totals };
      // alternating rounds, best of each (the machine is shared: the best round is the least disturbed)
      for (let r = 0; r < rounds; r++) {
        const a = await measure(off, totals, ps, sampling, concurrency, `${workload}-off-${concurrency}-${r}-`);
        const b = await measure(on, totals, ps, sampling, concurrency, `${workload}-on-${concurrency}-${r}-`);
        offRuns.push(concurrency === 1 ? a.decodeTokS : a.outputTokS);
        onRuns.push(concurrency === 1 ? b.decodeTokS : b.outputTokS);
        if (sampling.temperature === 0) same = (same ?? true) && JSON.stringify(a.outputs) === JSON.stringify(b.outputs);
        if (lcpp && concurrency === 1 && workload === "copy-heavy") {
          const l = lcpp;
          const over = async (seq: typeof l.plain): Promise<number> => { const xs: number[] = []; for (const p of ps) xs.push(await l.decode(seq, p, args.outputLen)); return mean(xs); };
          lcppPlain.push(await over(l.plain));
          if (l.lookup) lcppLookup.push(await over(l.lookup));
        }
      }
      const drafts = totals.drafts - before.drafts, draftTokens = totals.draftTokens - before.draftTokens, accepted = totals.accepted - before.accepted;
      const offV = Math.max(...offRuns), onV = Math.max(...onRuns);
      rows.push({
        workload, concurrency, metric: concurrency === 1 ? "decode tok/s" : "output tok/s", off: offV, on: onV, ratio: onV / offV,
        acceptance_rate: draftTokens > 0 ? accepted / draftTokens : null, mean_acceptance_length: drafts > 0 ? 1 + accepted / drafts : null, greedy_identical: same,
        ...(lcppPlain.length > 0 ? { llama_cpp: Math.max(...lcppPlain), llama_cpp_lookup: lcppLookup.length > 0 ? Math.max(...lcppLookup) : null } : {}),
      });
      console.error(`done: ${JSON.stringify(rows.at(-1))}`);
    }
  }
  await off.shutdown();
  await on.shutdown();
  await lcpp?.dispose();
  if (args.json) { console.log(JSON.stringify({ model: args.model ?? "stories260K", threads: args.threads, speculative_config: args.spec, rows })); return; }
  console.log(`model ${args.model ?? "stories260K (embedded)"}, ${args.threads} threads, output ${args.outputLen} tokens, best of ${rounds} alternating rounds, ${JSON.stringify(args.spec)}`);
  console.log("workload      conc  metric          off       on   on/off  accept  mean len  greedy same  llama.cpp  +lookup");
  for (const r of rows) {
    const f = (v: unknown, d = 1): string => (typeof v === "number" ? v.toFixed(d) : "-");
    console.log(`${String(r.workload).padEnd(13)} ${String(r.concurrency).padStart(4)}  ${String(r.metric).padEnd(12)} ${f(r.off).padStart(8)} ${f(r.on).padStart(8)} ${f(r.ratio, 2).padStart(7)}x ${f(r.acceptance_rate, 2).padStart(6)} ${f(r.mean_acceptance_length, 2).padStart(9)}  ${String(r.greedy_identical ?? "-").padEnd(11)} ${f(r.llama_cpp).padStart(9)} ${f(r.llama_cpp_lookup).padStart(8)}`);
  }
}

await main();
