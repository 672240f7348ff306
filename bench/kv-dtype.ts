/**
 * KV cache dtype bench (not a test): one decode step at a --context-token context with the f16 cache against the
 * 8-bit cache (--kv-cache-dtype fp8), both runners side by side in one process, their steps alternating (reps x
 * rounds steps each, medians), on Runner.execute (no engine, no HTTP), with the attention share. The cache is filled with random K/V through backend.kvStore for every
 * layer (the step's work does not depend on the values; a real prefill of 4k tokens would take minutes here).
 * Usage: bun run bench/kv-dtype.ts --model F [--threads 2] [--context 4096] [--reps 10] [--rounds 2]
 */
import { parseArgs } from "node:util";
import { cpus } from "node:os";
import { openModelGguf } from "../src/gguf/model-source.ts";
import { loadModel } from "../src/model/load-model.ts";
import { Runner } from "../src/model/runner.ts";
import { createBackend } from "../src/backend/create-backend.ts";
import type { KvCacheDtype } from "../src/backend/backend.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string", default: String(cpus().length) },
    context: { type: "string", default: "4096" },
    reps: { type: "string", default: "10" },
    rounds: { type: "string", default: "2" },
  },
});
const [threads, context, reps, rounds] = [values.threads, values.context, values.reps, values.rounds].map(Number) as [number, number, number, number];
if (values.model === undefined || ![threads, context, reps, rounds].every((n) => Number.isInteger(n) && n > 0)) {
  process.stderr.write("usage: bun run bench/kv-dtype.ts --model F [--threads 2] [--context 4096] [--reps 10] [--rounds 2]\n");
  process.exit(2);
}
const gguf = await openModelGguf(values.model);
if (!gguf.ok) throw new Error(gguf.error);
const model = loadModel(gguf.value);
if (!model.ok) throw new Error(model.error);
const { config, weights } = model.value;
if (context + 1 > config.contextLength) throw new Error(`--context ${context} does not fit the model's context ${config.contextLength}`);
const blockSize = 16;
const numBlocks = Math.ceil((context + 1) / blockSize);
const table = Int32Array.from({ length: numBlocks }, (_, b) => b);

interface Timed {
  readonly runner: Runner;
  readonly step: () => Promise<unknown>;
  attentionMs: number;
}

/** A runner with the cache filled to the context, and one decode step at that context. */
async function prepare(dtype: KvCacheDtype): Promise<Timed> {
  const backend = await createBackend({ kind: "wasm", threads });
  const runner = new Runner(config, weights, backend, undefined, dtype);
  const timed: Timed = { runner, attentionMs: 0, step: () => runner.execute({ sequences: [{ tokenIds: Int32Array.of(300), startPos: context, blockTable: table, logits: "last" }] }) };
  const attention = backend.attention.bind(backend);
  backend.attention = (...args) => {
    const t = performance.now();
    attention(...args);
    timed.attentionMs += performance.now() - t;
  };
  runner.allocateKvCache(numBlocks, blockSize);
  const kvDim = config.numKvHeads * config.headDim;
  const chunk = 512;
  let seed = 12345;
  const random = (n: number): Float32Array => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32) * 4 - 2; });
  for (let layer = 0; layer < config.numLayers; layer++) {
    for (let p = 0; p < context; p += chunk) {
      const n = Math.min(chunk, context - p);
      const k = backend.alloc(n * kvDim);
      const v = backend.alloc(n * kvDim);
      backend.write(k, random(n * kvDim));
      backend.write(v, random(n * kvDim));
      backend.kvStore(layer, k, v, Int32Array.from({ length: n }, (_, i) => p + i));
      backend.free(k);
      backend.free(v);
    }
  }
  for (let i = 0; i < 2; i++) await timed.step();
  return timed;
}

// both caches side by side; their steps alternate one by one, so a change in the box's load hits both alike
const runs: Record<KvCacheDtype, Timed> = { f16: await prepare("f16"), q8: await prepare("q8") };
const steps: Record<KvCacheDtype, number[]> = { f16: [], q8: [] };
const attn: Record<KvCacheDtype, number[]> = { f16: [], q8: [] };
for (let i = 0; i < reps * rounds; i++) {
  for (const dtype of (i % 2 === 0 ? ["f16", "q8"] : ["q8", "f16"]) as KvCacheDtype[]) {
    const r = runs[dtype];
    r.attentionMs = 0;
    const t = performance.now();
    await r.step();
    steps[dtype].push(performance.now() - t);
    attn[dtype].push(r.attentionMs);
  }
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const bytes = (d: KvCacheDtype) => runs[d].runner.kvBytesPerBlock(blockSize);
console.log(`${values.model}, ${threads} threads, one decode step at context ${context} (medians of ${reps * rounds} steps each, f16 and 8-bit steps alternating)`);
console.log("| KV cache | bytes per block of 16 | step ms | attention ms | step speed-up | attention speed-up |");
console.log("|---|---|---|---|---|---|");
console.log(`| f16 (auto) | ${bytes("f16")} | ${med(steps.f16).toFixed(2)} | ${med(attn.f16).toFixed(2)} | 1.00x | 1.00x |`);
console.log(`| 8-bit (fp8) | ${bytes("q8")} | ${med(steps.q8).toFixed(2)} | ${med(attn.q8).toFixed(2)} | ${(med(steps.f16) / med(steps.q8)).toFixed(2)}x | ${(med(attn.f16) / med(attn.q8)).toFixed(2)}x |`);
runs.f16.runner.dispose();
runs.q8.runner.dispose();
