/**
 * What transparent huge pages give the kernels' memories (src/backend/wasm/huge-pages.ts): the same GGUF loaded twice
 * in one process, on memories with huge pages and with FENNEC_HUGE_PAGES=0 (4 KiB pages), placed over as many wasm32
 * memories as the server would; greedy prefill + decode run alternately (4 KiB, huge, 4 KiB, ...) so both see the same
 * machine load; best of --rounds each, the ratio huge / 4 KiB, and whether the greedy ids agree. Needs room for the
 * model twice (an 8B q4_k_m: about 11 GB).
 * Usage: bun run bench/experiments/huge-pages.ts -- --model F [--threads 2] [--prompt 16] [--gen 16] [--rounds 3]
 */
import { parseArgs } from "node:util";
import { readFileSync } from "node:fs";
import { createBackend } from "../../src/backend/create-backend.ts";
import { placeModel } from "../../src/engine/model-placement.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { ensureKernels } from "../../test/kernels/ensure-kernels.ts";
import { greedyRun } from "./greedy-run.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string", default: "2" },
    prompt: { type: "string", default: "16" },
    gen: { type: "string", default: "16" },
    rounds: { type: "string", default: "3" },
  },
});
if (values.model === undefined) {
  process.stderr.write("huge-pages: --model <file.gguf> is required\n");
  process.exit(2);
}
const [threads, promptLen, genLen, rounds] = [values.threads, values.prompt, values.gen, values.rounds].map(Number) as [number, number, number, number];

await ensureKernels();
const gguf = readGguf(values.model);
if (!gguf.ok) throw new Error(gguf.error);
const model = loadModel(gguf.value);
if (!model.ok) throw new Error(model.error);
const { config, weights } = model.value;
const blockSize = 16;
const numBlocks = Math.ceil((promptLen + genLen) / blockSize);
const blockTable = Int32Array.from({ length: numBlocks }, (_, i) => i);
const promptIds = [1, ...Array.from({ length: promptLen - 1 }, (_, i) => 3 + ((i * 7919) % (config.vocabSize - 3)))];
const placement = placeModel(config, weights, {
  maxNumSeqs: 1, maxNumBatchedTokens: promptLen, maxModelLen: null, blockSize, kvCacheMemoryBytes: null, numKvBlocksOverride: numBlocks,
  enablePrefixCaching: false, threads, device: "cpu",
});
if (!placement.ok) throw new Error(placement.error);
const plan = placement.value.plan;
const anonHuge = () => Number(/AnonHugePages:\s+(\d+)/.exec(readFileSync("/proc/self/smaps_rollup", "utf8"))?.[1] ?? 0) / 1024 ** 2;

async function runnerFor(hugePages: boolean): Promise<Runner> {
  const before = anonHuge();
  if (hugePages) delete process.env.FENNEC_HUGE_PAGES;
  else process.env.FENNEC_HUGE_PAGES = "0";
  const t0 = performance.now();
  const backend = await createBackend({ kind: "wasm", threads, memoryPlan: plan });
  const runner = new Runner(config, weights, backend);
  runner.allocateKvCache(numBlocks, blockSize);
  process.stdout.write(`${hugePages ? "huge pages" : "4 KiB pages"}: loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s, ${(anonHuge() - before).toFixed(2)} GiB more in huge pages\n`);
  return runner;
}


const runners = [await runnerFor(false), await runnerFor(true)];
const names = ["4 KiB pages", "huge pages "];
const best = [{ prefill: 0, decode: 0 }, { prefill: 0, decode: 0 }];
const ids: number[][] = [];
for (const r of runners) ids.push((await greedyRun(r, promptIds, genLen, blockTable)).ids); // warm-up
for (let round = 0; round < rounds; round++) {
  for (let i = 0; i < 2; i++) {
    const r = await greedyRun(runners[i]!, promptIds, genLen, blockTable);
    best[i] = { prefill: Math.max(best[i]!.prefill, r.prefill), decode: Math.max(best[i]!.decode, r.decode) };
    process.stdout.write(`round ${round + 1} ${names[i]}: prefill ${r.prefill.toFixed(2)} decode ${r.decode.toFixed(2)} tok/s\n`);
  }
}
for (const r of runners) r.dispose();
const same = ids[0]!.every((id, i) => id === ids[1]![i]);
process.stdout.write(`best of ${rounds}, ${config.name}, prompt ${promptLen}, gen ${genLen}, threads ${threads}, ${plan.numMemories} memories: ` +
  `4 KiB pages prefill ${best[0]!.prefill.toFixed(2)} decode ${best[0]!.decode.toFixed(2)} tok/s; huge pages prefill ${best[1]!.prefill.toFixed(2)} decode ${best[1]!.decode.toFixed(2)} tok/s; ` +
  `ratio prefill ${(best[1]!.prefill / best[0]!.prefill).toFixed(3)}x decode ${(best[1]!.decode / best[0]!.decode).toFixed(3)}x; greedy ids ${same ? "identical" : "DIFFER"}\n`);
process.exit(0);
