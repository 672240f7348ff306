/**
 * `bun run bench/serve-compare.ts -- [--models SHAPE:TYPE,...] [--model F] [--concurrency 1,4,8,16,32] [--rates 0.5,1]
 *   [--datasets random,shared-prefix] [--input-len 256] [--output-len 64] [--prefix-len 128] [--turns 4] [--num-prompts N]
 *   [--threads 2] [--ctx 2048] [--rounds 1] [--fennec-args "..."] [--llama-server PATH]`
 * fennec's server against llama.cpp's own `llama-server`, server against server: both on the same GGUF with the same
 * threads and per-sequence context, one at a time, each driven by `fennec bench serve` (vLLM's options and result
 * keys: same seed, same prompts, --ignore-eos so both generate every token) at each concurrency (unlimited rate) and
 * at each fixed request rate (Poisson). llama-server runs as its users run it: `-np` slots = the concurrency (the
 * rate rows: the largest concurrency), continuous batching (its default), `-c` = slots x context (each slot gets the
 * context), `--cache-reuse 256` on the shared-prefix dataset. fennec runs with `--max-num-seqs` = the same slots,
 * `--max-model-len` = the context, prefix caching on (its default).
 * Datasets: `random` (vLLM's random dataset, --input-len prompt tokens); `shared-prefix` (multi-turn chat: --turns
 * turns of each of several conversations, each turn's prompt resending the whole history, "User: ... Assistant: ...",
 * about --input-len / 4 tokens a user turn, --output-len an answer and --prefix-len of system prompt shared by all; written as a ShareGPT
 * file for bench serve, which sends the turns in a seeded random order, so a turn usually finds its history cached).
 * Prints one table of fennec / llama-server ratios (output throughput: higher is better for fennec; TTFT and ITL
 * p50/p99: lower is better) and keeps every result JSON and a summary under .cache/bench/serve-compare/<time>/.
 * Models: --model F, or --models SHAPE:TYPE,... made once with make-model into .cache/bench/models/ (random weights
 * in the real shape, real tokenizer). llama-server comes from scripts/build-llama-tool.sh llama-server (built once, pinned by the
 * bundle's commit). Needs dist/fennec (npx bun run build). A development benchmark, not a test.
 * --rounds R runs each row R times, the two servers alternating (fennec first in even rounds, llama-server first in odd
 * ones), each started afresh every round (an empty prefix cache); the table gives each ratio's median over the rounds
 * and its best (fennec's best round against llama-server's). Beside wall-clock figures it gives each server's CPU time
 * (user + system of its process, /proc/PID/stat) per 1,000 output tokens: the work a token took, which on a shared
 * machine moves less than the wall clock (spinning threads count in it; so does bench serve's warm-up request, whose
 * tokens are not counted: the same on both sides). On the shared-prefix dataset fennec's prefix
 * cache hit rate (vllm:prefix_cache_hits_total / queries_total from its /metrics) is printed beside the row.
 * --fennec-args adds flags to every `fennec serve` (split at spaces), e.g. "--max-num-batched-tokens 512": fennec's step
 * budget is otherwise its default, vLLM's 2048 on CPU, the same as llama-server's batch (`-b`, default 2048).
 * Failed requests are counted in the table's "done" column, their errors kept in the JSON: against llama-server a
 * request now and then fails with ECONNRESET (the connection closed under Bun's fetch), not seen against fennec; on
 * the qwen2.5 shapes some fail with "The model produced output that does not match the expected Content-only format"
 * (llama-server's output parser on the random weights' text): such a row compares unequal work.
 * Defaults are the issue's matrix: the four shapes below with llama-3.2-1b in q8_0 and q4_k_m, concurrency 1-32 and
 * the rates 0.5 and 1 request/s at the largest concurrency's slots, on both datasets.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { llamaServerPath, startServer, type Server } from "./server-peers.ts";

const ROOT = join(import.meta.dir, "..");
const FENNEC = join(ROOT, "dist", "fennec");
const CACHE = join(ROOT, ".cache", "bench");

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? fallback : (process.argv[i + 1] ?? fallback);
}
function int(name: string, fallback: number): number {
  const n = Number(option(name, String(fallback)));
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} needs a positive integer`);
  return n;
}
const list = (name: string, fallback: string): string[] => option(name, fallback).split(",").map((s) => s.trim()).filter((s) => s !== "");
const threads = int("threads", 2), ctx = int("ctx", 2048), inputLen = int("input-len", 256), outputLen = int("output-len", 64);
const prefixLen = int("prefix-len", 128), turns = int("turns", 4), rounds = int("rounds", 1);
const concurrencies = list("concurrency", "1,4,8,16,32").map(Number);
const rates = list("rates", "0.5,1").map(Number);
const datasets = list("datasets", "random,shared-prefix");
const fennecArgs = option("fennec-args", "").split(" ").filter((a) => a !== "");
for (const d of datasets) if (d !== "random" && d !== "shared-prefix") throw new Error(`--datasets: unknown dataset "${d}" (random, shared-prefix)`);
const numPromptsFor = (c: number): number => (process.argv.includes("--num-prompts") ? int("num-prompts", 8) : Math.max(turns, 2 * c));

/** Seeded words (mulberry32), so both servers and every run get the same conversations. */
function words(seed: number): (n: number) => string {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t ^= t + Math.imul(t ^ (t >>> 7), 61 | t);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const syllables = ["ka", "lo", "mi", "ten", "ra", "vo", "shi", "an", "el", "por", "du", "ne", "sa", "tri", "gu", "be"];
  const word = (): string => Array.from({ length: 1 + Math.floor(next() * 3) }, () => syllables[Math.floor(next() * syllables.length)]!).join("");
  return (n) => Array.from({ length: n }, word).join(" ");
}

