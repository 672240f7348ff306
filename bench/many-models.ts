/**
 * Three models behind one server with a budget of two loaded, requests interleaved across them for a while (the
 * several-models soak): every greedy answer checked against a one-model server's token ids, no request lost, loads and
 * unloads counted from the log, /health p50 / p99 throughout, and the process's RSS idle, at its peak and after every
 * model went idle past --keep-alive.
 *   bun run bench/many-models.ts [--duration-s 120] [--clients 6] [--model build/default-model.gguf] [--json]
 * Starts its own servers (the built binary when it is fresh, else the sources) on loopback ports.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer } from "../test/e2e/server-process.ts";

interface Args { durationS: number; clients: number; model: string; json: boolean }

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { durationS: 120, clients: 6, model: join(import.meta.dir, "..", "build", "default-model.gguf"), json: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    if (flag === "--duration-s") args.durationS = Number(value());
    else if (flag === "--clients") args.clients = Number(value());
    else if (flag === "--model") args.model = value();
    else if (flag === "--json") args.json = true;
    else throw new Error(`unknown flag ${flag}`);
  }
  return args;
}

const PROMPTS = ["Once upon a time", "The little dog", "Lily wanted to", "One day, a", "Tom and Sue"];
const MAX_TOKENS = 32;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
}

async function greedyIds(url: string, model: string, prompt: string, stream: boolean): Promise<number[]> {
  const response = await fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt, max_tokens: MAX_TOKENS, temperature: 0, return_token_ids: true, stream }),
  });
  if (response.status !== 200) throw new Error(`${model}: HTTP ${response.status} ${await response.text()}`);
  if (!stream) return ((await response.json()) as { choices: { token_ids: number[] }[] }).choices[0]!.token_ids;
  const ids: number[] = [];
  for (const line of (await response.text()).split("\n")) {
    if (line.startsWith("data: {")) ids.push(...((JSON.parse(line.slice(6)) as { choices: { token_ids?: number[] }[] }).choices[0]?.token_ids ?? []));
  }
  return ids;
}

const args = parseArgs(process.argv.slice(2));
const dir = mkdtempSync(join(tmpdir(), "fennec-bench-many-models-"));
const names = ["a", "b", "c"];
const paths = names.map((n) => join(dir, `${n}.gguf`));
for (const path of paths) copyFileSync(args.model, path);
try {
  const single = await startServer([paths[0]!, "--threads", "1"]);
  const expected = await Promise.all(PROMPTS.map((p) => greedyIds(single.url, paths[0]!, p, false)));
  await single.stop();

  const server = await startServer([...paths, "--threads", "1", "--max-loaded-models", "2", "--keep-alive", "3"]);
  const pid = server.process.pid;
  await Bun.sleep(500);
  const rssIdle = rssMiB(pid);
  let rssPeak = rssIdle;
  const health: number[] = [];
  let healthFailures = 0;
  const deadline = performance.now() + args.durationS * 1000;
  const poll = (async () => {
    while (performance.now() < deadline) {
      const t0 = performance.now();
      try { if ((await fetch(`${server.url}/health`)).status !== 200) healthFailures++; } catch { healthFailures++; }
      health.push(performance.now() - t0);
      rssPeak = Math.max(rssPeak, rssMiB(pid));
      await Bun.sleep(20);
    }
  })();
  let ok = 0;
  let wrong = 0;
  let failed = 0;
  await Promise.all(Array.from({ length: args.clients }, async (_, client) => {
    for (let i = 0; performance.now() < deadline; i++) {
      // each client walks the models in its own order, so two or three are wanted at once
      const model = names[(client + i + Math.floor(i / 4)) % names.length]!;
      const p = (client * 7 + i) % PROMPTS.length;
      try {
        const ids = await greedyIds(server.url, model, PROMPTS[p]!, i % 2 === 0);
        if (JSON.stringify(ids) === JSON.stringify(expected[p])) ok++; else wrong++;
      } catch (e) {
        failed++;
        console.error(String(e));
      }
    }
  }));
  await poll;
  await Bun.sleep(4500); // past --keep-alive: every model idle and unloaded
  Bun.gc(true);
  const rssAfter = rssMiB(pid);
  const log = server.log();
  const loads = log.split("\n").filter((l) => / loaded model \S+ in \d+ ms/.test(l)).length;
  const unloads = log.split("\n").filter((l) => / unloading model /.test(l)).length;
  await server.stop();
  health.sort((x, y) => x - y);
  const result = {
    durationS: args.durationS, clients: args.clients, requests: ok + wrong + failed, correct: ok, wrong, failed,
    loads, unloads, healthP50Ms: percentile(health, 50), healthP99Ms: percentile(health, 99), healthFailures,
    rssIdleMiB: rssIdle, rssPeakMiB: rssPeak, rssAfterUnloadMiB: rssAfter,
  };
  if (args.json) console.log(JSON.stringify(result));
  else {
    console.log(`${result.requests} requests over ${args.durationS} s from ${args.clients} clients: ${ok} correct, ${wrong} wrong ids, ${failed} failed`);
    console.log(`${loads} loads, ${unloads} unloads (budget of two loaded)`);
    console.log(`/health: p50 ${result.healthP50Ms.toFixed(1)} ms, p99 ${result.healthP99Ms.toFixed(1)} ms, ${healthFailures} failures`);
    console.log(`RSS: ${rssIdle.toFixed(1)} MiB idle, ${rssPeak.toFixed(1)} MiB peak, ${rssAfter.toFixed(1)} MiB after every model was unloaded`);
  }
  if (wrong > 0 || failed > 0 || healthFailures > 0) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
