/**
 * fennec vs llama.cpp on the same GGUF, same thread count, same prompt ids, greedy, run alternately (fennec, llama.cpp,
 * fennec, ...) so both see the same machine load. Prints prefill and decode tokens/s of both and the ratios
 * fennec / llama.cpp (best of --rounds for each figure: on shared machines the best run is the least disturbed one).
 * --cpu-time rates both sides by the process's CPU time (user + system, every thread) instead of wall time: at
 * --threads 1 on a shared machine that leaves out the time other processes held the core (llama.cpp's evaluation
 * runs on its own thread of this process while the JS thread waits idle); above 1 thread spinning threads count too.
 * Usage: bun run bench:compare -- --model F [--threads T] [--prompt 128] [--gen 64] [--rounds 2] [--json] [--device cpu|webgpu] [--cpu-time]
 * --json prints {"fennec":{"prefill_tps":..,"decode_tps":..},"llamacpp":{...},"ratio":{"prefill":..,"decode":..}}.
 */
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel, type Token } from "node-llama-cpp";
import { createBackend } from "../src/backend/create-backend.ts";
import { placeModel } from "../src/engine/model-placement.ts";
import { readGguf } from "../src/gguf/reader.ts";
import { argmax } from "../src/model/decode-loop.ts";
import { loadModel } from "../src/model/load-model.ts";
import { Runner } from "../src/model/runner.ts";
import { ensureKernels } from "../test/kernels/ensure-kernels.ts";

interface Rates {
  prefill_tps: number;
  decode_tps: number;
}

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string", default: String(navigator.hardwareConcurrency) },
    prompt: { type: "string", default: "128" },
    gen: { type: "string", default: "64" },
    rounds: { type: "string", default: "2" },
    json: { type: "boolean", default: false },
    device: { type: "string", default: "cpu" },
    "cpu-time": { type: "boolean", default: false },
  },
});

function fail(message: string): never {
  process.stderr.write(`bench:compare: ${message}\n`);
  process.exit(2);
}

if (values.model === undefined) fail("--model <file.gguf> is required");
const modelPath = values.model;
const threads = Number(values.threads);
const promptLen = Number(values.prompt);
const genLen = Number(values.gen);
const rounds = Number(values.rounds);
if (!(threads >= 1 && promptLen >= 1 && genLen >= 2 && rounds >= 1)) fail("--threads, --prompt, --rounds must be >= 1 and --gen >= 2");
if (values.device !== "cpu" && values.device !== "webgpu") fail(`--device ${values.device}: expected cpu or webgpu`);
const log = (line: string) => {
  if (!values.json) process.stdout.write(`${line}\n`);
};

/** ms now: the process's CPU time (--cpu-time), else wall time */
const clock = values["cpu-time"] ? () => { const c = process.cpuUsage(); return (c.user + c.system) / 1000; } : () => performance.now();

// ---- fennec: the model runner on the chosen backend ----
await ensureKernels();
const gguf = readGguf(modelPath);
if (!gguf.ok) fail(gguf.error);
const model = loadModel(gguf.value);
if (!model.ok) fail(model.error);
const { config } = model.value;
const t0 = performance.now();
// a model larger than one wasm32 memory goes over several, as the server places it (a KV pool of this run's size)
const blockSize = 16;
const numBlocks = Math.ceil((promptLen + genLen) / blockSize);
const placement = placeModel(config, model.value.weights, {
  maxNumSeqs: 1, maxNumBatchedTokens: promptLen, maxModelLen: null, blockSize, kvCacheMemoryBytes: null, numKvBlocksOverride: numBlocks,
  enablePrefixCaching: false, threads, device: "cpu",
});
if (!placement.ok) fail(placement.error);
const backend = await createBackend(values.device === "webgpu" ? { kind: "webgpu" } : { kind: "wasm", threads, memoryPlan: placement.value.plan });
const runner = new Runner(config, model.value.weights, backend);
log(`fennec: ${backend.name}, ${threads} thread(s), loaded ${config.name} in ${((performance.now() - t0) / 1000).toFixed(2)} s; ${placement.value.line}`);

