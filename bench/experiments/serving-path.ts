/**
 * `bun run bench/experiments/serving-path.ts -- [--model F] [--threads T] [--input-len N] [--output-len N] [--rounds R]
 *   [--concurrency N] [--max-num-batched-tokens N]`
 * Where a token's time goes at concurrency 1, engine step to SSE write: one request at a time (random prompt ids,
 * ignore_eos, the server's default sampling), each whole request timed (prefill included), driven three ways in one process, alternating: the orchestrator
 * directly, the HTTP app in-process (app.handle: routing, detokenize, chunk JSON, metrics recorder, SSE encoding), and
 * a real socket (the node:http listener in front of the app). Per decode token it prints, from the step records'
 * engine clock: the engine's step span (schedule + forward, stepEndMs - stepStartMs), the worker's time between two
 * steps (sample, update, post, yield: next stepStartMs - stepEndMs) and the message's delivery (main-thread receipt -
 * stepEndMs); and what each way adds per token over the orchestrator alone. Question: does the serving path cost more than the
 * kernels at concurrency 1?
 * With `--concurrency N` (N > 1) it runs 2N requests N at a time, the orchestrator directly and then over a real socket,
 * alternating rounds, and splits the engine's time by step kind (prefill only, prefill with decode rows, decode only):
 * steps, span per step, tokens per step and share of the wall time, plus the worker's gaps between steps. Question:
 * at concurrency 8 or 32, which steps take the time, and what does the serving path add?
 */
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { readServeConfig } from "../../src/commands/serve.ts";
import { makeDeprecationGate } from "../../src/metrics/deprecation.ts";
import { MetricsRecorder } from "../../src/metrics/recorder.ts";
import { createServingPipeline } from "../../src/pipeline/serving-pipeline.ts";
import { createApp } from "../../src/server/app.ts";
import { listenHttp } from "../../src/server/http-listener.ts";
import { metricsRoute } from "../../src/server/metrics-route.ts";
import { DEFAULT_MAX_BODY_BYTES } from "../../src/server/server-options.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../../src/engine/sampling-params.ts";
import type { FinishedRequestStats, IterationStats, StatsListener } from "../../src/frontend/iteration-stats.ts";
import { nowMs } from "../../src/util/clock.ts";
import pkg from "../../package.json" with { type: "json" };

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? fallback : process.argv[i + 1]!;
}
const model = arg("model", ""), threads = arg("threads", "2");
const inputLen = Number(arg("input-len", "256")), outputLen = Number(arg("output-len", "64")), rounds = Number(arg("rounds", "3"));
const concurrency = Number(arg("concurrency", "1"));

/** per decode step: engine span, worker gap before the next step, delivery to the main thread (ms) */
class StepLog implements StatsListener {
  span: number[] = []; gap: number[] = []; delivery: number[] = [];
  private lastEnd: number | null = null;
  onStep(s: IterationStats): void {
    const now = nowMs();
    if (s.numPromptTokens === 0 && s.numGenerationTokens > 0) {
      this.span.push(s.stepEndMs - s.stepStartMs);
      if (this.lastEnd !== null) this.gap.push(s.stepStartMs - this.lastEnd);
      this.delivery.push(now - s.stepEndMs);
    }
    this.lastEnd = s.stepEndMs;
  }
  onRequestFinished(_: FinishedRequestStats): void { this.lastEnd = null; }
  target: StatsListener | null = null;
}

