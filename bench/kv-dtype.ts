/**
 * KV cache dtype bench (not a test): one decode step at a --context-token context with the f16 cache against the
 * 8-bit cache (--kv-cache-dtype fp8), alternating f16 / q8 runs --rounds times in one run (best round each), on Runner.execute (no
 * engine, no HTTP), with the attention share. The cache is filled with random K/V through backend.kvStore for every
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

/** median and best ms of one decode step at the context, and the median attention ms of a step */
async function measure(dtype: KvCacheDtype): Promise<{ median: number; best: number; attention: number; kvBytes: number }> {
  const backend = await createBackend({ kind: "wasm", threads });
  let attentionMs = 0;
  const attention = backend.attention.bind(backend);
  backend.attention = (...args) => {
    const t = performance.now();
    attention(...args);
    attentionMs += performance.now() - t;
  };
  const runner = new Runner(config, weights, backend, undefined, dtype);
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
  const step = () => runner.execute({ sequences: [{ tokenIds: Int32Array.of(300), startPos: context, blockTable: table, logits: "last" }] });
  for (let i = 0; i < 2; i++) await step();
  const times: number[] = [];
  const attn: number[] = [];
  for (let i = 0; i < reps; i++) {
    attentionMs = 0;
    const t = performance.now();
    await step();
    times.push(performance.now() - t);
    attn.push(attentionMs);
  }
  const kvBytes = runner.kvBytesPerBlock(blockSize);
  runner.dispose();
  times.sort((a, b) => a - b);
  attn.sort((a, b) => a - b);
  return { median: times[reps >> 1]!, best: times[0]!, attention: attn[reps >> 1]!, kvBytes };
}

const results: Record<KvCacheDtype, { median: number[]; best: number[]; attention: number[]; kvBytes: number }> = {
  f16: { median: [], best: [], attention: [], kvBytes: 0 },
  q8: { median: [], best: [], attention: [], kvBytes: 0 },
};
for (let r = 0; r < rounds; r++) {
  for (const dtype of ["f16", "q8"] as const) {
    const m = await measure(dtype);
    results[dtype].median.push(m.median);
    results[dtype].best.push(m.best);
    results[dtype].attention.push(m.attention);
    results[dtype].kvBytes = m.kvBytes;
    process.stderr.write(`round ${r + 1} ${dtype}: step ${m.median.toFixed(2)} ms (attention ${m.attention.toFixed(2)})\n`);
  }
}
// the best round: on a shared box a round's median moves by several times with the load
const med = (xs: number[]) => Math.min(...xs);
const f16 = results.f16;
const q8 = results.q8;
console.log(`${values.model}, ${threads} threads, one decode step at context ${context} (median of ${reps} steps, best of ${rounds} alternating rounds)`);
console.log("| KV cache | bytes per block of 16 | step ms | attention ms | step speed-up |");
console.log("|---|---|---|---|---|");
console.log(`| f16 (auto) | ${f16.kvBytes} | ${med(f16.median).toFixed(2)} | ${med(f16.attention).toFixed(2)} | 1.00x |`);
console.log(`| 8-bit (fp8) | ${q8.kvBytes} | ${med(q8.median).toFixed(2)} | ${med(q8.attention).toFixed(2)} | ${(med(f16.median) / med(q8.median)).toFixed(2)}x |`);
