/**
 * `bun run bench/experiments/stats-overhead.ts [--rounds R] [--requests N] [--max-tokens T] [--concurrency C] [--model F]`
 * The cost of observability: output tokens/s of the serving stack (HTTP app via app.handle -> orchestrator -> engine
 * Worker, /metrics recorder on in both) without and with `--log-stats --enable-per-request-metrics` (the pipeline
 * wrapper, the omni tables rendered and written after every request, the per-request `metrics` object). Rounds
 * alternate plain / observed so drift on a shared machine hits both (median of per-round ratios, and best-of). Then the
 * observability work alone: the same app over a zero-cost engine, its extra CPU time per token set against the real
 * engine's. Target: observed throughput within 3% of plain.
 */
import { closeSync, openSync, writeSync } from "node:fs";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { readServeConfig } from "../../src/commands/serve.ts";
import { makeDeprecationGate } from "../../src/metrics/deprecation.ts";
import { onlineTables } from "../../src/metrics/omni-stats-logger.ts";
import { MetricsRecorder } from "../../src/metrics/recorder.ts";
import { createServingPipeline } from "../../src/pipeline/serving-pipeline.ts";
import { createApp } from "../../src/server/app.ts";
import { metricsRoute } from "../../src/server/metrics-route.ts";
import { DEFAULT_MAX_BODY_BYTES } from "../../src/server/server-options.ts";
import type { FinishedRequestStats, IterationStats as StepStats, StatsListener } from "../../src/frontend/iteration-stats.ts";
import type { GenerateRequest, Orchestrator, RequestOutput } from "../../src/frontend/orchestrator.ts";
import { nowMs } from "../../src/util/clock.ts";

/** what serve hands the pipeline builder: the command line's model, engine arguments and stage chain */
function servingInputs(options: Parameters<typeof readServeConfig>[0]) {
  const { config, chain } = readServeConfig(options);
  return { model: config.model, engineArgs: config.engine, chain };
}
import pkg from "../../package.json" with { type: "json" };

interface Args { rounds: number; requests: number; maxTokens: number; concurrency: number; model: string | null; threads: number; aa: boolean }

function parseArgs(argv: string[]): Args {
  const a: Args = { rounds: 6, requests: 16, maxTokens: 64, concurrency: 8, model: null, threads: 1, aa: false };
  for (let i = 0; i < argv.length; i++) {
    // --aa: both sides plain (an A/A run shows how far two identical engines drift apart on this machine)
    if (argv[i] === "--aa") { a.aa = true; continue; }
    const v = argv[++i];
    const n = Number(v);
    switch (argv[i - 1]) {
      case "--rounds": a.rounds = n; break;
      case "--requests": a.requests = n; break;
      case "--max-tokens": a.maxTokens = n; break;
      case "--concurrency": a.concurrency = n; break;
      case "--threads": a.threads = n; break;
      case "--model": a.model = v ?? null; break;
      default: throw new Error(`unknown flag ${argv[i - 1]}`);
    }
  }
  return a;
}

class Forward implements StatsListener {
  target: StatsListener | null = null;
  onStep(s: StepStats): void { this.target?.onStep(s); }
  onRequestFinished(f: FinishedRequestStats): void { this.target?.onRequestFinished(f); }
}

async function setUp(args: Args, observed: boolean, devNull: number) {
  const flags = ["--threads", String(args.threads), "--max-num-seqs", String(args.concurrency), ...(args.model ? ["--model", args.model] : []), ...(observed ? ["--log-stats", "--enable-per-request-metrics"] : [])];
  const parsed = parseCommandArgs("serve", flags);
  if (!parsed.ok) throw new Error(parsed.error);
  const gate = makeDeprecationGate(pkg.version, null);
  if (!gate.ok) throw new Error(gate.error);
  const forward = new Forward();
  const { orchestrator, numStages } = await createServingPipeline({
    ...servingInputs(parsed.value), listener: forward,
    // the tables really are rendered and written (to /dev/null, so the terminal's speed does not count)
    tables: observed ? (n) => onlineTables(n, (t) => void writeSync(devNull, t)) : null,
  });
  const recorder = new MetricsRecorder({ modelName: orchestrator.modelConfig.name, maxModelLen: orchestrator.maxModelLen, engineIndices: [...Array(numStages).keys()], logStats: true, enableMfuMetrics: false, deprecation: gate.value });
  forward.target = recorder;
  const app = createApp({
    orchestrator, servedModelName: orchestrator.modelConfig.name, modelPath: "bench", apiKey: null, enablePerRequestMetrics: observed,
    forceIncludeUsage: false, maxBodyBytes: DEFAULT_MAX_BODY_BYTES, shutdownSignal: new AbortController().signal, log: () => {}, metricsRoute: metricsRoute(recorder),
  });
  return { orchestrator, app };
}