/** per step kind: steps, summed span, prompt and output tokens (concurrency > 1) */
class StepKinds implements StatsListener {
  kinds = new Map<string, { steps: number; spanMs: number; prompt: number; output: number; rows: number }>();
  gapMs = 0;
  private lastEnd: number | null = null;
  onStep(s: IterationStats): void {
    if (s.batchSize === 0) return;
    const kind = s.numPromptTokens === 0 ? "decode only" : s.numGenerationTokens > 1 ? "prefill + decode" : "prefill only";
    const k = this.kinds.get(kind) ?? { steps: 0, spanMs: 0, prompt: 0, output: 0, rows: 0 };
    k.steps++; k.spanMs += s.stepEndMs - s.stepStartMs; k.prompt += s.numPromptTokens; k.output += s.numGenerationTokens; k.rows += s.batchSize;
    this.kinds.set(kind, k);
    if (this.lastEnd !== null && s.stepStartMs - this.lastEnd < 1000) this.gapMs += s.stepStartMs - this.lastEnd;
    this.lastEnd = s.stepEndMs;
  }
  onRequestFinished(_: FinishedRequestStats): void {}
  reset(): void { this.kinds.clear(); this.gapMs = 0; this.lastEnd = null; }
}
const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s.length === 0 ? NaN : s[s.length >> 1]!; };

const parsed = parseCommandArgs("serve", ["--threads", threads, "--max-num-seqs", String(concurrency), ...(arg("max-num-batched-tokens", "") === "" ? [] : ["--max-num-batched-tokens", arg("max-num-batched-tokens", "")]), ...(model ? ["--model", model] : [])]);
if (!parsed.ok) throw new Error(parsed.error);
const { config, chain } = readServeConfig(parsed.value);
const steps = new StepLog();
const kinds = new StepKinds();
const gate = makeDeprecationGate(pkg.version, null);
if (!gate.ok) throw new Error(gate.error);
const { orchestrator } = await createServingPipeline({ model: config.model, engineArgs: config.engine, chain, listener: { onStep: (s) => { steps.onStep(s); kinds.onStep(s); recorder.onStep(s); }, onRequestFinished: (f) => { steps.onRequestFinished(f); recorder.onRequestFinished(f); } }, tables: null });
const recorder = new MetricsRecorder({ modelName: orchestrator.modelConfig.name, maxModelLen: orchestrator.maxModelLen, engineIndices: [0], logStats: true, enableMfuMetrics: false, deprecation: gate.value });
const app = createApp({
  orchestrator, servedModelName: "m", modelPath: "bench", apiKey: null, enablePerRequestMetrics: false, forceIncludeUsage: false,
  maxBodyBytes: DEFAULT_MAX_BODY_BYTES, shutdownSignal: new AbortController().signal, log: () => {}, metricsRoute: metricsRoute(recorder),
});
const http = await listenHttp((r) => app.handle(r), { hostname: "127.0.0.1", port: 0, idleTimeoutS: 60, log: () => {} });
const vocab = orchestrator.modelConfig.vocabSize;
let seed = 1;
const promptIds = (): number[] => Array.from({ length: inputLen }, () => (seed = (seed * 48271) % 2147483647) % (vocab - 300) + 100);

async function direct(): Promise<number> {
  const t = nowMs();
  let tokens = 0;
  for await (const out of orchestrator.generate({ requestId: `d${seed}`, promptTokenIds: promptIds(), sampling: { ...DEFAULT_SAMPLING_PARAMS, maxTokens: outputLen, ignoreEos: true }, arrivalMs: t })) {
    tokens += out.outputs[0]?.tokenIdsDelta.length ?? 0;
  }
  if (tokens !== outputLen) throw new Error(`direct: ${tokens} tokens`);
  return nowMs() - t;
}
async function viaHttp(base: string | null): Promise<number> {
  const body = JSON.stringify({ model: "m", prompt: promptIds(), max_tokens: outputLen, ignore_eos: true, stream: true });
  const t = nowMs();
  const init = { method: "POST", headers: { "content-type": "application/json" }, body };
  const res = base === null ? await app.handle(new Request("http://127.0.0.1:8000/v1/completions", init)) : await fetch(`${base}/v1/completions`, init);
  const text = await res.text();
  if (!text.endsWith("data: [DONE]\n\n")) throw new Error(`${base ?? "app.handle"}: the stream did not end with [DONE]: ${text.slice(0, 300)}`);
  return nowMs() - t;
}

