/**
 * Model-runner step times (not a test): one prompt chunk, then decode steps at 1 and at --batch sequences, all at
 * position --context, timed on `Runner.execute` directly (no engine, no HTTP), with the attention share. Shows what a
 * batched token costs against a lone one, the figure that bounds bench:throughput's ratio.
 * Also prints where the prompt chunk's time goes, per backend op (matmuls by weight shape [rows x cols]): the split
 * that says whether prefill is bound by the GEMM or by attention. With --threads 1 every figure is the calling thread's
 * CPU time (all the work runs on it): on a shared machine that leaves out the time other processes held the core.
 * Usage: bun run bench/step-time.ts --model F [--threads 2] [--batch 8] [--context 96] [--prompt 64] [--reps 10] [--warmup 3]
 */
import { parseArgs } from "node:util";
import { cpus } from "node:os";
import { openModelGguf } from "../src/gguf/model-source.ts";
import { loadModel } from "../src/model/load-model.ts";
import { Runner } from "../src/model/runner.ts";
import { createBackend } from "../src/backend/create-backend.ts";
import { placeModel } from "../src/engine/model-placement.ts";
import type { ModelBatch } from "../src/model/model-batch.ts";
import type { Backend, Weight } from "../src/backend/backend.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string", default: String(cpus().length) },
    batch: { type: "string", default: "8" },
    context: { type: "string", default: "96" },
    prompt: { type: "string", default: "64" },
    reps: { type: "string", default: "10" },
    warmup: { type: "string", default: "3" },
  },
});
const [threads, batch, context, prompt, reps, warmup] = [values.threads, values.batch, values.context, values.prompt, values.reps, values.warmup].map(Number) as [number, number, number, number, number, number];
if (values.model === undefined || ![threads, batch, context, prompt, reps].every((n) => Number.isInteger(n) && n > 0) || !(Number.isInteger(warmup) && warmup >= 0) || prompt > context) {
  process.stderr.write("usage: bun run bench/step-time.ts --model F [--threads 2] [--batch 8] [--context 96] [--prompt 64 (at most --context)] [--reps 10] [--warmup 3]\n");
  process.exit(2);
}

const gguf = await openModelGguf(values.model);
if (!gguf.ok) throw new Error(gguf.error);
const model = loadModel(gguf.value);
if (!model.ok) throw new Error(model.error);
// a model larger than one wasm32 memory goes over several, as the server places it (with this run's KV blocks)
const numSeqBlocks = (batch + 1) * Math.ceil((context + 1) / 16);
const placement = placeModel(model.value.config, model.value.weights, {
  maxNumSeqs: batch + 1, maxNumBatchedTokens: Math.max(prompt, batch), maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: null,
  numKvBlocksOverride: numSeqBlocks, enablePrefixCaching: false, threads, device: "cpu",
});
if (!placement.ok) throw new Error(placement.error);
const backend = await createBackend({ kind: "wasm", threads, memoryPlan: placement.value.plan });
/** ms now: the thread's CPU time at 1 thread (see above), else wall time */
const clock = threads === 1 ? () => { const c = process.threadCpuUsage(); return (c.user + c.system) / 1000; } : () => performance.now();
let attentionMs = 0;
/** ms per op label while `splitting` (the timed prompt chunks) */
const split = new Map<string, number>();
let splitting = false;
const shape = (w: Weight) => `${w.rows}x${w.cols}`;
const label: Partial<Record<keyof Backend, (...args: never[]) => string>> = {
  matmul: (_o: unknown, w: Weight) => `matmul ${shape(w)}`,
  matmulShared: (_o: unknown, ws: readonly Weight[]) => `matmul ${ws.map(shape).join(" + ")}`,
};
/** ms of the kernel calls timed inside the backend op now running (taken out of that op's figure) */
let innerMs = 0;
for (const name of ["embed", "rmsNorm", "matmul", "matmulShared", "addBias", "rope", "kvStore", "attention", "siluMul", "add", "gatherRows"] as const) {
  const f = backend[name] as ((...args: unknown[]) => unknown) | undefined;
  if (f === undefined) continue;
  const bound = f.bind(backend);
  const labelOf = label[name] as ((...args: unknown[]) => string) | undefined;
  (backend as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
    innerMs = 0;
    const t = clock();
    const r = bound(...args);
    const ms = clock() - t - innerMs;
    if (name === "attention") attentionMs += ms;
    if (splitting) {
      const key = labelOf?.(...args) ?? name;
      split.set(key, (split.get(key) ?? 0) + ms);
    }
    return r;
  };
}
// the matmuls' activation quantization (on the calling thread) as its own line: the wasm backend's kernel calls
// exports (a frozen object, so the backend gets a copy with these three wrapped)
const holder = backend as unknown as { k?: Record<string, (...args: number[]) => unknown> };
const kernels = holder.k === undefined ? undefined : { ...holder.k };
if (kernels !== undefined) holder.k = kernels;
for (const name of ["quantize_q8", "quantize_q8k", "widen_q8", "splat_q8", "splat_q8_i16", "quad_sums"]) {
  const f = kernels?.[name];
  if (kernels === undefined || f === undefined) continue;
  kernels[name] = (...args: number[]) => {
    const t = clock();
    const r = f(...args);
    const ms = clock() - t;
    innerMs += ms;
    if (splitting) split.set("quantize activations", (split.get("quantize activations") ?? 0) + ms);
    return r;
  };
}
const runner = new Runner(model.value.config, model.value.weights, backend);
const blockSize = 16;
const blocksPerSeq = Math.ceil((context + 1) / blockSize);
runner.allocateKvCache((batch + 1) * blocksPerSeq, blockSize);
const table = (i: number) => Int32Array.from({ length: blocksPerSeq }, (_, b) => i * blocksPerSeq + b);
const ids = (n: number, seed: number) => Int32Array.from({ length: n }, (_, k) => 300 + ((k * 7919 + seed) % (model.value.config.vocabSize - 300)));