/** The prompt: BOS then fixed pseudo-random ids (random-weight models make any ids equally good). */
const bos = 1;
const promptIds = [bos, ...Array.from({ length: promptLen - 1 }, (_, i) => 3 + ((i * 7919) % (config.vocabSize - 3)))];

runner.allocateKvCache(numBlocks, blockSize);
const blockTable = Int32Array.from({ length: numBlocks }, (_, i) => i);

async function runFennec(): Promise<Rates> {
  const tStart = clock();
  let out = await runner.execute({ sequences: [{ tokenIds: Int32Array.from(promptIds), startPos: 0, blockTable, logits: "last" }] });
  let next = argmax(out.logits);
  const tFirst = clock();
  for (let i = 1; i < genLen; i++) {
    out = await runner.execute({ sequences: [{ tokenIds: Int32Array.of(next), startPos: promptLen + i - 1, blockTable, logits: "last" }] });
    next = argmax(out.logits);
  }
  const tEnd = clock();
  return { prefill_tps: promptLen / ((tFirst - tStart) / 1000), decode_tps: (genLen - 1) / ((tEnd - tFirst) / 1000) };
}

// ---- llama.cpp through node-llama-cpp, same file, same threads ----
const llama = await getLlama({ gpu: values.device === "webgpu" ? "auto" : false, build: "never", logLevel: LlamaLogLevel.error });
const llamaModel = await llama.loadModel({ modelPath });
const context = await llamaModel.createContext({ contextSize: promptLen + genLen + 16, batchSize: Math.max(promptLen, 512), threads });
const sequence = context.getSequence();

async function runLlama(): Promise<Rates> {
  await sequence.clearHistory();
  const tStart = clock();
  let tFirst = 0;
  let n = 0;
  for await (const _token of sequence.evaluate(promptIds as Token[], { temperature: 0 })) {
    if (n === 0) tFirst = clock();
    if (++n === genLen) break;
  }
  const tEnd = clock();
  return { prefill_tps: promptLen / ((tFirst - tStart) / 1000), decode_tps: (genLen - 1) / ((tEnd - tFirst) / 1000) };
}

const best = (rs: Rates[]): Rates => ({
  prefill_tps: Math.max(...rs.map((r) => r.prefill_tps)),
  decode_tps: Math.max(...rs.map((r) => r.decode_tps)),
});

await runFennec(); // warm-up: JSC tiers the kernels up to its optimizing JIT
const fennecRuns: Rates[] = [];
const llamaRuns: Rates[] = [];
for (let r = 0; r < rounds; r++) {
  fennecRuns.push(await runFennec());
  llamaRuns.push(await runLlama());
  const f = fennecRuns.at(-1)!;
  const l = llamaRuns.at(-1)!;
  log(`round ${r + 1}: fennec prefill ${f.prefill_tps.toFixed(1)} decode ${f.decode_tps.toFixed(1)} tok/s | llama.cpp prefill ${l.prefill_tps.toFixed(1)} decode ${l.decode_tps.toFixed(1)} tok/s`);
}
const fennec = best(fennecRuns);
const llamacpp = best(llamaRuns);
const ratio = { prefill: fennec.prefill_tps / llamacpp.prefill_tps, decode: fennec.decode_tps / llamacpp.decode_tps };
runner.dispose();
await context.dispose();
await llamaModel.dispose();
await llama.dispose();

if (values.json) {
  process.stdout.write(`${JSON.stringify({ fennec, llamacpp, ratio })}\n`);
} else {
  log(`best of ${rounds}, prompt ${promptLen}, gen ${genLen}, threads ${threads}${values["cpu-time"] ? ", process CPU time" : ""}:`);
  log(`             prefill tok/s   decode tok/s`);
  log(`fennec       ${fennec.prefill_tps.toFixed(1).padStart(13)}   ${fennec.decode_tps.toFixed(1).padStart(12)}`);
  log(`llama.cpp    ${llamacpp.prefill_tps.toFixed(1).padStart(13)}   ${llamacpp.decode_tps.toFixed(1).padStart(12)}`);
  log(`ratio        ${ratio.prefill.toFixed(2).padStart(13)}x  ${ratio.decode.toFixed(2).padStart(12)}x`);
}
process.exit(0);