/** The multi-turn chat file (ShareGPT format): numPrompts / turns conversations, one entry per turn. */
function multiTurnFile(dir: string, numPrompts: number): string {
  const say = words(7);
  // these made-up words are about 2 tokens each: the lengths below are in tokens
  const system = `System: ${say(Math.max(1, prefixLen >> 1))}\n`;
  const entries: { conversations: { from: string; value: string }[] }[] = [];
  for (let c = 0; c < Math.ceil(numPrompts / turns); c++) {
    let history = system;
    for (let t = 0; t < turns; t++) {
      history += `User: ${say(Math.max(1, inputLen >> 3))}\nAssistant:`;
      const answer = ` ${say(Math.max(1, outputLen >> 1))}\n`;
      entries.push({ conversations: [{ from: "human", value: history }, { from: "gpt", value: answer }] });
      history += answer;
    }
  }
  const file = join(dir, `multi-turn-${numPrompts}.json`);
  writeFileSync(file, JSON.stringify(entries));
  return file;
}

/** The models: --model F, else each SHAPE:TYPE made once into .cache/bench/models/. */
async function models(): Promise<string[]> {
  if (process.argv.includes("--model")) return [option("model", "")];
  const out: string[] = [];
  for (const spec of list("models", "smollm2-135m:q8_0,qwen2.5-0.5b:q8_0,qwen2.5-0.5b:q4_k_m,llama-3.2-1b:q8_0,llama-3.2-1b:q4_k_m")) {
    const [shape, type] = spec.split(":");
    if (shape === undefined || type === undefined) throw new Error(`--models: "${spec}" is not SHAPE:TYPE`);
    const file = join(CACHE, "models", `${shape}-${type}.gguf`);
    if (!existsSync(file)) {
      mkdirSync(join(CACHE, "models"), { recursive: true });
      const make = Bun.spawn(["npx", "bun", "run", "make-model", "--", "--shape", shape, "--type", type, "--out", file], { cwd: ROOT, stdout: "inherit", stderr: "inherit" });
      if ((await make.exited) !== 0) throw new Error(`make-model ${spec} failed`);
    }
    out.push(file);
  }
  return out;
}

/** a process's CPU seconds so far (utime + stime of /proc/PID/stat, in clock ticks of 1/100 s), null off Linux */
function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // fields from the state (field 3): utime is field 14, stime 15
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