// fill every sequence's cache up to the context position, in chunks of the prompt size
for (let i = 0; i <= batch; i++) {
  for (let p = 0; p < context; p += prompt) {
    await runner.execute({ sequences: [{ tokenIds: ids(Math.min(prompt, context - p), i), startPos: p, blockTable: table(i), logits: "last" }] });
  }
}

/** best and median of reps timed calls (after 3 warm-up calls), and the mean attention time per call */
async function time(make: () => ModelBatch, splitOps = false): Promise<{ best: number; median: number; attention: number }> {
  for (let i = 0; i < warmup; i++) await runner.execute(make());
  const times: number[] = [];
  attentionMs = 0;
  splitting = splitOps;
  for (let i = 0; i < reps; i++) {
    const t = clock();
    await runner.execute(make());
    times.push(clock() - t);
  }
  splitting = false;
  times.sort((a, b) => a - b);
  return { best: times[0]!, median: times[reps >> 1]!, attention: attentionMs / reps };
}

const decode = (n: number) => (): ModelBatch => ({
  sequences: Array.from({ length: n }, (_, i) => ({ tokenIds: ids(1, i), startPos: context, blockTable: table(i), logits: "last" as const })),
});
const chunk = await time(() => ({ sequences: [{ tokenIds: ids(prompt, 99), startPos: 0, blockTable: table(batch), logits: "last" }] }), true);
const one = await time(decode(1));
const many = await time(decode(batch));
const fmt = (x: number) => x.toFixed(2);
console.log(`${values.model}, ${backend.name}, ${threads} threads, context ${context} (ms${threads === 1 ? " of thread CPU time" : ""}: best / median; attention: mean ms per step)`);
console.log(`prompt chunk of ${prompt}: ${fmt(chunk.best)} / ${fmt(chunk.median)} per step = ${fmt(chunk.best / prompt)} per token; attention ${fmt(chunk.attention)}`);
const splitTotal = [...split.values()].reduce((a, b) => a + b, 0);
console.log(`prompt chunk of ${prompt}, mean ms per chunk by op (${fmt(splitTotal / reps)} in ops):`);
for (const [key, ms] of [...split].sort((a, b) => b[1] - a[1])) {
  console.log(`  ${key.padEnd(40)} ${fmt(ms / reps).padStart(9)}  ${((100 * ms) / splitTotal).toFixed(1).padStart(5)}%`);
}
console.log(`decode, 1 sequence: ${fmt(one.best)} / ${fmt(one.median)} per step; attention ${fmt(one.attention)}`);
console.log(`decode, ${batch} sequences: ${fmt(many.best)} / ${fmt(many.median)} per step = ${fmt(many.best / batch)} per token; attention ${fmt(many.attention)}`);
console.log(`a batched token costs ${fmt(many.best / batch / one.best)} of a lone one`);
runner.dispose();
process.exit(0);
