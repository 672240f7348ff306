/**
 * `bun run bench:throughput -- --model F --num-prompts 32 --input-len 64 --output-len 64 [--concurrency C] [--json]`
 * Offline throughput like `vllm bench throughput`: random prompts of input-len tokens, output-len tokens each
 * (temperature 1, ignore_eos, seeded), through the orchestrator and its engine Worker. Without --concurrency it runs
 * at 1 and at 8 concurrent requests and prints the ratio of output tokens/s. While it runs, a loopback HTTP server
 * on the main thread answers /health and a poller measures its latency (the main thread must stay responsive
 * while the Worker computes). A progress bar counts finished requests on a terminal (stderr). --json prints one object
 * whose runs carry `vllm bench throughput --output-json`'s keys (elapsed_time, num_requests, total_num_tokens,
 * requests_per_second, tokens_per_second) plus output_tokens_per_second and /health latency; output_throughput_ratio is
 * the 8-vs-1 figure.
 */
import { cpus } from "node:os";
import { createEngineFrontend } from "../src/frontend/engine-frontend.ts";
import type { Orchestrator } from "../src/frontend/orchestrator.ts";
import { nowMs } from "../src/util/clock.ts";
import { createProgressBar } from "../src/util/progress.ts";
import { randomDataset, type BenchPrompt } from "../src/commands/bench-dataset.ts";
import { generateAll } from "../src/commands/bench-engine.ts";

interface BenchArgs {
  model: string | null;
  numPrompts: number;
  inputLen: number;
  outputLen: number;
  concurrency: number[];
  threads: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  seed: number;
  json: boolean;
}

const USAGE = "usage: bench:throughput -- [--model F] [--num-prompts N] [--input-len N] [--output-len N] [--concurrency C] [--threads T] [--max-num-seqs N] [--max-num-batched-tokens N] [--seed N] [--json]";

function parseArgs(argv: string[]): BenchArgs {
  const a: BenchArgs = { model: null, numPrompts: 32, inputLen: 64, outputLen: 64, concurrency: [1, 8], threads: cpus().length, maxNumSeqs: 16, maxNumBatchedTokens: 512, seed: 0, json: false };
  const int = (flag: string, v: string | undefined): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} needs a positive integer (got ${v ?? "nothing"})\n${USAGE}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    switch (flag) {
      case "--model": a.model = argv[++i] ?? null; break;
      case "--num-prompts": a.numPrompts = int(flag, argv[++i]); break;
      case "--input-len": a.inputLen = int(flag, argv[++i]); break;
      case "--output-len": a.outputLen = int(flag, argv[++i]); break;
      case "--concurrency": a.concurrency = [int(flag, argv[++i])]; break;
      case "--threads": a.threads = int(flag, argv[++i]); break;
      case "--max-num-seqs": a.maxNumSeqs = int(flag, argv[++i]); break;
      case "--max-num-batched-tokens": a.maxNumBatchedTokens = int(flag, argv[++i]); break;
      case "--seed": a.seed = Number(argv[++i]); break;
      case "--json": a.json = true; break;
      default: throw new Error(`unknown flag ${flag}\n${USAGE}`);
    }
  }
  return a;
}

/** seeded random prompts (fennec bench's random dataset), `length` tokens each, outputLen tokens out */
function randomPrompts(count: number, length: number, vocabSize: number, seed: number, outputLen: number): BenchPrompt[] {
  return randomDataset({ numPrompts: count, inputLen: length, outputLen, rangeRatio: 0, prefixLen: 0, seed }, vocabSize, null);
}

/** One run, with `vllm bench throughput --output-json`'s keys (elapsed_time .. tokens_per_second) and fennec's own. */
interface RunResult {
  concurrency: number;
  elapsed_time: number;
  num_requests: number;
  total_num_tokens: number;
  requests_per_second: number;
  tokens_per_second: number;
  total_output_tokens: number;
  output_tokens_per_second: number;
  mean_ttft_ms: number;
  health: { samples: number; p50_ms: number; p99_ms: number; max_ms: number };
}

const quantile = (sorted: number[], q: number): number => sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

/** polls GET /health on a loopback server every intervalMs while the run goes on */
function startHealthPoller(orch: Orchestrator, intervalMs = 25): { stop(): Promise<number[]> } {
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(null, { status: orch.isHealthy() ? 200 : 503 }) });
  const url = `http://127.0.0.1:${server.port}/health`;
  const latenciesMs: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = performance.now();
      const res = await fetch(url);
      await res.arrayBuffer();
      latenciesMs.push(performance.now() - t0);
      await Bun.sleep(intervalMs);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      server.stop(true);
      return latenciesMs;
    },
  };
}

