/**
 * Black box: `fennec serve` (embedded stories260K) with a disk offload tier and a small primary KV pool. A prefix
 * evicted by other traffic comes back from the tier (cached_tokens, load metrics, external prefix hits) with the same
 * greedy text; the disk file is replaced at start-up, gone after a clean shutdown, and after a crash the next server
 * reads nothing of it.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomInt, rng } from "../helpers/prng.ts";
import { parseExposition, sampleValue } from "../metrics/exposition.ts";

const CLI = join(import.meta.dir, "../../src/cli.ts");
const dir = mkdtempSync(join(tmpdir(), "fennec-offload-serve-"));
const diskPath = join(dir, "tier", "kv");
const file = `${diskPath}.rank_0`;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// stories260K: 640 bytes of f16 KV per token, so 40 blocks of 16 tokens; the tier holds 200 blocks
const ARGS = [
  "serve", "--port", "0", "--threads", "1", "--kv-cache-memory", String(40 * 16 * 640), "--enable-prompt-tokens-details",
  "--kv-transfer-config", JSON.stringify({
    kv_connector: "SimpleCPUOffloadConnector", kv_role: "kv_both",
    kv_connector_extra_config: { kv_offload_backend: "disk", disk_path: diskPath, disk_capacity_bytes: 200 * 16 * 640, use_page_cache: true },
  }),
];

interface Server { proc: ReturnType<typeof Bun.spawn>; base: string; log: () => string }

async function start(args: readonly string[] = ARGS): Promise<Server> {
  const proc = Bun.spawn([process.execPath, CLI, ...args], { stdout: "ignore", stderr: "pipe" });
  const reader = (proc.stderr as ReadableStream<Uint8Array>).getReader();
  let log = "";
  let base = "";
  const deadline = Date.now() + 60_000; // a loaded CI box can take a while to load the model
  while (Date.now() < deadline && !base) {
    const { value, done } = await reader.read();
    if (done) break;
    log += new TextDecoder().decode(value);
    base = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(log)?.[1] ?? "";
  }
  if (!base) throw new Error(`fennec serve did not start: ${log}`);
  void (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      log += new TextDecoder().decode(value);
    }
  })();
  return { proc, base, log: () => log };
}

const WORDS = "once upon a time there was a little girl named lily she loved to play in the park with her dog max one day they found a big red ball under a tree".split(" ");
function story(seed: number, numWords: number): string {
  const random = rng(seed);
  const out: string[] = [];
  for (let i = 0; i < numWords; i++) out.push(WORDS[randomInt(random, WORDS.length)]!);
  return out.join(" ");
}

async function complete(base: string, prompt: string): Promise<{ text: string; promptTokens: number; cached: number }> {
  const res = await fetch(`${base}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt, max_tokens: 8, temperature: 0 }),
  });
  const body = await res.json() as { choices: { text: string }[]; usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens: number } } };
  expect(res.status).toBe(200);
  return { text: body.choices[0]!.text, promptTokens: body.usage.prompt_tokens, cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0 };
}

async function metric(base: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  return sampleValue(parseExposition(await (await fetch(`${base}/metrics`)).text()), name, labels) ?? NaN;
}

const PREFIX = story(1, 150);

describe("serve with a disk offload tier", () => {
  test("an evicted prefix is loaded back; the file is replaced at start-up and gone after shutdown", async () => {
    mkdirSync(join(dir, "tier"), { recursive: true });
    writeFileSync(file, "stale bytes from an earlier process");
    const s = await start();
    try {
      // a new, empty file of the tier's size (ext4 may hand the unlinked file's inode number out again)
      expect(statSync(file).size).toBe(200 * 16 * 640);
      expect(readFileSync(file).every((b) => b === 0)).toBe(true);
      expect(s.log()).toContain("SimpleCPUOffloadConnector: role=kv_both");
      expect(await metric(s.base, "vllm:simple_kv_offload_info", { backend: "disk", page_cache: "true", lazy_offload: "false", capacity_blocks: "200" })).toBe(1);
      expect(await metric(s.base, "vllm:simple_kv_offload_save_outcomes_total", { outcome: "dropped_request_gone" })).toBe(0);
      expect(await metric(s.base, "vllm:cache_config_info", { num_cpu_blocks: "200", num_gpu_blocks: "40" })).toBe(1);
      const first = await complete(s.base, PREFIX);
      expect(first.promptTokens).toBeGreaterThan(200);
      expect(first.promptTokens).toBeLessThan(600);
      for (let i = 0; i < 3; i++) await complete(s.base, story(10 + i, 150));
      const again = await complete(s.base, PREFIX);
      expect(again.text).toBe(first.text);
      expect(again.cached).toBe(Math.floor((again.promptTokens - 1) / 16) * 16);
      expect(await metric(s.base, "vllm:simple_kv_offload_load_blocks_total", { phase: "completed" })).toBeGreaterThan(0);
      expect(await metric(s.base, "vllm:external_prefix_cache_hits_total")).toBeGreaterThan(0);
      expect(await metric(s.base, "vllm:prompt_tokens_by_source_total", { source: "external_kv_transfer" })).toBeGreaterThan(0);
      expect(await metric(s.base, "vllm:simple_kv_offload_save_outcomes_total", { outcome: "stored" })).toBeGreaterThan(0);
    } finally {
      s.proc.kill("SIGTERM");
      await s.proc.exited;
    }
    expect(existsSync(file)).toBe(false);
  }, 90_000);

  test("after a crash the next server unlinks the old file and loads nothing from it", async () => {
    const s1 = await start();
    await complete(s1.base, PREFIX);
    for (let i = 0; i < 3; i++) await complete(s1.base, story(10 + i, 150));
    s1.proc.kill("SIGKILL");
    await s1.proc.exited;
    expect(existsSync(file)).toBe(true); // a crash cannot unlink it
    expect(readFileSync(file).some((b) => b !== 0)).toBe(true);
    const s2 = await start();
    try {
      expect(readFileSync(file).every((b) => b === 0)).toBe(true);
      const again = await complete(s2.base, PREFIX);
      expect(again.cached).toBe(0);
      expect(await metric(s2.base, "vllm:simple_kv_offload_load_blocks_total", { phase: "issued" })).toBe(0);
    } finally {
      s2.proc.kill("SIGTERM");
      await s2.proc.exited;
    }
    expect(existsSync(file)).toBe(false);
  }, 90_000);
});

describe("serve with --kv-cache-dtype fp8", () => {
  test("the same --kv-cache-memory holds 64/36 times the blocks, shown on vllm:cache_config_info; generation works", async () => {
    const memory = String(40 * 16 * 640);
    const s = await start(["serve", "--port", "0", "--threads", "1", "--kv-cache-memory", memory, "--kv-cache-dtype", "fp8"]);
    try {
      expect(s.log()).toContain("Using fp8 data type to store kv cache");
      // stories260K: 5 layers x K|V x (32 int8 + a 4-byte scale) = 360 bytes a token against 640 with f16
      expect(await metric(s.base, "vllm:cache_config_info", { cache_dtype: "fp8", num_gpu_blocks: String(Math.floor((40 * 16 * 640) / (16 * 360))) })).toBe(1);
      const out = await complete(s.base, PREFIX);
      expect(out.text.length).toBeGreaterThan(0);
    } finally {
      s.proc.kill("SIGTERM");
      await s.proc.exited;
    }
  }, 60_000);
});
