/**
 * Three models behind one server with a budget of two loaded, requests interleaved across them for a while (the
 * several-models soak): every greedy answer checked against a one-model server's token ids, no request lost, loads and
 * unloads counted from the log with their times (median and max, the first load of each model apart: it builds the
 * model's front end, later loads start only its engine), /health p50 / p99 throughout, and the process's RSS idle,
 * with one and two models loaded (what a loaded model holds), at its peak and after every model went idle past
 * --keep-alive (and 10 s later), and the main thread's longest stall while a model loads (bench/event-loop-probe.ts,
 * preloaded into the server: its 1 ms timer's gaps, with the ms the thread ran in them).
 *   bun run bench/many-models.ts [--duration-s 120] [--clients 6] [--model build/default-model.gguf] [--json] [--help]
 * Starts its own servers (the built binary when it is fresh, else the sources) on loopback ports.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer } from "../test/e2e/server-process.ts";

interface Args { durationS: number; clients: number; model: string; json: boolean }

const USAGE = `bench/many-models.ts: three copies of a model behind one server (--max-loaded-models 2, --keep-alive 3),
clients interleaving greedy requests across them; prints requests / correct / lost, loads and unloads with their
times, /health p50 / p99, another model's gaps between tokens during loads, and RSS (idle, one and two loaded, peak,
after every model was unloaded, 10 s later; anonymous and file-backed apart).
  --duration-s N   seconds of requests (default 120)
  --clients N      concurrent clients (default 6)
  --model PATH     the GGUF copied three times (default build/default-model.gguf)
  --json           one JSON line instead of the text
  --help           this text`;

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
    else if (flag === "--help" || flag === "-h") { console.log(USAGE); process.exit(0); }
    else { console.error(`unknown flag ${flag}\n${USAGE}`); process.exit(2); }
  }
  return args;
}

/** /health's target: probes slower than this are looked into */
const SLOW_PROBE_MS = 50;
const PROMPTS = ["Once upon a time", "The little dog", "Lily wanted to", "One day, a", "Tom and Sue"];
const MAX_TOKENS = 32;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** The server's main thread (its tid is the pid) from /proc schedstat: ms on a CPU and ms waiting for one. */
function mainThread(pid: number): { cpuMs: number; waitMs: number } {
  const [run, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ").map(Number);
  return { cpuMs: run! / 1e6, waitMs: wait! / 1e6 };
}

/** A 256-token greedy stream's gaps between token chunks (ms, sorted). */
async function streamGaps(url: string, model: string): Promise<number[]> {
  const response = await fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: PROMPTS[0], max_tokens: 256, temperature: 0, ignore_eos: true, stream: true }),
  });
  const reader = response.body!.getReader();
  const gaps: number[] = [];
  let last: number | null = null;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const now = performance.now();
    const chunks = new TextDecoder().decode(value).split("\n").filter((l) => l.startsWith("data: {")).length;
    if (chunks > 0 && last !== null) gaps.push(now - last);
    if (chunks > 0) last = now;
  }
  return gaps.sort((x, y) => x - y);
}

function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
}

