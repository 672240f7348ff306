/**
 * `bun run bench/pd-two-processes.ts -- [--num-prompts N] [--input-len N] [--output-len N] [--concurrency C] [--threads T] [--model F]`
 * Prefill + decode on two fennec processes behind `fennec proxy` against one `fennec serve`, on this machine, in one
 * run: `fennec bench serve` (vLLM's random dataset, same seed) against each, then the ratios (TTFT, output tokens/s)
 * and the KV transfer's cost from the decode and prefill servers' NIXL-family histograms (vllm:nixl_xfer_time_seconds,
 * vllm:nixl_bytes_transferred) per 1,000 prompt tokens. Needs dist/fennec (npx bun run build). A development
 * benchmark, not a test.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..");
const FENNEC = join(ROOT, "dist", "fennec");

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const n = Number(process.argv[i + 1]);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} needs a positive integer`);
  return n;
}
const model = ((): string[] => { const i = process.argv.indexOf("--model"); return i < 0 ? [] : ["--model", process.argv[i + 1]!]; })();
const numPrompts = arg("num-prompts", 32), inputLen = arg("input-len", 256), outputLen = arg("output-len", 32), concurrency = arg("concurrency", 4), threads = arg("threads", 1);

function freePort(): number {
  const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
  const port = probe.port!;
  probe.stop(true);
  return port;
}

interface Proc { readonly url: string; readonly child: ReturnType<typeof Bun.spawn> }

async function start(command: string[], env: Record<string, string> = {}): Promise<Proc> {
  const port = freePort();
  const child = Bun.spawn([FENNEC, ...command, "--host", "127.0.0.1", "--port", String(port)], { stdout: "ignore", stderr: "ignore", env: { ...process.env, ...env } });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try { if ((await fetch(`${url}/health`)).status === 200) return { url, child }; } catch { /* not yet */ }
    await Bun.sleep(100);
  }
  child.kill();
  throw new Error(`${command.join(" ")} did not start`);
}

async function scrape(url: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const line of (await (await fetch(`${url}/metrics`)).text()).split("\n")) {
    const m = /^(vllm:[a-z_:]+)(?:\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (m) out.set(m[1]!, (out.get(m[1]!) ?? 0) + Number(m[2]));
  }
  return out;
}

interface Result { readonly mean_ttft_ms: number; readonly output_throughput: number; readonly total_input_tokens: number; readonly completed: number }

async function bench(url: string, dir: string, label: string): Promise<Result> {
  const run = Bun.spawn([FENNEC, "bench", "serve", "--base-url", url, "--num-prompts", String(numPrompts), "--random-input-len", String(inputLen), "--random-output-len", String(outputLen), "--max-concurrency", String(concurrency), "--ignore-eos", "--disable-tqdm", "--save-result", "--result-dir", dir, "--result-filename", `${label}.json`, "--seed", "0"], { stdout: "inherit", stderr: "inherit" });
  if ((await run.exited) !== 0) throw new Error(`bench serve against ${label} failed`);
  return JSON.parse(readFileSync(join(dir, `${label}.json`), "utf8")) as Result;
}

const dir = mkdtempSync(join(tmpdir(), "fennec-pd-bench-"));
const procs: Proc[] = [];
try {
  const engine = [...model, "--threads", String(threads), "--max-num-seqs", String(Math.max(8, concurrency))];
  const transfer = (role: string): string[] => ["--kv-transfer-config", JSON.stringify({ kv_connector: "NixlConnector", kv_role: role })];
  const single = await start(["serve", ...engine]);
  procs.push(single);
  const oneServer = await bench(single.url, dir, "single");
  single.child.kill();
  const prefill = await start(["serve", ...engine, ...transfer("kv_producer")], { VLLM_NIXL_SIDE_CHANNEL_HOST: "127.0.0.1", VLLM_NIXL_SIDE_CHANNEL_PORT: String(freePort()) });
  const decode = await start(["serve", ...engine, ...transfer("kv_consumer")], { VLLM_NIXL_SIDE_CHANNEL_HOST: "127.0.0.1", VLLM_NIXL_SIDE_CHANNEL_PORT: String(freePort()) });
  const proxy = await start(["proxy", "--prefill", prefill.url, "--decode", decode.url]);
  procs.push(prefill, decode, proxy);
  const [p0, d0] = await Promise.all([scrape(prefill.url), scrape(decode.url)]);
  const pd = await bench(proxy.url, dir, "pd");
  const [p1, d1] = await Promise.all([scrape(prefill.url), scrape(decode.url)]);
  const delta = (name: string): number => ((d1.get(name) ?? 0) - (d0.get(name) ?? 0)) + ((p1.get(name) ?? 0) - (p0.get(name) ?? 0));
  const transfers = delta("vllm:nixl_xfer_time_seconds_count");
  const xferS = delta("vllm:nixl_xfer_time_seconds_sum");
  const bytes = delta("vllm:nixl_bytes_transferred_sum");
  const perKTokensMs = pd.total_input_tokens > 0 ? (1000 * xferS * 1000) / pd.total_input_tokens : NaN;
  console.log([
    "",
    `prefill+decode (2 processes + proxy) vs one server, ${numPrompts} prompts x ${inputLen} in / ${outputLen} out, concurrency ${concurrency}, ${threads} thread(s) each`,
    `mean TTFT ms:        one server ${oneServer.mean_ttft_ms.toFixed(1)}   P+D ${pd.mean_ttft_ms.toFixed(1)}   ratio P+D/one ${(pd.mean_ttft_ms / oneServer.mean_ttft_ms).toFixed(2)}`,
    `output tokens/s:     one server ${oneServer.output_throughput.toFixed(1)}   P+D ${pd.output_throughput.toFixed(1)}   ratio P+D/one ${(pd.output_throughput / oneServer.output_throughput).toFixed(2)}`,
    `KV transfers:        ${transfers} (${pd.completed} requests), ${(bytes / 2 ** 20).toFixed(2)} MiB, ${(xferS * 1000).toFixed(1)} ms in all`,
    `transfer cost:       ${perKTokensMs.toFixed(2)} ms and ${(bytes / Math.max(1, pd.total_input_tokens) * 1000 / 2 ** 20).toFixed(2)} MiB per 1,000 prompt tokens`,
  ].join("\n"));
} finally {
  for (const p of procs) p.child.kill();
  for (const f of readdirSync(dir)) rmSync(join(dir, f));
  rmSync(dir, { recursive: true, force: true });
}
