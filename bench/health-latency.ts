/**
 * /health latency while the engine is busy: p50/p99 of sequential GET /health, first idle, then while N streaming
 * clients generate continuously (the engine runs in its own Worker, so the HTTP thread should stay responsive).
 *   bun run bench/health-latency.ts [--streams 8] [--duration-s 10] [--url http://127.0.0.1:8000] [--json]
 * Loopback only; starts its own server unless --url is given.
 */
import { startServer } from "../test/e2e/server-process.ts";

interface Args { streams: number; durationS: number; url: string | null; json: boolean }

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { streams: 8, durationS: 10, url: null, json: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    if (flag === "--streams") args.streams = Number(value());
    else if (flag === "--duration-s") args.durationS = Number(value());
    else if (flag === "--url") args.url = value();
    else if (flag === "--json") args.json = true;
    else throw new Error(`unknown flag ${flag}`);
  }
  if (args.url !== null && !/^http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$/.test(args.url)) throw new Error("--url must be a loopback address");
  return args;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** Sequential /health probes (10 ms apart) until the deadline; latencies in ms, sorted. */
async function probe(url: string, durationMs: number): Promise<{ latenciesMs: number[]; failures: number }> {
  const latenciesMs: number[] = [];
  let failures = 0;
  const deadline = performance.now() + durationMs;
  while (performance.now() < deadline) {
    const t0 = performance.now();
    const res = await fetch(`${url}/health`);
    await res.arrayBuffer();
    latenciesMs.push(performance.now() - t0);
    if (res.status !== 200) failures++;
    await Bun.sleep(10);
  }
  return { latenciesMs: latenciesMs.sort((a, b) => a - b), failures };
}

async function streamForever(url: string, until: () => boolean): Promise<number> {
  let tokens = 0;
  while (!until()) {
    const res = await fetch(`${url}/v1/completions`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 256, ignore_eos: true, stream: true, stream_options: { include_usage: true } }),
    });
    const text = await res.text();
    const usage = /"completion_tokens":(\d+)/g;
    let m: RegExpExecArray | null;
    let last = 0;
    while ((m = usage.exec(text)) !== null) last = Number(m[1]);
    tokens += last;
  }
  return tokens;
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const server = args.url === null ? await startServer([]) : null;
  const url = args.url ?? server!.url;
  try {
    const idle = await probe(url, Math.min(3000, args.durationS * 1000));
    let stop = false;
    const t0 = performance.now();
    const generators = Array.from({ length: args.streams }, () => streamForever(url, () => stop));
    await Bun.sleep(500); // let the streams start
    const busy = await probe(url, args.durationS * 1000);
    stop = true;
    const tokens = (await Promise.all(generators)).reduce((s, n) => s + n, 0);
    const elapsedS = (performance.now() - t0) / 1000;
    const stats = (l: number[]) => ({ samples: l.length, p50Ms: Number(percentile(l, 50).toFixed(2)), p99Ms: Number(percentile(l, 99).toFixed(2)), maxMs: Number((l.at(-1) ?? NaN).toFixed(2)) });
    const summary = { streams: args.streams, idle: stats(idle.latenciesMs), underLoad: stats(busy.latenciesMs), failures: idle.failures + busy.failures, outputTokensPerS: Number((tokens / elapsedS).toFixed(1)) };
    if (args.json) console.log(JSON.stringify(summary));
    else {
      console.log(`/health latency, sequential probes every 10 ms`);
      console.log(`  idle:              p50 ${summary.idle.p50Ms} ms  p99 ${summary.idle.p99Ms} ms  max ${summary.idle.maxMs} ms  (${summary.idle.samples} probes)`);
      console.log(`  ${args.streams} streams busy: p50 ${summary.underLoad.p50Ms} ms  p99 ${summary.underLoad.p99Ms} ms  max ${summary.underLoad.maxMs} ms  (${summary.underLoad.samples} probes, ${summary.outputTokensPerS} tokens/s generated)`);
      if (summary.failures > 0) console.log(`  FAIL ${summary.failures} probes were not 200`);
    }
    return summary.failures === 0 ? 0 : 1;
  } finally {
    await server?.stop();
  }
}

process.exit(await main());