/** RSS split: anonymous pages (heaps, Workers' memories) and file pages (the binary's code paged in), MiB */
function rssParts(pid: number): { anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const mib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]) / 1024;
  return { anon: mib("RssAnon"), file: mib("RssFile") };
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

  // the event-loop probe: how long a load holds the main thread (the HTTP / SSE thread of every model)
  const server = await startServer([...paths, "--threads", "1", "--max-loaded-models", "2", "--keep-alive", "3"], { env: { BUN_OPTIONS: `--preload ${join(import.meta.dir, "event-loop-probe.ts")}` } });
  const pid = server.process.pid;
  await Bun.sleep(500);
  const rssIdle = rssMiB(pid);
  const partsIdle = rssParts(pid);
  let rssPeak = rssIdle;
  const health: number[] = [];
  // a slow probe: was the main thread running (blocked by work) or waiting for a CPU (the machine was busy)?
  const slow: { ms: number; cpuMs: number; waitMs: number }[] = [];
  let healthFailures = 0;
  const loadBefore = readFileSync("/proc/loadavg", "utf8").split(" ")[0];
  // the probes run from the first load to the end of the soak
  const deadline = performance.now() + args.durationS * 1000;
  const poll = (async () => {
    while (performance.now() < deadline) {
      const t0 = performance.now();
      const before = mainThread(pid);
      try { if ((await fetch(`${server.url}/health`)).status !== 200) healthFailures++; } catch { healthFailures++; }
      const ms = performance.now() - t0;
      health.push(ms);
      if (ms > SLOW_PROBE_MS) { const after = mainThread(pid); slow.push({ ms, cpuMs: after.cpuMs - before.cpuMs, waitMs: after.waitMs - before.waitMs }); }
      rssPeak = Math.max(rssPeak, rssMiB(pid));
      await Bun.sleep(20);
    }
  })();
  // what one loaded model holds: RSS with one, then two loaded (each model's first load, its front end included)
  await greedyIds(server.url, names[0]!, PROMPTS[0]!, false);
  await Bun.sleep(500);
  const rssOne = rssMiB(pid);
  await greedyIds(server.url, names[1]!, PROMPTS[0]!, false);
  await Bun.sleep(500);
  const rssTwo = rssMiB(pid);
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
  await Bun.sleep(4500); // past --keep-alive: every model idle and unloaded (the server collects on its own then)
  const rssAfter = rssMiB(pid);
  const partsAfter = rssParts(pid);
  // and once the stopped engine threads have gone (they leave over several seconds on a busy machine)
  await Bun.sleep(10_000);
  const rssSettled = rssMiB(pid);
  const partsSettled = rssParts(pid);
  // another model's stream while loads come and go: its gaps between tokens, alone and with b and c taking turns
  await greedyIds(server.url, names[0]!, PROMPTS[0]!, false);
  const quiet = await streamGaps(server.url, names[0]!);
  let swapping = true;
  const swaps = (async () => { for (let i = 0; swapping; i++) await greedyIds(server.url, names[1 + (i % 2)]!, PROMPTS[1]!, false); })();
  const busy = await streamGaps(server.url, names[0]!);
  swapping = false;
  await swaps;
  const log = server.log();
  const lines = log.split("\n");
  const loadLines = lines.map((l) => / loaded model (\S+) in (\d+) ms/.exec(l)).filter((m): m is RegExpExecArray => m !== null);
  const loads = loadLines.length;
  const unloads = lines.filter((l) => / unloading model /.test(l)).length;
  // a model's first load builds its front end; the later ones start its engine only
  const seen = new Set<string>();
  const firstLoadMs: number[] = [];
  const reloadMs: number[] = [];
  for (const m of loadLines) { (seen.has(m[1]!) ? reloadMs : firstLoadMs).push(Number(m[2])); seen.add(m[1]!); }
  // the main thread's gaps (event-loop-probe.ts) while a model loads (each load's most run in one gap, first loads
  // apart), and at other times once the first load began (the process's own start-up left out)
  const inProgress = new Map<string, { first: boolean; ranMs: number }>();
  const loadedOnce = new Set<string>();
  const loadStalls = { first: [] as number[], later: [] as number[] };
  const worstDuring = { gapMs: 0, ranMs: 0 };
  let outsideRanMs = 0;
  let begun = false;
  for (const line of lines) {
    const started = / loading model (\S+) /.exec(line);
    const ended = / loaded model (\S+) in \d+ ms/.exec(line) ?? / model (\S+) failed to load/.exec(line);
    if (started !== null) { begun = true; inProgress.set(started[1]!, { first: !loadedOnce.has(started[1]!), ranMs: 0 }); }
    if (ended !== null) {
      const load = inProgress.get(ended[1]!);
      if (load !== undefined) (load.first ? loadStalls.first : loadStalls.later).push(load.ranMs);
      inProgress.delete(ended[1]!);
      loadedOnce.add(ended[1]!);
    }
    const gap = /\[event-loop\] gap ([\d.]+) ms ran ([\d.]+) ms/.exec(line);
    if (gap === null || !begun) continue;
    const [gapMs, ranMs] = [Number(gap[1]), Number(gap[2])];
    if (inProgress.size === 0) { outsideRanMs = Math.max(outsideRanMs, ranMs); continue; }
    for (const load of inProgress.values()) load.ranMs = Math.max(load.ranMs, ranMs);
    if (gapMs > worstDuring.gapMs) { worstDuring.gapMs = gapMs; worstDuring.ranMs = ranMs; }
  }
  for (const list of [loadStalls.first, loadStalls.later]) list.sort((x, y) => x - y);
  const stalls = {
    firstLoadsMaxRanMs: loadStalls.first.at(-1) ?? 0, laterLoadsP50RanMs: percentile(loadStalls.later, 50), laterLoadsMaxRanMs: loadStalls.later.at(-1) ?? 0,
    longestGapDuringLoadsMs: worstDuring.gapMs, itsRanMs: worstDuring.ranMs, otherTimesMaxRanMs: outsideRanMs,
  };
  const unloadMs = lines.map((l) => / unloaded model \S+ in (\d+) ms/.exec(l)).filter((m): m is RegExpExecArray => m !== null).map((m) => Number(m[1]));
  for (const list of [firstLoadMs, reloadMs, unloadMs]) list.sort((x, y) => x - y);
  await server.stop();
  health.sort((x, y) => x - y);
  const loadAfter = readFileSync("/proc/loadavg", "utf8").split(" ")[0];
  const median = (xs: number[]) => percentile([...xs].sort((x, y) => x - y), 50);
  const slowProbes = { count: slow.length, medianMs: median(slow.map((s) => s.ms)), medianMainThreadCpuMs: median(slow.map((s) => s.cpuMs)), medianMainThreadWaitMs: median(slow.map((s) => s.waitMs)) };
  const result = {
    durationS: args.durationS, clients: args.clients, requests: ok + wrong + failed, correct: ok, wrong, failed,
    loads, unloads, healthP50Ms: percentile(health, 50), healthP99Ms: percentile(health, 99), healthMaxMs: health.at(-1) ?? NaN, healthFailures,
    firstLoadMs, reloadP50Ms: percentile(reloadMs, 50), reloadMaxMs: reloadMs.at(-1) ?? NaN, unloadP50Ms: percentile(unloadMs, 50), unloadMaxMs: unloadMs.at(-1) ?? NaN,
    slowProbes, loadAverage: [Number(loadBefore), Number(loadAfter)], cpus: navigator.hardwareConcurrency,
    itlAloneMs: { p50: percentile(quiet, 50), p99: percentile(quiet, 99) }, itlDuringLoadsMs: { p50: percentile(busy, 50), p99: percentile(busy, 99) },
    mainThreadStallsMs: stalls,
    rssIdleMiB: rssIdle, rssOneLoadedMiB: rssOne, rssTwoLoadedMiB: rssTwo, rssPeakMiB: rssPeak, rssAfterUnloadMiB: rssAfter, rssSettledMiB: rssSettled,
    rssPartsMiB: { idle: partsIdle, afterUnload: partsAfter, settled: partsSettled },
  };
  if (args.json) console.log(JSON.stringify(result));
  else {
    console.log(`${result.requests} requests over ${args.durationS} s from ${args.clients} clients: ${ok} correct, ${wrong} wrong ids, ${failed} failed`);
    console.log(`${loads} loads, ${unloads} unloads (budget of two loaded)`);
    console.log(`load: first of each model ${firstLoadMs.join(", ")} ms; later loads p50 ${result.reloadP50Ms} ms, max ${result.reloadMaxMs} ms; unload p50 ${result.unloadP50Ms} ms, max ${result.unloadMaxMs} ms`);
    console.log(`/health: p50 ${result.healthP50Ms.toFixed(1)} ms, p99 ${result.healthP99Ms.toFixed(1)} ms, max ${result.healthMaxMs.toFixed(1)} ms, ${healthFailures} failures`);
    if (slow.length > 0) console.log(`  ${slow.length} probes over ${SLOW_PROBE_MS} ms (median ${slowProbes.medianMs.toFixed(1)} ms): the server's main thread ran ${slowProbes.medianMainThreadCpuMs.toFixed(1)} ms and waited ${slowProbes.medianMainThreadWaitMs.toFixed(1)} ms for a CPU (median); load average ${loadBefore} -> ${loadAfter} on ${navigator.hardwareConcurrency} CPUs`);
    console.log(`another model's stream, gaps between tokens: alone p50 ${result.itlAloneMs.p50.toFixed(1)} ms, p99 ${result.itlAloneMs.p99.toFixed(1)} ms; while the other two take turns loading p50 ${result.itlDuringLoadsMs.p50.toFixed(1)} ms, p99 ${result.itlDuringLoadsMs.p99.toFixed(1)} ms`);
    console.log(`main thread while a model loads, most it ran in one stretch: first loads max ${stalls.firstLoadsMaxRanMs.toFixed(1)} ms; later loads p50 ${stalls.laterLoadsP50RanMs.toFixed(1)} ms, max ${stalls.laterLoadsMaxRanMs.toFixed(1)} ms (longest gap of its 1 ms timer during a load ${stalls.longestGapDuringLoadsMs.toFixed(1)} ms, of which it ran ${stalls.itsRanMs.toFixed(1)} ms); at other times max ${stalls.otherTimesMaxRanMs.toFixed(1)} ms`);
    console.log(`RSS: ${rssIdle.toFixed(1)} MiB idle, ${rssOne.toFixed(1)} with one model loaded, ${rssTwo.toFixed(1)} with two, ${rssPeak.toFixed(1)} MiB peak, ${rssAfter.toFixed(1)} MiB after every model was unloaded, ${rssSettled.toFixed(1)} MiB 10 s later`);
    const parts = (p: { anon: number; file: number }) => `anonymous ${p.anon.toFixed(1)} + file ${p.file.toFixed(1)}`;
    console.log(`  idle ${parts(partsIdle)}; after unloads ${parts(partsAfter)}; 10 s later ${parts(partsSettled)} MiB`);
  }
  if (wrong > 0 || failed > 0 || healthFailures > 0) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