interface Measured { tokensPerS: number; cpuUsPerToken: number }

/** Output tokens per second of `requests` completions, `concurrency` at a time, and process CPU time per token
 * (main thread + engine Worker: the better figure on a shared, oversubscribed machine, where wall time is noise). */
async function measure(app: ReturnType<typeof createApp>, args: Args, round: number): Promise<Measured> {
  let next = 0;
  let tokens = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const worker = async () => {
    while (next < args.requests) {
      const k = next++;
      const res = await app.handle(new Request("http://127.0.0.1/v1/completions", {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt: `Once upon a time ${round} ${k}`, max_tokens: args.maxTokens, temperature: 0, ignore_eos: true }),
      }));
      const body = (await res.json()) as { usage: { completion_tokens: number } };
      tokens += body.usage.completion_tokens;
    }
  };
  await Promise.all(Array.from({ length: args.concurrency }, worker));
  const wallS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { tokensPerS: tokens / wallS, cpuUsPerToken: (cpu.user + cpu.system) / tokens };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const args = parseArgs(process.argv.slice(2));
const devNull = openSync("/dev/null", "w");
const plain = await setUp(args, false, devNull);
const observed = await setUp(args, !args.aa, devNull);
await measure(plain.app, { ...args, requests: args.concurrency }, -1); // warm-up
await measure(observed.app, { ...args, requests: args.concurrency }, -1);
const ratios: number[] = [];
const cpuRatios: number[] = [];
const plainTps: number[] = [];
const observedTps: number[] = [];
const plainCpu: number[] = [];
const observedCpu: number[] = [];
for (let r = 0; r < args.rounds; r++) {
  // alternate the order so neither side always runs second
  const [a, b] = r % 2 === 0 ? [plain, observed] : [observed, plain];
  const ma = await measure(a.app, args, r);
  const mb = await measure(b.app, args, r);
  const [mp, mo] = r % 2 === 0 ? [ma, mb] : [mb, ma];
  plainTps.push(mp.tokensPerS);
  observedTps.push(mo.tokensPerS);
  plainCpu.push(mp.cpuUsPerToken);
  observedCpu.push(mo.cpuUsPerToken);
  ratios.push(mo.tokensPerS / mp.tokensPerS);
  cpuRatios.push(mo.cpuUsPerToken / mp.cpuUsPerToken);
  console.log(`round ${r}: plain ${mp.tokensPerS.toFixed(1)} tok/s ${mp.cpuUsPerToken.toFixed(1)} cpu-us/tok, observed ${mo.tokensPerS.toFixed(1)} tok/s ${mo.cpuUsPerToken.toFixed(1)} cpu-us/tok`);
}
const overheadPct = (1 - median(ratios)) * 100;
const cpuOverheadPct = (median(cpuRatios) - 1) * 100;
console.log(`wall: plain ${median(plainTps).toFixed(1)} tok/s, observed ${median(observedTps).toFixed(1)} tok/s, throughput overhead ${overheadPct.toFixed(2)}% (median of ${args.rounds} paired rounds)`);
console.log(`cpu: extra CPU time per output token ${cpuOverheadPct.toFixed(2)}% (median of per-round ratios; target < 3%) ${Math.abs(cpuOverheadPct) < 3 ? "OK" : "OVER"}`);
// best-of: on an oversubscribed machine the least-disturbed round of each side is the closest to its true cost
const max = (xs: number[]) => xs.reduce((a, b) => Math.max(a, b));
const min = (xs: number[]) => xs.reduce((a, b) => Math.min(a, b));
const bestWallPct = (1 - max(observedTps) / max(plainTps)) * 100;
const bestCpuPct = (min(observedCpu) / min(plainCpu) - 1) * 100;
console.log(`best-of ${args.rounds}: throughput overhead ${bestWallPct.toFixed(2)}%, CPU-per-token overhead ${bestCpuPct.toFixed(2)}%`);
// Isolated: the same app and observability code over an engine that costs nothing (outputs ready at once), so the
// CPU time per token that --log-stats --enable-per-request-metrics adds is measured alone, then set against the real
// engine's best CPU time per token above. Contention inflates both sides of this difference alike.
const fakeEngine = (tokenizer: Orchestrator["tokenizer"], base: Orchestrator): Orchestrator => ({
  modelConfig: base.modelConfig, maxModelLen: base.maxModelLen, tokenizer, isHealthy: () => true, shutdown: async () => {},
  async *generate(request: GenerateRequest): AsyncIterable<RequestOutput> {
    const maxTokens = request.sampling.maxTokens ?? 16;
    let first: number | null = null;
    for (let n = 1; n <= maxTokens; n++) {
      const now = nowMs();
      first ??= now;
      yield {
        requestId: request.requestId, numPromptTokens: request.promptTokenIds.length, numCachedTokens: 0, finished: n === maxTokens,
        outputs: [{ index: 0, textDelta: " a", tokenIdsDelta: [n % 100 + 10], numGeneratedTokens: n, finishReason: n === maxTokens ? "length" : null, stopReason: null }],
        times: { arrivalMs: request.arrivalMs, queuedMs: now, scheduledMs: now, firstTokenMs: first, lastTokenMs: now },
      };
    }
  },
});
async function isolatedCpuPerToken(observedMode: boolean): Promise<number> {
  const parsed = parseCommandArgs("serve", observedMode ? ["--log-stats"] : []);
  if (!parsed.ok) throw new Error(parsed.error);
  const gate = makeDeprecationGate(pkg.version, null);
  if (!gate.ok) throw new Error(gate.error);
  const forward = new Forward();
  const { orchestrator } = await createServingPipeline({
    ...servingInputs(parsed.value), listener: forward,
    tables: observedMode ? (n) => onlineTables(n, (t) => void writeSync(devNull, t)) : null,
    factory: async () => fakeEngine(plain.orchestrator.tokenizer, plain.orchestrator),
  });
  const recorder = new MetricsRecorder({ modelName: "bench", maxModelLen: orchestrator.maxModelLen, logStats: true, enableMfuMetrics: false, deprecation: gate.value, processMetrics: false });
  forward.target = recorder;
  const app = createApp({
    orchestrator, servedModelName: orchestrator.modelConfig.name, modelPath: "bench", apiKey: null, enablePerRequestMetrics: observedMode,
    forceIncludeUsage: false, maxBodyBytes: DEFAULT_MAX_BODY_BYTES, shutdownSignal: new AbortController().signal, log: () => {}, metricsRoute: metricsRoute(recorder),
  });
  const samples: number[] = [];
  for (let r = 0; r < 9; r++) samples.push((await measure(app, { ...args, requests: 64 }, r)).cpuUsPerToken);
  return min(samples);
}
const isoPlain = await isolatedCpuPerToken(false);
const isoObserved = await isolatedCpuPerToken(true);
const engineCpu = min(plainCpu);
console.log(`isolated: serving path ${isoPlain.toFixed(2)} cpu-us/tok plain, ${isoObserved.toFixed(2)} observed; observability adds ${(isoObserved - isoPlain).toFixed(2)} cpu-us/tok = ${(((isoObserved - isoPlain) / engineCpu) * 100).toFixed(2)}% of the engine's ${engineCpu.toFixed(1)} cpu-us/tok (target < 3%)`);
await plain.orchestrator.shutdown();
await observed.orchestrator.shutdown();
closeSync(devNull);
process.exit(0);