/** fennec's prefix cache counters (vllm:prefix_cache_queries_total, hits_total) from /metrics */
async function prefixCacheCounts(url: string): Promise<{ queries: number; hits: number } | null> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const sum = (name: string): number => text.split("\n").filter((l) => l.startsWith(name)).reduce((a, l) => a + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    return { queries: sum("vllm:prefix_cache_queries_total"), hits: sum("vllm:prefix_cache_hits_total") };
  } catch {
    return null;
  }
}

interface Row { readonly dataset: string; readonly concurrency: number; readonly rate: number | null }
interface Result {
  readonly completed: number; readonly output_throughput: number; readonly p50_ttft_ms: number; readonly p99_ttft_ms: number;
  readonly p50_itl_ms: number; readonly p99_itl_ms: number; readonly total_output_tokens: number;
}
/** one side's round: bench serve's result, the server's CPU seconds over it, fennec's prefix cache hits */
interface SideRun { readonly result: Result; readonly cpuS: number | null; readonly prefixHitRate: number | null }
const KEYS = ["output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_itl_ms", "p99_itl_ms"] as const;

async function benchServe(url: string, model: string, row: Row, dir: string, label: string): Promise<Result> {
  const numPrompts = numPromptsFor(row.concurrency);
  const file = `${label}.json`;
  const dataset = row.dataset === "shared-prefix"
    ? ["--dataset-name", "sharegpt", "--dataset-path", multiTurnFile(dir, numPrompts), "--sharegpt-output-len", String(outputLen)]
    : ["--dataset-name", "random", "--random-input-len", String(inputLen), "--random-output-len", String(outputLen)];
  const args = [
    FENNEC, "bench", "serve", "--base-url", url, "--tokenizer", model, ...dataset, "--seed", "0",
    "--num-prompts", String(numPrompts), "--ignore-eos", "--temperature", "0",
    "--max-concurrency", String(row.concurrency), "--request-rate", row.rate === null ? "inf" : String(row.rate), "--num-warmups", "1",
    "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,99", "--save-result", "--result-dir", dir, "--result-filename", file,
    "--label", label, "--save-detailed",
  ];
  const run = Bun.spawn(args, { stdout: "ignore", stderr: "inherit" });
  if ((await run.exited) !== 0) throw new Error(`bench serve ${label} failed`);
  const result = JSON.parse(readFileSync(join(dir, file), "utf8")) as Result;
  // a failed request is reported (its error is in the JSON, --save-detailed), not hidden: the row's figures cover the rest
  if (result.completed !== numPrompts) console.error(`${label}: ${result.completed} of ${numPrompts} requests completed (errors in ${join(dir, file)})`);
  return result;
}

const fmt = (n: number): string => (n >= 100 ? n.toFixed(0) : n.toFixed(1));

