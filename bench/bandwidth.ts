/**
 * Decode at the memory limit (not a test): for each model, the bytes one decode step reads (every weight its matmuls
 * stream, as the kernels hold them after repacking, plus the K and V of --context cached tokens in every layer) over
 * the step's time, against a plain v128 streaming read of a 128 MiB buffer on one thread (bench:kernels' yardstick),
 * measured in the same process between the steps. The fraction is the share of the memory limit a step reaches: 1.0
 * would be a step that only streams its bytes. Steps run on `Runner.execute` (no engine, no HTTP) at each of
 * --threads; at 1 thread the step and the stream read are both the calling thread's CPU time (the figures leave out
 * the time other processes held the core), else wall time. Best and median over --reps steps; the fraction uses the
 * best step and the best stream read (the least disturbed of each on a shared machine) and, in brackets, the medians.
 * Also prints the step's split by op (matmuls by weight shape, attention, the rest) at the last thread count.
 * Usage: bun run bench/bandwidth.ts --models F1,F2 [--threads 1,2] [--context 512] [--reps 20]
 */
import { parseArgs } from "node:util";
import { basename } from "node:path";
import { openModelGguf } from "../src/gguf/model-source.ts";
import { loadModel } from "../src/model/load-model.ts";
import { Runner } from "../src/model/runner.ts";
import { createBackend } from "../src/backend/create-backend.ts";
import { placeModel } from "../src/engine/model-placement.ts";
import type { Backend, DeviceBuffer, Weight } from "../src/backend/backend.ts";

/** the WASM backend's extras this bench reads (wasm-backend.ts) */
interface Measuring { weightBytes(w: Weight): number; streamRead(buffer: DeviceBuffer): number }

const { values } = parseArgs({
  options: {
    models: { type: "string" },
    threads: { type: "string", default: "1,2" },
    context: { type: "string", default: "512" },
    reps: { type: "string", default: "20" },
  },
});
const threadCounts = (values.threads ?? "").split(",").map(Number);
const [context, reps] = [values.context, values.reps].map(Number) as [number, number];
if (values.models === undefined || !threadCounts.every((n) => Number.isInteger(n) && n > 0) || ![context, reps].every((n) => Number.isInteger(n) && n > 0)) {
  process.stderr.write("usage: bun run bench/bandwidth.ts --models F1,F2 [--threads 1,2] [--context 512] [--reps 20]\n");
  process.exit(2);
}

const blockSize = 16;
const STREAM_BYTES = 128 * 2 ** 20;
const fmt = (x: number, d = 2) => x.toFixed(d);
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

interface Measured { readonly bestMs: number; readonly medianMs: number; readonly stream: { best: number; median: number } }

