/**
 * Load test (loopback only, bounded): N concurrent streaming clients for D seconds against `fennec serve` on the
 * default model. Every stream is checked chunk by chunk: role/usage order, running completion_tokens that rise by the
 * tokens of each chunk (nothing lost or repeated), one finish, [DONE] last, and the greedy text equal to the same
 * prompt's non-streamed answer. Reports throughput, TTFT percentiles and the server's memory before and after.
 *   bun run bench/load.ts [--clients 32] [--duration-s 60] [--max-tokens 64] [--url http://127.0.0.1:8000] [--json]
 *                         [-- <fennec serve flags, e.g. --max-num-seqs 32>]
 * Exits 1 on any error or broken stream. Starts its own server unless --url is given.
 */
import { readFileSync } from "node:fs";
import { startServer, type ServerProcess } from "../test/e2e/server-process.ts";

interface Args { clients: number; durationS: number; maxTokens: number; url: string | null; json: boolean; serveArgs: string[] }

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { clients: 32, durationS: 60, maxTokens: 64, url: null, json: false, serveArgs: [] };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    if (flag === "--") { args.serveArgs = argv.slice(i + 1) as string[]; break; }
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    if (flag === "--clients") args.clients = Number(value());
    else if (flag === "--duration-s") args.durationS = Number(value());
    else if (flag === "--max-tokens") args.maxTokens = Number(value());
    else if (flag === "--url") args.url = value();
    else if (flag === "--json") args.json = true;
    else throw new Error(`unknown flag ${flag}`);
  }
  if (args.url !== null && !/^http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$/.test(args.url)) throw new Error("--url must be a loopback address");
  return args;
}

/** more growth than this between two equal halves of load counts as a leak */
const MAX_RSS_GROWTH = 0.2;

const PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went to the park", "One day, a big fish"];

interface StreamResult { ok: boolean; error?: string; ttftMs: number; tokens: number; chunks: number }

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function referenceTexts(url: string, maxTokens: number): Promise<string[]> {
  return Promise.all(PROMPTS.map(async (prompt) => {
    const res = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true }) });
    const body = (await res.json()) as { choices: { text: string }[] };
    return body.choices[0]!.text;
  }));
}

/** One streamed request, checked event by event. */
async function stream(url: string, promptIndex: number, maxTokens: number, expected: string): Promise<StreamResult> {
  const t0 = performance.now();
  let ttftMs = NaN;
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: PROMPTS[promptIndex], max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } }),
  });
  if (res.status !== 200) return { ok: false, error: `status ${res.status}: ${await res.text()}`, ttftMs, tokens: 0, chunks: 0 };
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let text = "";
  let lastCount = 0;
  let finishes = 0;
  let chunks = 0;
  let done = false;
  let usageTotal = -1;
  const fail = (error: string): StreamResult => ({ ok: false, error, ttftMs, tokens: lastCount, chunks });
  for (;;) {
    const { done: eof, value } = await reader.read();
    if (eof) break;
    buffer += decoder.decode(value, { stream: true });
    let cut: number;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      if (done) return fail("data after [DONE]");
      if (event === "data: [DONE]") { done = true; continue; }
      const chunk = JSON.parse(event.slice(6)) as { choices: { text: string; finish_reason: string | null }[]; usage?: { completion_tokens: number }; error?: unknown };
      if (chunk.error) return fail(`error event ${JSON.stringify(chunk.error)}`);
      chunks++;
      if (chunk.choices.length === 0) { usageTotal = chunk.usage?.completion_tokens ?? -1; continue; }
      if (usageTotal >= 0) return fail("content after the usage chunk");
      const count = chunk.usage?.completion_tokens ?? -1;
      if (count <= lastCount) return fail(`completion_tokens did not rise (${lastCount} -> ${count}): lost or repeated chunk`);
      lastCount = count;
      if (Number.isNaN(ttftMs) && chunk.choices[0]!.text !== "") ttftMs = performance.now() - t0;
      text += chunk.choices[0]!.text;
      if (chunk.choices[0]!.finish_reason !== null) finishes++;
    }
  }
  if (!done) return fail("no [DONE]");
  if (finishes !== 1) return fail(`${finishes} finish chunks`);
  if (usageTotal !== maxTokens || lastCount !== maxTokens) return fail(`expected ${maxTokens} tokens, usage says ${usageTotal}, running count ${lastCount}`);
  if (text !== expected) return fail(`text differs from the non-streamed answer:\n  got      ${JSON.stringify(text)}\n  expected ${JSON.stringify(expected)}`);
  return { ok: true, ttftMs, tokens: lastCount, chunks };
}

