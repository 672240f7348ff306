/**
 * The cost of a LoRA adapter per token (not a test): decode steps of one sequence (and of --batch sequences) at
 * position --context, timed on Runner.execute directly, with no adapter and with a make-model adapter of each rank
 * on every target (attn q/k/v/o, ffn gate/up/down), interleaved round by round so all see the same machine load.
 * Prints the median step time of each and the ratio to the base step; also a prefill chunk of --prompt tokens. With
 * --threads 1 every figure is the calling thread's CPU time (all the work runs on it), which a busy machine disturbs
 * least.
 * Usage: bun run bench/lora-cost.ts --model F [--threads 2] [--ranks 8,16,64] [--batch 8] [--context 64] [--prompt 64] [--reps 30]
 */
import { parseArgs } from "node:util";
import { cpus } from "node:os";
import { createBackend } from "../src/backend/create-backend.ts";
import { openModelGguf } from "../src/gguf/model-source.ts";
import { parseGguf } from "../src/gguf/reader.ts";
import { serializeGguf } from "../src/gguf/writer.ts";
import { parseLoraAdapter } from "../src/lora/read-lora-adapter.ts";
import { loadModel } from "../src/model/load-model.ts";
import type { SequenceChunk } from "../src/model/model-batch.ts";
import { Runner } from "../src/model/runner.ts";
import { randomLora } from "../scripts/random-lora.ts";
import { ensureKernels } from "../test/kernels/ensure-kernels.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string", default: String(cpus().length) },
    ranks: { type: "string", default: "8,16,64" },
    batch: { type: "string", default: "8" },
    context: { type: "string", default: "64" },
    prompt: { type: "string", default: "64" },
    reps: { type: "string", default: "30" },
  },
});
const [threads, batch, context, prompt, reps] = [values.threads, values.batch, values.context, values.prompt, values.reps].map(Number) as [number, number, number, number, number];
const ranks = values.ranks.split(",").map(Number);
if (values.model === undefined || ![threads, batch, context, prompt, reps, ...ranks].every((n) => Number.isInteger(n) && n > 0)) {
  process.stderr.write("usage: bun run bench/lora-cost.ts --model F [--threads 2] [--ranks 8,16,64] [--batch 8] [--context 64] [--prompt 64] [--reps 30]\n");
  process.exit(2);
}
await ensureKernels();
const gguf = await openModelGguf(values.model);
if (!gguf.ok) throw new Error(gguf.error);
const model = loadModel(gguf.value);
if (!model.ok) throw new Error(model.error);
const { config, weights } = model.value;

const runner = new Runner(config, weights, await createBackend({ kind: "wasm", threads }));
const blockSize = 16;
const blocksPerSeq = Math.ceil((context + prompt + 1) / blockSize);
runner.allocateKvCache(batch * blocksPerSeq, blockSize);
runner.enableLora(ranks.length);
ranks.forEach((rank, slot) => {
  const file = parseGguf(serializeGguf(randomLora({ architecture: config.architecture, numLayers: config.numLayers, dims: config, moe: config.moe !== undefined, rank, alpha: 2 * rank, seed: rank })), `rank-${rank}`);
  if (!file.ok) throw new Error(file.error);
  const adapter = parseLoraAdapter(file.value, { config, maxLoraRank: Math.max(...ranks) });
  if (!adapter.ok) throw new Error(adapter.error);
  runner.loadLora(slot, adapter.value);
});
const table = (i: number) => Int32Array.from({ length: blocksPerSeq }, (_, b) => i * blocksPerSeq + b);
const ids = (n: number, seed: number) => Int32Array.from({ length: n }, (_, k) => 300 + ((k * 7919 + seed) % (config.vocabSize - 300)));
for (let i = 0; i < batch; i++) {
  for (let p = 0; p < context; p += prompt) {
    await runner.execute({ sequences: [{ tokenIds: ids(Math.min(prompt, context - p), i), startPos: p, blockTable: table(i), logits: "last" }] });
  }
}

/** the cases: the base (slot -1) and each rank's slot; steps: decode x1, decode x batch, a prefill chunk */
const cases = [-1, ...ranks.map((_, i) => i)];
const kinds = {
  decode1: (slot: number): SequenceChunk[] => [{ tokenIds: ids(1, 1), startPos: context, blockTable: table(0), logits: "last", loraSlot: slot }],
  [`decode${batch}`]: (slot: number): SequenceChunk[] => Array.from({ length: batch }, (_, i) => ({ tokenIds: ids(1, i), startPos: context, blockTable: table(i), logits: "last" as const, loraSlot: slot })),
  [`prefill${prompt}`]: (slot: number): SequenceChunk[] => [{ tokenIds: ids(prompt, 5), startPos: context, blockTable: table(0), logits: "last", loraSlot: slot }],
};
/** ms now: the thread's CPU time at 1 thread, else wall time */
const clock = threads === 1 ? () => { const c = process.threadCpuUsage(); return (c.user + c.system) / 1000; } : () => performance.now();
const times = new Map<string, number[]>();
for (let rep = 0; rep < reps + 3; rep++) {
  for (const [kind, make] of Object.entries(kinds)) {
    for (const slot of cases) {
      const t = clock();
      await runner.execute({ sequences: make(slot) });
      const ms = clock() - t;
      if (rep >= 3) times.set(`${kind} ${slot}`, [...(times.get(`${kind} ${slot}`) ?? []), ms]);
    }
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`${config.name}: ${config.numLayers} layers, dim ${config.dim}, ffn ${config.hiddenDim}, ${threads} threads${threads === 1 ? " (CPU time)" : ""}, ${reps} interleaved reps (medians)`);
for (const kind of Object.keys(kinds)) {
  const base = median(times.get(`${kind} -1`)!);
  const parts = ranks.map((rank, i) => `rank ${rank} ${median(times.get(`${kind} ${i}`)!).toFixed(2)} ms (x${(median(times.get(`${kind} ${i}`)!) / base).toFixed(3)})`);
  console.log(`${kind.padEnd(10)} base ${base.toFixed(2)} ms; ${parts.join("; ")}`);
}
runner.dispose();
