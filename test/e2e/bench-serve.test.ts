// `fennec bench serve` (the CLI as a real process) against a real fennec server: the printed block is vLLM's, its
// figures agree with what the server's own /metrics counted over the same run (counts exactly, latencies within
// 10%), and the saved JSON has vLLM's keys in vLLM's order. Also runs against an API key, and reports failures.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeModelFile } from "../helpers/random-gguf.ts";
import { serverCommand, startServer, type ServerProcess } from "./server-process.ts";

const KEY = "bench-key";
let server: ServerProcess;
const dir = mkdtempSync(join(tmpdir(), "fennec-bench-"));

beforeAll(async () => {
  // one SmolLM2-shaped layer: a prefill of 1024 tokens takes long enough that the HTTP path (tens of ms on a loaded
  // machine) is noise in TTFT; one request at a time, so no prefill lands between another request's tokens
  server = await startServer(["--model", await makeModelFile("smollm2-135m", "q8_0", 1), "--api-key", KEY]);
}, 120_000);
afterAll(async () => { await server?.stop(); });

async function fennec(args: readonly string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = Bun.spawn([...serverCommand().slice(0, -1), ...args], { stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  const [code, stdout, stderr] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()]);
  return { code, stdout, stderr };
}

/** sum over label sets of one series of the server's exposition */
async function scrape(): Promise<(name: string) => number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return (name) => text.split("\n").filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `)).reduce((s, l) => s + Number(l.split(" ").pop()), 0);
}

const rowOf = (block: string, label: string): number => {
  const line = block.split("\n").find((l) => l.startsWith(label));
  if (line === undefined) throw new Error(`no "${label}" row in:\n${block}`);
  return Number(line.slice(41).trim());
};

/** vLLM's key order (serve.py result dict + save: §10.3), for --percentile-metrics ttft,tpot,itl,e2el and P99 */
const VLLM_KEYS = [
  "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate", "burstiness", "max_concurrency",
  "duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput", "output_throughput",
  "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
  ...["ttft", "tpot", "itl", "e2el"].flatMap((m) => [`mean_${m}_ms`, `median_${m}_ms`, `std_${m}_ms`, `p99_${m}_ms`]),
];

test("bench serve: vLLM's block, figures within 10% of the server's /metrics, vLLM's JSON keys", async () => {
  // timing on a shared machine: the whole run is repeated (at most 3 times) only when a mean missed 10%; the counts,
  // the block and the JSON are checked on every run, and a systematic gap still fails all three
  // each attempt draws new prompts (--seed): a repeat of the same ones would hit the prefix cache and make TTFT a few ms,
  // where the client's fixed cost alone is over 10%
  const runOnce = async (resultDir: string, seed: number) => {
    const before = await scrape();
    const r = await fennec([
      "bench", "serve", "--base-url", server.url, "--seed", String(seed), "--num-prompts", "4", "--max-concurrency", "1", "--random-input-len", "1024",
      "--random-output-len", "32", "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result", "--result-dir", resultDir,
    ], { OPENAI_API_KEY: KEY });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const after = await scrape();
    const delta = (name: string): number => after(name) - before(name);
    const block = r.stdout.slice(r.stdout.indexOf("============ Serving Benchmark Result ============"));
    expect(r.stdout).toContain("Skipping endpoint ready check.\nStarting main benchmark run...\nTraffic request rate: inf\nBurstiness factor: 1.0 (Poisson process)\nMaximum request concurrency: 1\n");
    expect(block.split("\n").slice(0, 4)).toEqual([
      "============ Serving Benchmark Result ============",
      `Successful requests:                     ${"4".padEnd(10)}`,
      `Failed requests:                         ${"0".padEnd(10)}`,
      `Maximum request concurrency:             ${"1".padEnd(10)}`,
    ]);
    for (const header of ["---------------Time to First Token----------------", "-----Time per Output Token (excl. 1st token)------", "---------------Inter-token Latency----------------", "----------------End-to-end Latency----------------"]) expect(block).toContain(`\n${header}\n`);
    // counts: exactly what the server counted
    expect(delta("vllm:request_success_total")).toBe(4);
    expect(rowOf(block, "Total input tokens:")).toBe(delta("vllm:prompt_tokens_total"));
    expect(rowOf(block, "Total generated tokens:")).toBe(delta("vllm:generation_tokens_total"));
    expect(rowOf(block, "Total generated tokens:")).toBe(4 * 32);
    // latencies: the client's means against the server's histogram means over the same run
    const serverMeanMs = (h: string): number => (1000 * delta(`${h}_sum`)) / delta(`${h}_count`);
    // the client's TTFT and E2EL also hold the HTTP round trip and the tokenizing of the 1,024-token prompt, which the
    // server's histograms leave out (vLLM stamps arrival after tokenizing too): measured 15-17 ms here, so those two may
    // differ by 10% + 25 ms; ITL has no such part and must be within 10%
    const close = (client: number, server: number, fixedMs = 0) => ({ client, server, within10: Math.abs(client - server) <= 0.1 * server + fixedMs });
    const pairs = ["TTFT:vllm:time_to_first_token_seconds", "ITL:vllm:inter_token_latency_seconds", "E2EL:vllm:e2e_request_latency_seconds"].map((p) => {
      const [short, series] = [p.slice(0, p.indexOf(":")), p.slice(p.indexOf(":") + 1)];
      return `${short} client ${rowOf(block, `Mean ${short} (ms):`).toFixed(1)} ms / server ${serverMeanMs(series).toFixed(1)} ms`;
    });
    console.log(`bench serve vs the server's /metrics: ${pairs.join(", ")}`);
    const latencies = [close(rowOf(block, "Mean TTFT (ms):"), serverMeanMs("vllm:time_to_first_token_seconds"), 25), close(rowOf(block, "Mean ITL (ms):"), serverMeanMs("vllm:inter_token_latency_seconds")), close(rowOf(block, "Mean E2EL (ms):"), serverMeanMs("vllm:e2e_request_latency_seconds"), 25)];
    return { block, delta, latencies };
  };
  let run = await runOnce(dir, 0);
  for (let attempt = 2; attempt <= 3 && !run.latencies.every((l) => l.within10); attempt++) {
    for (const file of readdirSync(dir)) rmSync(join(dir, file));
    run = await runOnce(dir, attempt);
  }
  const { block, delta, latencies } = run;
  for (const latency of latencies) expect(latency).toMatchObject({ within10: true });
  const duration = rowOf(block, "Benchmark duration (s):");
  expect(rowOf(block, "Output token throughput (tok/s):")).toBeCloseTo(delta("vllm:generation_tokens_total") / duration, -1);

  const files = readdirSync(dir);
  expect(files).toHaveLength(1);
  // vLLM's name: the served model id's last "/" part (the model file's name, since the server is named by its --model)
  expect(files[0]).toMatch(/^openai-infqps-concurrency1-smollm2-135m-q8-0-1\.gguf-\d{8}-\d{6}\.json$/);
  const json = JSON.parse(readFileSync(join(dir, files[0]!), "utf8")) as Record<string, unknown>;
  expect(Object.keys(json)).toEqual(VLLM_KEYS);
  expect(json).toMatchObject({ backend: "openai", endpoint_type: "openai", request_rate: "inf", max_concurrency: 1, completed: 4, failed: 0, total_output_tokens: 128 });
  expect(json.mean_ttft_ms).toBeCloseTo(rowOf(block, "Mean TTFT (ms):"), 1);
}, 360_000);

test("bench serve: a wrong key fails every request with the server's answer; exit 1", async () => {
  const r = await fennec(["bench", "serve", "--base-url", server.url, "--model", "m", "--num-prompts", "3", "--random-input-len", "8", "--random-output-len", "2", "--api-key", "wrong"]);
  expect(r.code).toBe(1);
  expect(r.stdout).toContain("Error 0: 401");
  expect(r.stdout).toContain(`Successful requests:                     0`);
  expect(r.stdout).toContain(`Failed requests:                         3`);
}, 60_000);