/** 2N requests, N at a time, by `run`; the wall time in ms */
async function concurrent(run: () => Promise<number>): Promise<number> {
  const t = nowMs();
  let left = 2 * concurrency;
  await Promise.all(Array.from({ length: concurrency }, async () => { while (left-- > 0) await run(); }));
  return nowMs() - t;
}

if (concurrency > 1) {
  await direct(); // warm-up
  const walls: Record<string, number[]> = { direct: [], socket: [] };
  const total: Record<string, StepKinds["kinds"]> = { direct: new Map(), socket: new Map() };
  for (let r = 0; r < rounds; r++) {
    for (const [name, run] of [["direct", direct], ["socket", () => viaHttp(`http://127.0.0.1:${http.port}`)]] as const) {
      kinds.reset();
      walls[name]!.push(await concurrent(run));
      console.log(`round ${r} ${name}: ${walls[name]!.at(-1)!.toFixed(0)} ms wall, gaps ${kinds.gapMs.toFixed(0)} ms; ${[...kinds.kinds].map(([k, v]) => `${k}: ${v.steps} steps x ${(v.spanMs / v.steps).toFixed(1)} ms (${(v.prompt / v.steps).toFixed(0)} prompt + ${(v.output / v.steps).toFixed(1)} out tok/step)`).join("; ")}`);
      for (const [k, v] of kinds.kinds) {
        const t = total[name]!.get(k) ?? { steps: 0, spanMs: 0, prompt: 0, output: 0, rows: 0 };
        total[name]!.set(k, { steps: t.steps + v.steps, spanMs: t.spanMs + v.spanMs, prompt: t.prompt + v.prompt, output: t.output + v.output, rows: t.rows + v.rows });
      }
    }
  }
  console.log(`concurrency ${concurrency}, ${2 * concurrency} requests a round, ${inputLen} in / ${outputLen} out, ${threads} threads, ${rounds} rounds`);
  for (const name of ["direct", "socket"]) {
    const wall = walls[name]!.reduce((a, b) => a + b, 0);
    console.log(`${name}: median ${median(walls[name]!).toFixed(0)} ms a round (${(2 * concurrency * outputLen * 1000 / median(walls[name]!)).toFixed(1)} output tok/s)`);
    for (const [k, v] of total[name]!) console.log(`  ${k.padEnd(16)} ${(100 * v.spanMs / wall).toFixed(0)}% of wall: ${(v.spanMs / v.steps).toFixed(1)} ms a step, ${(v.prompt / v.steps).toFixed(0)} prompt + ${(v.output / v.steps).toFixed(1)} output tokens a step`);
  }
  http.closeAll();
  await orchestrator.shutdown();
  process.exit(0);
}

const ways: Record<string, () => Promise<number>> = { direct, "app.handle": () => viaHttp(null), socket: () => viaHttp(`http://127.0.0.1:${http.port}`) };
const perWay: Record<string, number[]> = { direct: [], "app.handle": [], socket: [] };
await direct(); // warm-up
steps.span = []; steps.gap = []; steps.delivery = [];
for (let r = 0; r < rounds; r++) for (const [name, run] of Object.entries(ways)) perWay[name]!.push(await run());
console.log(`concurrency 1, ${inputLen} in / ${outputLen} out, ${threads} threads, ${rounds} rounds; medians in ms per decode token`);
console.log(`engine step span ${median(steps.span).toFixed(2)}, worker gap between steps ${median(steps.gap).toFixed(3)}, delivery to main ${median(steps.delivery).toFixed(3)}`);
for (const [name, xs] of Object.entries(perWay)) console.log(`${name.padEnd(11)} ${median(xs).toFixed(0)} ms per request wall (${(outputLen * 1000 / median(xs)).toFixed(1)} output tok/s), ${((median(xs) - median(perWay.direct!)) / outputLen).toFixed(2)} ms per token over direct`);
http.closeAll();
await orchestrator.shutdown();
process.exit(0);
