/**
 * `bun run bench/long-context.ts -- --model F [--contexts 4096,16384,32768] [--output-len 64] [--rounds 3]
 *   [--threads 2] [--sides fennec,llama] [--llama-server PATH] [--kv-cache-dtype auto] [--keep-logs]`
 * Decode of one stream with a long context already in the cache: fennec's server against llama.cpp's `llama-server`
 * on the same GGUF and threads. Per context N, both servers run at once (one slot each, context N + output + 16);
 * each is sent one streaming /v1/completions request whose prompt is N seeded random token ids (the prefill, timed
 * but aside), then --rounds requests of the same prompt, the two servers alternating, so both decode at context N from
 * their prefix caches while the box's load hits both alike (each recomputes at most a block of the prompt). Each
 * request generates --output-len tokens (ignore_eos, greedy); its inter-token latency is the median gap between
 * streamed tokens, TTFT aside. Prints per context: prefill seconds, ITL best and median over the rounds, and the
 * decode ratio fennec / llama-server (above 1: fennec faster). llama-server: `-np 1`, its default flash attention and
 * f16 cache, `-c` = the same context; fennec: `--max-num-seqs 1`, `--max-model-len` the same, --kv-cache-dtype as given.
 * A 16k prefill on 2 threads takes minutes a side: a development benchmark, not a test. Needs dist/fennec.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { llamaServerPath, startServer, type Server } from "./server-peers.ts";

const ROOT = join(import.meta.dir, "..");
const FENNEC = join(ROOT, "dist", "fennec");

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? fallback : (process.argv[i + 1] ?? fallback);
}
function positive(name: string, fallback: number): number {
  const n = Number(option(name, String(fallback)));
  if (!Number.isInteger(n) || n < 1) usage(`--${name} needs a positive integer`);
  return n;
}
function usage(why: string): never {
  process.stderr.write(`long-context: ${why}\nusage: bun run bench/long-context.ts -- --model F [--contexts 4096,16384,32768] [--output-len 64] [--rounds 3] [--threads 2] [--sides fennec,llama] [--llama-server PATH] [--kv-cache-dtype auto]\n`);
  process.exit(2);
}

const model = option("model", "");
if (model === "" || !existsSync(model)) usage("--model F (a GGUF) is required");
const contexts = option("contexts", "4096,16384,32768").split(",").map(Number);
if (!contexts.every((n) => Number.isInteger(n) && n > 0)) usage("--contexts takes positive integers");
const outputLen = positive("output-len", 64), rounds = positive("rounds", 3), threads = positive("threads", 2);
const sides = option("sides", "fennec,llama").split(",") as Side[];
if (!sides.every((s) => s === "fennec" || s === "llama")) usage("--sides takes fennec and/or llama");
const kvCacheDtype = option("kv-cache-dtype", "auto");

type Side = "fennec" | "llama";

/** N token ids from a seeded generator (mulberry32), in [1000, 20000): plain vocabulary in every shape's tokenizer. */
function promptIds(n: number, seed: number): number[] {
  let a = seed >>> 0;
  return Array.from({ length: n }, () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t ^= t + Math.imul(t ^ (t >>> 7), 61 | t);
    return 1000 + Math.floor((((t ^ (t >>> 14)) >>> 0) / 2 ** 32) * 19000);
  });
}

interface Timing { readonly ttftMs: number; readonly itlMs: number; readonly tokens: number }

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

/** One streaming completion: TTFT and the median gap between the streamed tokens after the first. */
async function complete(url: string, prompt: number[]): Promise<Timing> {
  const t0 = performance.now();
  const response = await fetch(`${url}/v1/completions`, {
    method: "POST",
    // a fresh connection per request: Bun's pooled sockets to llama-server now and then come back reset
    headers: { "content-type": "application/json", connection: "close" },
    keepalive: false,
    body: JSON.stringify({ model: "m", prompt, max_tokens: outputLen, temperature: 0, ignore_eos: true, stream: true }),
  });
  if (!response.ok || response.body === null) throw new Error(`${url}: HTTP ${response.status} ${await response.text()}`);
  const arrivals: number[] = [];
  const decoder = new TextDecoder();
  let buffered = "";
  const reader = response.body.getReader();
  for (let read = await reader.read(); !read.done; read = await reader.read()) {
    const bytes = read.value;
    const now = performance.now();
    buffered += decoder.decode(bytes, { stream: true });
    const events = buffered.split("\n\n");
    buffered = events.pop()!;
    // SSE comments (": ..." keep-alives while a long prefill runs) carry no token
    for (const event of events.filter((e) => e.trim() !== "" && !e.startsWith(":"))) {
      if (!event.startsWith("data: ")) throw new Error(`${url}: unexpected stream event ${event.slice(0, 300)}`);
      const data = event.slice(6).trim();
      if (data === "[DONE]") continue;
      const chunk = JSON.parse(data) as { choices?: { text?: string; finish_reason?: string | null }[] };
      // a chunk per token on both servers (an empty text still counts: a token cut inside a UTF-8 character), but not
      // llama-server's closing chunk (no text, a finish reason), which follows its last token at once
      const choice = chunk.choices?.[0];
      if (choice !== undefined && (choice.text !== "" || (choice.finish_reason ?? null) === null)) arrivals.push(now);
    }
  }
  if (arrivals.length < 2) throw new Error(`${url}: ${arrivals.length} streamed tokens`);
  const gaps = arrivals.slice(1).map((t, i) => t - arrivals[i]!);
  return { ttftMs: arrivals[0]! - t0, itlMs: median(gaps), tokens: arrivals.length };
}