function rssBytes(server: ServerProcess | null): number | null {
  if (!server) return null;
  const status = readFileSync(`/proc/${server.process.pid}/status`, "utf8");
  const kb = /VmRSS:\s+(\d+) kB/.exec(status);
  return kb ? Number(kb[1]) * 1024 : null;
}

const mib = (bytes: number | null) => (bytes === null ? "n/a" : `${(bytes / 1048576).toFixed(1)} MiB`);

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const server = args.url === null ? await startServer(args.serveArgs) : null;
  const url = args.url ?? server!.url;
  try {
    const expected = await referenceTexts(url, args.maxTokens);
    // warm-up: one round so first-use allocations are not counted as growth
    await Promise.all(PROMPTS.map((_, i) => stream(url, i, args.maxTokens, expected[i]!)));
    const rssBefore = rssBytes(server);
    const results: StreamResult[] = [];
    const rssDuring: number[] = [];
    const sampler = setInterval(() => { const r = rssBytes(server); if (r !== null) rssDuring.push(r); }, 1000);
    // two equal halves with an idle pause after each: memory is flat when the second half ends where the first did
    const rssAfterHalf: (number | null)[] = [];
    let busyMs = 0;
    for (let half = 0; half < 2; half++) {
      const t0 = performance.now();
      const deadline = t0 + (args.durationS * 1000) / 2;
      await Promise.all(Array.from({ length: args.clients }, async (_, client) => {
        for (let k = 0; performance.now() < deadline; k++) {
          const i = (client + k) % PROMPTS.length;
          results.push(await stream(url, i, args.maxTokens, expected[i]!).catch((e: unknown) => ({ ok: false, error: String(e), ttftMs: NaN, tokens: 0, chunks: 0 })));
        }
      }));
      busyMs += performance.now() - t0;
      await Bun.sleep(3000);
      rssAfterHalf.push(rssBytes(server));
    }
    clearInterval(sampler);
    const elapsedS = busyMs / 1000;
    const rssAfter = rssAfterHalf[1] ?? null;
    const growth = rssAfterHalf[0] && rssAfterHalf[1] ? (rssAfterHalf[1] - rssAfterHalf[0]) / rssAfterHalf[0] : null;
    const failures = results.filter((r) => !r.ok);
    const ttfts = results.filter((r) => r.ok).map((r) => r.ttftMs).sort((a, b) => a - b);
    const tokens = results.reduce((s, r) => s + r.tokens, 0);
    const summary = {
      clients: args.clients, durationS: Number(elapsedS.toFixed(1)), maxTokens: args.maxTokens,
      requests: results.length, failed: failures.length,
      outputTokensPerS: Number((tokens / elapsedS).toFixed(1)), requestsPerS: Number((results.length / elapsedS).toFixed(2)),
      ttftMs: { p50: percentile(ttfts, 50), p90: percentile(ttfts, 90), p99: percentile(ttfts, 99), max: ttfts.at(-1) ?? NaN },
      rssBytes: { beforeLoad: rssBefore, peakDuringLoad: rssDuring.length ? Math.max(...rssDuring) : null, afterFirstHalf: rssAfterHalf[0] ?? null, afterLoad: rssAfter },
      rssGrowthSecondHalf: growth === null ? null : Number(growth.toFixed(3)),
      firstFailures: failures.slice(0, 3).map((f) => f.error),
    };
    if (args.json) console.log(JSON.stringify(summary));
    else {
      console.log(`load: ${summary.clients} streaming clients for ${summary.durationS} s, ${summary.maxTokens} tokens each`);
      console.log(`  requests ${summary.requests} (${summary.requestsPerS}/s), failed ${summary.failed}, output ${summary.outputTokensPerS} tokens/s`);
      const f = (v: number) => v.toFixed(1);
      console.log(`  TTFT ms: p50 ${f(summary.ttftMs.p50)}  p90 ${f(summary.ttftMs.p90)}  p99 ${f(summary.ttftMs.p99)}  max ${f(summary.ttftMs.max)}`);
      console.log(`  server RSS: before ${mib(rssBefore)}, peak ${mib(summary.rssBytes.peakDuringLoad)}, idle after half 1 ${mib(rssAfterHalf[0] ?? null)}, idle after half 2 ${mib(rssAfter)} (growth ${growth === null ? "n/a" : `${(growth * 100).toFixed(1)}%`})`);
      for (const e of summary.firstFailures) console.log(`  FAIL ${e}`);
    }
    const memoryFlat = growth === null || growth < MAX_RSS_GROWTH;
    if (!memoryFlat) console.log(`  FAIL server memory grew ${(growth! * 100).toFixed(1)}% between the two halves`);
    return failures.length === 0 && results.length > 0 && memoryFlat ? 0 : 1;
  } finally {
    await server?.stop();
  }
}

process.exit(await main());