async function main(): Promise<void> {
  if (!existsSync(FENNEC)) throw new Error("no dist/fennec: npx bun run build first");
  const llamaServer = llamaServerPath(process.argv.includes("--llama-server") ? option("llama-server", "") : null);
  const dir = join(CACHE, "serve-compare", new Date().toISOString().replace(/[:.]/g, "-"));
  mkdirSync(dir, { recursive: true });
  const rows: Row[] = [];
  for (const dataset of datasets) {
    for (const c of concurrencies) rows.push({ dataset, concurrency: c, rate: null });
    for (const r of rates) rows.push({ dataset, concurrency: Math.max(...concurrencies), rate: r });
  }
  const summary: { model: string; row: Row; fennec: Result; llama: Result; rounds: { fennec: SideRun; llama: SideRun }[] }[] = [];
  const lines = [`fennec / llama-server, ${threads} threads, context ${ctx}, ${inputLen} in / ${outputLen} out (shared-prefix: ${turns} turns of ~${inputLen >> 2} + ${outputLen} tokens after a ${prefixLen}-token system prompt), ${rounds} round(s): median ratio${rounds > 1 ? " (best)" : ""}`,
    ["model", "dataset", "load", "done f / l", "out tok/s f / l", "ratio", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "CPU s/1k tok f / l", "prefix hits f"].join("\t")];
  for (const model of await models()) {
    for (const row of rows) {
      const slots = row.concurrency;
      const tag = `${basename(model, ".gguf")}-${row.dataset}-c${row.concurrency}${row.rate === null ? "" : `-r${row.rate}`}`;
      const runs: { fennec: SideRun; llama: SideRun }[] = [];
      for (let round = 0; round < rounds; round++) {
        const results: Partial<Record<"fennec" | "llama", SideRun>> = {};
        for (const side of round % 2 === 0 ? ["fennec", "llama"] as const : ["llama", "fennec"] as const) {
          const command = side === "fennec"
            ? [FENNEC, "serve", "--model", model, "--threads", String(threads), "--max-model-len", String(ctx), "--max-num-seqs", String(slots), ...fennecArgs]
            : [llamaServer, "-m", model, "-t", String(threads), "-tb", String(threads), "-c", String(ctx * slots), "-np", String(slots), "-cb", "--no-webui",
              ...(row.dataset === "shared-prefix" ? ["--cache-reuse", "256"] : [])];
          const label = `${tag}-${side}${rounds > 1 ? `-${round}` : ""}`;
          const server = await startServer(command, join(dir, `${label}.log`));
          try {
            const cpu0 = cpuSeconds(server.child.pid);
            const result = await benchServe(server.url, model, row, dir, label);
            const cpu1 = cpuSeconds(server.child.pid);
            const counts = side === "fennec" && row.dataset === "shared-prefix" ? await prefixCacheCounts(server.url) : null;
            results[side] = { result, cpuS: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0, prefixHitRate: counts === null || counts.queries === 0 ? null : counts.hits / counts.queries };
          } finally {
            server.child.kill();
            await server.child.exited;
          }
        }
        runs.push({ fennec: results.fennec!, llama: results.llama! });
      }
      const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 === 1 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2; };
      const ratio = (k: (typeof KEYS)[number]): string => {
        const rs = runs.map((r) => r.fennec.result[k] / r.llama.result[k]);
        const fs = runs.map((r) => r.fennec.result[k]), ls = runs.map((r) => r.llama.result[k]);
        // best: fennec's best round against llama-server's best (throughput: the highest; latencies: the lowest)
        const best = k === "output_throughput" ? Math.max(...fs) / Math.max(...ls) : Math.min(...fs) / Math.min(...ls);
        return median(rs).toFixed(2) + (k === "output_throughput" ? "x" : "") + (rounds > 1 ? ` (${best.toFixed(2)})` : "");
      };
      const perK = (s: SideRun): number | null => (s.cpuS === null ? null : (1000 * s.cpuS) / Math.max(1, s.result.total_output_tokens));
      const cpu = (side: "fennec" | "llama"): string => { const xs = runs.map((r) => perK(r[side])).filter((x) => x !== null); return xs.length === 0 ? "-" : fmt(median(xs)); };
      const hits = runs.map((r) => r.fennec.prefixHitRate).filter((x) => x !== null);
      const f = runs.at(-1)!.fennec.result, l = runs.at(-1)!.llama.result;
      summary.push({ model: basename(model), row, fennec: f, llama: l, rounds: runs });
      lines.push([basename(model, ".gguf"), row.dataset, row.rate === null ? `c=${row.concurrency}` : `${row.rate} req/s`,
        `${runs.map((r) => r.fennec.result.completed).join(",")} / ${runs.map((r) => r.llama.result.completed).join(",")}`,
        `${fmt(median(runs.map((r) => r.fennec.result.output_throughput)))} / ${fmt(median(runs.map((r) => r.llama.result.output_throughput)))}`,
        ...KEYS.map(ratio), `${cpu("fennec")} / ${cpu("llama")}`, hits.length === 0 ? "-" : `${(100 * median(hits)).toFixed(0)}%`].join("\t"));
      console.log(lines.at(-1));
    }
  }
  writeFileSync(join(dir, "summary.json"), `${JSON.stringify({ threads, ctx, inputLen, outputLen, prefixLen, turns, rounds, fennecArgs, llamaServer, summary }, null, 2)}\n`);
  console.log(`\n${fennecArgs.length > 0 ? `fennec serve given ${fennecArgs.join(" ")}\n` : ""}${lines.join("\n")}\n\nratios are fennec / llama-server (throughput: above 1 is fennec faster; TTFT, ITL: below 1 is fennec faster); CPU s/1k tok: each server's CPU seconds per 1,000 output tokens\nJSON: ${dir}`);
}

await main();
