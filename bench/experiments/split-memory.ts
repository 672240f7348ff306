/**
 * What spreading a model over several wasm32 memories costs: the same GGUF on one memory and forced onto N (a range
 * of layers each, backend/wasm/split-wasm-backend.ts), greedy prefill + decode run alternately (one, split, one, ...)
 * so both see the same machine load; best of --rounds each, and the ratio split / one. Also checks the two give the
 * same greedy ids. Both backends are loaded at once: use a model that fits in one memory twice over.
 * Usage: bun run bench/experiments/split-memory.ts -- --model F [--memories 2] [--threads 2] [--prompt 64] [--gen 32] [--rounds 3]
 */
import { parseArgs } from "node:util";
import { createBackend } from "../../src/backend/create-backend.ts";
import { planMemories, type MemoryPlan } from "../../src/backend/wasm/memory-plan.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { ensureKernels } from "../../test/kernels/ensure-kernels.ts";
import { greedyRun } from "./greedy-run.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    memories: { type: "string", default: "2" },
    threads: { type: "string", default: "2" },
    prompt: { type: "string", default: "64" },
    gen: { type: "string", default: "32" },
    rounds: { type: "string", default: "3" },
  },
});
if (values.model === undefined) {
  process.stderr.write("split-memory: --model <file.gguf> is required\n");
  process.exit(2);
}
const [numMemories, threads, promptLen, genLen, rounds] = [values.memories, values.threads, values.prompt, values.gen, values.rounds].map(Number) as [number, number, number, number, number];

await ensureKernels();
const gguf = readGguf(values.model);
if (!gguf.ok) throw new Error(gguf.error);
const model = loadModel(gguf.value);
if (!model.ok) throw new Error(model.error);
const { config, weights } = model.value;

/** Layers cut into numMemories ranges of equal count (the plan's own balancing is by bytes; here the count is forced). */
function forcedPlan(n: number): MemoryPlan {
  const firstLayer = Array.from({ length: n }, (_, m) => Math.floor((m * config.numLayers) / n));
  const layerMemory = Array.from({ length: config.numLayers }, (_, l) => firstLayer.findLastIndex((f) => f <= l));
  return { numMemories: n, layerMemory, firstLayer, weightBytes: new Array(n).fill(0), memoryBytes: 2 ** 32 };
}
const one = planMemories({ tensors: [], numLayers: config.numLayers, kvBytesPerLayer: 0, reserveBytes: 0 });
if (!one.ok) throw new Error(one.error);

const blockSize = 16;
const numBlocks = Math.ceil((promptLen + genLen) / blockSize);
const blockTable = Int32Array.from({ length: numBlocks }, (_, i) => i);
const promptIds = [1, ...Array.from({ length: promptLen - 1 }, (_, i) => 3 + ((i * 7919) % (config.vocabSize - 3)))];

async function runnerFor(plan: MemoryPlan): Promise<Runner> {
  const backend = await createBackend({ kind: "wasm", threads, memoryPlan: plan });
  const runner = new Runner(config, weights, backend);
  runner.allocateKvCache(numBlocks, blockSize);
  return runner;
}


const runners = [await runnerFor(one.value), await runnerFor(forcedPlan(numMemories))];
const best = [{ prefill: 0, decode: 0 }, { prefill: 0, decode: 0 }];
const ids: number[][] = [];
for (const r of runners) ids.push((await greedyRun(r, promptIds, genLen, blockTable)).ids); // warm-up
for (let round = 0; round < rounds; round++) {
  for (let i = 0; i < 2; i++) {
    const r = await greedyRun(runners[i]!, promptIds, genLen, blockTable);
    best[i] = { prefill: Math.max(best[i]!.prefill, r.prefill), decode: Math.max(best[i]!.decode, r.decode) };
    process.stdout.write(`round ${round + 1} ${i === 0 ? "1 memory " : `${numMemories} memories`}: prefill ${r.prefill.toFixed(1)} decode ${r.decode.toFixed(2)} tok/s\n`);
  }
}
for (const r of runners) r.dispose();
const same = ids[0]!.every((id, i) => id === ids[1]![i]);
process.stdout.write(`best of ${rounds}, ${config.name}, prompt ${promptLen}, gen ${genLen}, threads ${threads}: 1 memory prefill ${best[0]!.prefill.toFixed(1)} decode ${best[0]!.decode.toFixed(2)} tok/s; ` +
  `${numMemories} memories prefill ${best[1]!.prefill.toFixed(1)} decode ${best[1]!.decode.toFixed(2)} tok/s; ratio prefill ${(best[1]!.prefill / best[0]!.prefill).toFixed(3)}x decode ${(best[1]!.decode / best[0]!.decode).toFixed(3)}x; greedy ids ${same ? "identical" : "DIFFER"}\n`);
process.exit(0);