async function run(orch: Orchestrator, prompts: BenchPrompt[], args: BenchArgs, concurrency: number, tag: string): Promise<RunResult> {
  const poller = startHealthPoller(orch);
  const bar = createProgressBar(`concurrency ${concurrency}`, { minTotal: 0, format: (done, total) => `${done}/${total} requests` });
  const { elapsedS, outputTokens, ttftsMs } = await generateAll(orch, prompts, { concurrency, tag, seed: args.seed, onFinished: (d, t) => bar.update(d, t) });
  bar.done();
  const health = (await poller.stop()).sort((a, b) => a - b);
  const promptTokens = prompts.reduce((s, p) => s + p.promptIds.length, 0);
  return {
    concurrency, elapsed_time: elapsedS, num_requests: prompts.length, total_num_tokens: outputTokens + promptTokens,
    requests_per_second: prompts.length / elapsedS, tokens_per_second: (outputTokens + promptTokens) / elapsedS,
    total_output_tokens: outputTokens, output_tokens_per_second: outputTokens / elapsedS,
    mean_ttft_ms: ttftsMs.reduce((s, x) => s + x, 0) / Math.max(1, ttftsMs.length),
    health: { samples: health.length, p50_ms: quantile(health, 0.5), p99_ms: quantile(health, 0.99), max_ms: health[health.length - 1] ?? 0 },
  };
}

async function main(): Promise<number> {
  let args: BenchArgs;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
    return 2;
  }
  const tLoad = nowMs();
  let orch: Orchestrator;
  try {
    orch = await createEngineFrontend({
      modelPath: args.model,
      engineArgs: {
        maxNumSeqs: args.maxNumSeqs, maxNumBatchedTokens: args.maxNumBatchedTokens, maxModelLen: null, blockSize: 16,
        kvCacheMemoryBytes: null, enablePrefixCaching: true, threads: args.threads, device: "cpu",
      },
    });
  } catch (e) {
    process.stderr.write(`bench:throughput: ${e instanceof Error ? e.message : String(e)}\n`);
    return 2;
  }
  const loadS = (nowMs() - tLoad) / 1000;
  try {
    if (args.inputLen + args.outputLen > orch.maxModelLen) throw new Error(`input-len + output-len = ${args.inputLen + args.outputLen} exceeds max-model-len ${orch.maxModelLen}`);
    const prompts = randomPrompts(args.numPrompts, args.inputLen, orch.modelConfig.vocabSize, args.seed, args.outputLen);
    // warm-up: one short request so the first timed run does not pay for JIT and first-touch memory
    await run(orch, randomPrompts(1, args.inputLen, orch.modelConfig.vocabSize, args.seed + 999, 4), args, 1, "warmup");
    const results: RunResult[] = [];
    for (const c of args.concurrency) {
      // each run gets its own prompts (a different seed) so the prefix cache gives no run an advantage
      const runPrompts = results.length === 0 ? prompts : randomPrompts(args.numPrompts, args.inputLen, orch.modelConfig.vocabSize, args.seed + 7919 * (results.length + 1), args.outputLen);
      results.push(await run(orch, runPrompts, args, c, `c${c}`));
    }
    const ratio = results.length === 2 ? results[1]!.output_tokens_per_second / results[0]!.output_tokens_per_second : null;
    const summary = {
      model: args.model ?? "<embedded default model>", threads: args.threads, load_time_s: loadS, num_prompts: args.numPrompts,
      input_len: args.inputLen, output_len: args.outputLen, results, output_throughput_ratio: ratio,
    };
    if (args.json) {
      process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
    } else {
      process.stdout.write(`model ${summary.model}, ${args.threads} threads, loaded in ${loadS.toFixed(2)} s\n`);
      for (const r of results) {
        process.stdout.write(
          `concurrency ${r.concurrency}: Throughput: ${r.requests_per_second.toFixed(2)} requests/s, ${r.tokens_per_second.toFixed(2)} total tokens/s, ${r.output_tokens_per_second.toFixed(2)} output tokens/s` +
          ` (${r.num_requests} requests, ${r.total_output_tokens} output tokens in ${r.elapsed_time.toFixed(2)} s, mean TTFT ${r.mean_ttft_ms.toFixed(1)} ms)\n` +
          `  /health under load: p50 ${r.health.p50_ms.toFixed(2)} ms, p99 ${r.health.p99_ms.toFixed(2)} ms, max ${r.health.max_ms.toFixed(2)} ms (${r.health.samples} samples)\n`,
        );
      }
      if (ratio !== null) process.stdout.write(`output tokens/s at ${results[1]!.concurrency} vs ${results[0]!.concurrency} concurrent: ${ratio.toFixed(2)}x\n`);
    }
    return 0;
  } catch (e) {
    process.stderr.write(`bench:throughput: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  } finally {
    await orch.shutdown();
  }
}

process.exit(await main());