/** One model at one thread count: step times, the stream read's GB/s, the bytes per step and the split by op. */
async function measure(file: string, threads: number, split: Map<string, number> | null): Promise<Measured & { bytes: number; weightBytes: number; kvBytes: number }> {
  const gguf = await openModelGguf(file);
  if (!gguf.ok) throw new Error(gguf.error);
  const model = loadModel(gguf.value);
  if (!model.ok) throw new Error(model.error);
  const { config, weights } = model.value;
  const blocks = Math.ceil((context + 1) / blockSize);
  const placement = placeModel(config, weights, {
    maxNumSeqs: 1, maxNumBatchedTokens: 512, maxModelLen: null, blockSize, kvCacheMemoryBytes: null,
    numKvBlocksOverride: blocks, enablePrefixCaching: false, threads, device: "cpu",
  });
  if (!placement.ok) throw new Error(placement.error);
  const backend = await createBackend({ kind: "wasm", threads, memoryPlan: placement.value.plan });
  const wasm = backend as unknown as Measuring;
  if (typeof wasm.weightBytes !== "function" || typeof wasm.streamRead !== "function") throw new Error(`bandwidth: the ${backend.name} backend has no weightBytes / streamRead`);
  const clock = threads === 1 ? () => { const c = process.threadCpuUsage(); return (c.user + c.system) / 1000; } : () => performance.now();
  // the weights a step streams: every matmul's weight, counted once per step (a weight used twice is read twice)
  let stepWeightBytes = 0;
  const wrap = <K extends keyof Backend>(name: K, label: (...args: never[]) => string, weightsOf: (...args: never[]) => readonly Weight[]) => {
    const f = (backend[name] as (...args: unknown[]) => unknown).bind(backend);
    (backend as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      for (const w of (weightsOf as (...a: unknown[]) => readonly Weight[])(...args)) stepWeightBytes += wasm.weightBytes(w);
      const t = clock();
      const r = f(...args);
      if (split !== null) split.set((label as (...a: unknown[]) => string)(...args), (split.get((label as (...a: unknown[]) => string)(...args)) ?? 0) + clock() - t);
      return r;
    };
  };
  const shape = (w: Weight) => `${w.rows}x${w.cols}`;
  wrap("matmul", (_o: unknown, w: Weight) => `matmul ${shape(w)}`, (_o: unknown, w: Weight) => [w]);
  if (backend.matmulShared !== undefined) wrap("matmulShared", (_o: unknown, ws: readonly Weight[]) => `matmul ${ws.map(shape).join(" + ")}`, (_o: unknown, ws: readonly Weight[]) => ws);
  wrap("attention", () => "attention", () => []);
  const runner = new Runner(config, weights, backend);
  runner.allocateKvCache(blocks, blockSize);
  const table = Int32Array.from({ length: blocks }, (_, b) => b);
  // the cache filled with random K/V to the context (a step's work does not depend on the values; see kv-dtype.ts)
  const kvDim = config.numKvHeads * config.headDim;
  let seed = 12345;
  const random = (n: number): Float32Array => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32) * 4 - 2; });
  for (let layer = 0; layer < config.numLayers; layer++) {
    for (let p = 0; p < context; p += 512) {
      const n = Math.min(512, context - p);
      const k = backend.alloc(n * kvDim), v = backend.alloc(n * kvDim);
      backend.write(k, random(n * kvDim));
      backend.write(v, random(n * kvDim));
      backend.kvStore(layer, k, v, Int32Array.from({ length: n }, (_, i) => p + i));
      backend.free(k);
      backend.free(v);
    }
  }
  const step = () => runner.execute({ sequences: [{ tokenIds: Int32Array.of(300), startPos: context, blockTable: table, logits: "last" }] });
  const streamBuf = backend.alloc(STREAM_BYTES / 4);
  backend.write(streamBuf, new Float32Array(STREAM_BYTES / 4).fill(1)); // touch every page
  for (let i = 0; i < 3; i++) await step();
  split?.clear();
  stepWeightBytes = 0;
  await step();
  const weightBytes = stepWeightBytes;
  split?.clear();
  const times: number[] = [];
  const streams: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t = clock();
    await step();
    times.push(clock() - t);
    // 8 reads a sample (1 GiB, tens of ms): one read is near the CPU clock's tick
    const s = clock();
    for (let j = 0; j < 8; j++) wasm.streamRead(streamBuf);
    streams.push((8 * STREAM_BYTES) / ((clock() - s) / 1000) / 1e9);
  }
  if (split !== null) for (const [k, ms] of split) split.set(k, ms / reps);
  backend.free(streamBuf);
  // the attention reads every cached token's K and V once per layer (the new token's own row aside)
  const kvBytes = (runner.kvBytesPerBlock(blockSize) / blockSize) * context;
  runner.dispose();
  const t = sorted(times), s = sorted(streams);
  return { bestMs: t[0]!, medianMs: t[reps >> 1]!, stream: { best: s.at(-1)!, median: s[reps >> 1]! }, bytes: weightBytes + kvBytes, weightBytes, kvBytes };
}

const lines = [`decode at the memory limit: one step at context ${context} (KV f16), ${reps} steps each; GB/s = bytes per step / step time; stream = 1-thread v128 read of 128 MiB, 8 times a sample`,
  "| model | threads | MB per step (weights + KV) | step ms best / median | GB/s best (median) | stream GB/s best (median) | fraction best (median) |", "|---|---|---|---|---|---|---|"];
for (const file of values.models.split(",")) {
  let split: Map<string, number> | null = null;
  for (const threads of threadCounts) {
    split = threads === threadCounts.at(-1) ? new Map() : null;
    const m = await measure(file, threads, split);
    const rate = (ms: number) => m.bytes / (ms / 1000) / 1e9;
    lines.push(`| ${basename(file, ".gguf")} | ${threads} | ${fmt(m.bytes / 1e6, 1)} (${fmt(m.weightBytes / 1e6, 1)} + ${fmt(m.kvBytes / 1e6, 1)}) | ${fmt(m.bestMs)} / ${fmt(m.medianMs)} | ${fmt(rate(m.bestMs))} (${fmt(rate(m.medianMs))}) | ${fmt(m.stream.best)} (${fmt(m.stream.median)}) | ${fmt(rate(m.bestMs) / m.stream.best)} (${fmt(rate(m.medianMs) / m.stream.median)}) |`);
    console.log(lines.at(-1));
  }
  if (split !== null) {
    const total = [...split.values()].reduce((a, b) => a + b, 0);
    console.log(`  ${basename(file)} at ${threadCounts.at(-1)} threads, mean ms per step by op (${fmt(total)} in these ops):`);
    for (const [key, ms] of [...split].sort((a, b) => b[1] - a[1])) console.log(`    ${key.padEnd(36)} ${fmt(ms).padStart(8)}`);
  }
}
console.log(`\n${lines.join("\n")}`);
process.exit(0);