async function main(): Promise<void> {
  if (sides.includes("fennec") && !existsSync(FENNEC)) usage("no dist/fennec: npx bun run build first");
  const llamaServer = sides.includes("llama") ? llamaServerPath(process.argv.includes("--llama-server") ? option("llama-server", "") : null) : "";
  const logs = mkdtempSync(join(tmpdir(), "fennec-long-context-"));
  const lines = [`${basename(model)}, ${threads} threads, ${outputLen} tokens decoded per request, ${rounds} rounds alternating; fennec KV ${kvCacheDtype}, llama-server f16`,
    "| context | prefill s fennec / llama | ITL ms fennec best / median | ITL ms llama best / median | decode ratio best / median |", "|---|---|---|---|---|"];
  for (const context of contexts) {
    const ctx = context + outputLen + 16;
    const commands: Record<Side, string[]> = {
      fennec: [FENNEC, "serve", "--model", model, "--served-model-name", "m", "--threads", String(threads), "--max-model-len", String(ctx), "--max-num-seqs", "1", "--kv-cache-dtype", kvCacheDtype],
      llama: [llamaServer, "-m", model, "--alias", "m", "-t", String(threads), "-tb", String(threads), "-c", String(ctx), "-np", "1", "--no-webui"],
    };
    const servers: Partial<Record<Side, Server>> = {};
    try {
      for (const side of sides) servers[side] = await startServer(commands[side], join(logs, `${side}-${context}.log`));
      const prompt = promptIds(context, context);
      const prefill: Partial<Record<Side, number>> = {};
      for (const side of sides) {
        const t = performance.now();
        await complete(servers[side]!.url, prompt);
        prefill[side] = (performance.now() - t) / 1000;
        console.error(`context ${context}: ${side} prefill + first decode ${prefill[side]!.toFixed(1)} s`);
      }
      const itl: Record<Side, number[]> = { fennec: [], llama: [] };
      for (let r = 0; r < rounds; r++) {
        for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
          const timing = await complete(servers[side]!.url, prompt);
          itl[side].push(timing.itlMs);
          console.error(`context ${context} round ${r + 1}: ${side} TTFT ${timing.ttftMs.toFixed(0)} ms, ITL ${timing.itlMs.toFixed(2)} ms over ${timing.tokens} tokens`);
        }
      }
      const cell = (side: Side): string => (itl[side].length === 0 ? "-" : `${Math.min(...itl[side]).toFixed(2)} / ${median(itl[side]).toFixed(2)}`);
      const ratio = itl.fennec.length > 0 && itl.llama.length > 0
        ? `${(Math.min(...itl.llama) / Math.min(...itl.fennec)).toFixed(2)}x / ${(median(itl.llama) / median(itl.fennec)).toFixed(2)}x` : "-";
      lines.push(`| ${context} | ${prefill.fennec?.toFixed(0) ?? "-"} / ${prefill.llama?.toFixed(0) ?? "-"} | ${cell("fennec")} | ${cell("llama")} | ${ratio} |`);
      console.log(lines.at(-1));
    } finally {
      for (const server of Object.values(servers)) {
        server.child.kill();
        await server.child.exited;
      }
    }
  }
  const keep = process.argv.includes("--keep-logs");
  console.log(`\n${lines.join("\n")}\n\ndecode ratio: llama-server's ITL / fennec's (above 1: fennec decodes faster)${keep ? `; server logs in ${logs}` : ""}`);
  if (!keep) rmSync(logs, { recursive: true, force: true });
}

await main();
