/**
 * KV offload tier bench (not a test): TTFT of a --prefix-token prompt whose prefix was evicted from the primary pool by
 * other traffic, side by side in one run: recomputed (no tier), loaded from host memory (SimpleCPUOffloadConnector,
 * cpu), loaded from disk (disk backend, O_DIRECT unless --page-cache). EngineCore with the real model runner in-process
 * (no HTTP, no Worker), greedy, one output token; the outputs of the three are checked equal.
 * Usage: bun run bench/kv-offload.ts --model F [--threads 2] [--prefix 2048] [--reps 1] [--disk-dir /tmp]
 */
import { parseArgs } from "node:util";
import { cpus, tmpdir } from "node:os";
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { openModelGguf } from "../src/gguf/model-source.ts";
import { loadModel } from "../src/model/load-model.ts";
import { Runner } from "../src/model/runner.ts";
import { createBackend } from "../src/backend/create-backend.ts";
import { EngineCore } from "../src/engine/engine-core.ts";
import { parseKvTransfer, type KvOffloadConfig } from "../src/config/kv-transfer-config.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../src/engine/sampling-params.ts";
import type { EngineRequest } from "../src/engine/protocol.ts";
import { nowMs } from "../src/util/clock.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string", default: String(cpus().length) },
    prefix: { type: "string", default: "2048" },
    reps: { type: "string", default: "1" },
    "disk-dir": { type: "string", default: tmpdir() },
    "page-cache": { type: "boolean", default: false },
  },
});
const [threads, prefixLen, reps] = [values.threads, values.prefix, values.reps].map(Number) as [number, number, number];
if (values.model === undefined || ![threads, prefixLen, reps].every((n) => Number.isInteger(n) && n > 0)) {
  process.stderr.write("usage: bun run bench/kv-offload.ts --model F [--threads 2] [--prefix 2048] [--reps 1] [--disk-dir /tmp] [--page-cache]\n");
  process.exit(2);
}

const gguf = await openModelGguf(values.model);
if (!gguf.ok) throw new Error(gguf.error);
const model = loadModel(gguf.value);
if (!model.ok) throw new Error(model.error);
const config = model.value.config;
if (prefixLen + 2 > config.contextLength) throw new Error(`--prefix ${prefixLen} does not fit the model's context ${config.contextLength}`);
const backend = await createBackend({ kind: "wasm", threads });
const runner = new Runner(config, model.value.weights, backend);
const blockSize = 16;
// room for one long prompt: the second long prompt evicts every block of the first
const numBlocks = Math.ceil((prefixLen + 2) / blockSize);
const diskDir = mkdtempSync(join(values["disk-dir"], "fennec-kv-bench-"));

function tier(extra: Record<string, unknown> | null): KvOffloadConfig | null {
  if (extra === null) return null;
  const parsed = parseKvTransfer({
    kvOffloadingSize: null, kvOffloadingBackend: "native", useSimpleKvOffload: false, enablePrefixCaching: true,
    kvTransferConfig: JSON.stringify({ kv_connector: "SimpleCPUOffloadConnector", kv_role: "kv_both", kv_connector_extra_config: extra }),
  }, blockSize);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value.config;
}

const ids = (n: number, seed: number): number[] => Array.from({ length: n }, (_, k) => 300 + ((k * 7919 + seed * 104729) % (config.vocabSize - 300)));
const req = (id: string, tokens: number[]): EngineRequest => ({
  requestId: id, promptTokenIds: tokens, sampling: { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, maxTokens: 1 }, arrivalMs: nowMs(),
});

/** Runs one request to its first token; its TTFT (ms) and the token. */
async function ttft(engine: EngineCore, r: EngineRequest): Promise<{ ms: number; token: number; cached: number }> {
  const error = engine.addRequest(r);
  if (error) throw new Error(error.message);
  for (;;) {
    const step = await engine.step();
    const d = step?.deltas.find((x) => x.requestId === r.requestId);
    if (d) {
      while (engine.hasWork()) await engine.step();
      await engine.offload?.settle();
      return { ms: d.times.firstTokenMs! - r.arrivalMs, token: d.newTokenIds[0]!, cached: d.numCachedTokens };
    }
  }
}

const modes: [string, Record<string, unknown> | null][] = [
  ["recompute (no tier)", null],
  ["host memory (cpu)", { cpu_bytes_to_use: 2 ** 30 }],
  [`disk (${values["page-cache"] ? "page cache" : "O_DIRECT"})`, { kv_offload_backend: "disk", disk_path: join(diskDir, "kv"), disk_capacity_bytes: 2 ** 30, use_page_cache: values["page-cache"] }],
];
const results = new Map<string, number[]>(modes.map(([m]) => [m, []]));
const tokens = new Set<number>();
try {
  for (let rep = 0; rep < reps; rep++) {
    for (const [mode, extra] of modes) {
      const engine = new EngineCore(runner, { maxNumSeqs: 4, maxNumBatchedTokens: 512, maxModelLen: config.contextLength, blockSize, numBlocks, enablePrefixCaching: true, kvOffload: tier(extra) }, 0, nowMs, 1);
      const prompt = [...ids(prefixLen, rep + 1), 7];
      await ttft(engine, req("first", prompt));
      await ttft(engine, req("evict", [...ids(prefixLen, rep + 1000), 9]));
      const again = await ttft(engine, req("again", prompt));
      const expectCached = extra === null ? 0 : Math.floor(prefixLen / blockSize) * blockSize;
      if (again.cached !== expectCached) throw new Error(`${mode}: ${again.cached} cached tokens, expected ${expectCached}`);
      results.get(mode)!.push(again.ms);
      tokens.add(again.token);
      engine.dispose();
      process.stderr.write(`rep ${rep + 1} ${mode}: TTFT ${again.ms.toFixed(1)} ms\n`);
    }
  }
} finally {
  rmSync(diskDir, { recursive: true, force: true });
}
if (tokens.size !== 1) throw new Error(`the three modes gave different tokens: ${[...tokens].join(", ")}`);
const best = (m: string): number => Math.min(...results.get(m)!);
const recompute = best(modes[0]![0]);
console.log(`${values.model}, ${backend.name}, ${threads} threads, prefix ${prefixLen} tokens evicted then requested again (TTFT, best of ${reps})`);
console.log("| prefix from | TTFT ms | speed-up vs recompute |");
console.log("|---|---|---|");
for (const [m] of modes) console.log(`| ${m} | ${best(m).toFixed(1)} | ${(recompute / best(m)).toFixed(1)}x |`);
runner.dispose();
