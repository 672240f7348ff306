/**
 * `bun run bench/experiments/serving-path.ts -- [--model F] [--threads T] [--input-len N] [--output-len N] [--rounds R]`
 * Where a token's time goes at concurrency 1, engine step to SSE write: one request at a time (random prompt ids,
 * ignore_eos, the server's default sampling), each whole request timed (prefill included), driven three ways in one process, alternating: the orchestrator
 * directly, the HTTP app in-process (app.handle: routing, detokenize, chunk JSON, metrics recorder, SSE encoding), and
 * a real socket (the node:http listener in front of the app). Per decode token it prints, from the step records'
 * engine clock: the engine's step span (schedule + forward, stepEndMs - stepStartMs), the worker's time between two
 * steps (sample, update, post, yield: next stepStartMs - stepEndMs) and the message's delivery (main-thread receipt -
 * stepEndMs); and what each way adds per token over the orchestrator alone. Question: does the serving path cost more than the
 * kernels at concurrency 1?
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
const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s.length === 0 ? NaN : s[s.length >> 1]!; };

const parsed = parseCommandArgs("serve", ["--threads", threads, "--max-num-seqs", "1", ...(model ? ["--model", model] : [])]);
if (!parsed.ok) throw new Error(parsed.error);
const { config, chain } = readServeConfig(parsed.value);
const steps = new StepLog();
const gate = makeDeprecationGate(pkg.version, null);
if (!gate.ok) throw new Error(gate.error);
const { orchestrator } = await createServingPipeline({ model: config.model, engineArgs: config.engine, chain, listener: { onStep: (s) => { steps.onStep(s); recorder.onStep(s); }, onRequestFinished: (f) => { steps.onRequestFinished(f); recorder.onRequestFinished(f); } }, tables: null });
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
