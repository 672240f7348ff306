/**
 * Kernel benchmark (not a test): per weight type, the matvec rate in GB/s of weights next to a plain v128
 * memory-streaming read, so the distance to the memory limit shows; plus a 32-token GEMM rate (prefill).
 * Usage: bun run bench:kernels [--rows 2048] [--cols 4096] [--threads 1,2] [--seconds 0.3] [--simd relaxed-simd]
 * Absolute figures on shared machines are noisy; compare rows of one run.
 */
import { parseArgs } from "node:util";
import { WEIGHT_TYPES } from "../src/tensor/dtypes.ts";
import { ensureKernels } from "../test/kernels/ensure-kernels.ts";
import { randomFloats, randomWeight } from "../test/conformance/random-weights.ts";
import { rng } from "../test/helpers/prng.ts";

const { values } = parseArgs({
  options: {
    rows: { type: "string", default: "2048" },
    cols: { type: "string", default: "4096" },
    threads: { type: "string", default: `1,${navigator.hardwareConcurrency}` },
    seconds: { type: "string", default: "0.3" },
    simd: { type: "string" },
    types: { type: "string" },
  },
});
const rows = Number(values.rows);
const cols = Number(values.cols);
const seconds = Number(values.seconds);
const threadCounts = [...new Set(values.threads!.split(",").map(Number))];
const simd = values.simd as "scalar" | "simd" | "relaxed-simd" | undefined;
const typeFilter = values.types?.split(",");

await ensureKernels();
const { createWasmBackend } = await import("../src/backend/wasm/wasm-backend.ts");

/**
 * Calls fn until `seconds` have passed, after a warm-up of the same length (JSC tiers wasm up to its optimizing JIT
 * only after many loop iterations). Returns seconds per call: the median and the best call. On a shared machine the
 * best call is the one least disturbed by other jobs, so the tables rate kernels by it.
 */
function timeIt(fn: () => void): { median: number; best: number } {
  for (const t0 = performance.now(); performance.now() - t0 < seconds * 1000;) fn();
  const times: number[] = [];
  for (const t0 = performance.now(); performance.now() - t0 < seconds * 1000;) {
    const t = performance.now();
    fn();
    times.push((performance.now() - t) / 1000);
  }
  times.sort((a, b) => a - b);
  return { median: times[Math.floor(times.length / 2)]!, best: times[0]! };
}

const fmt = (x: number, w = 7) => x.toFixed(2).padStart(w);

for (const threads of threadCounts) {
  const be = await createWasmBackend({ threads, simd });
  const streamBuf = be.alloc(64 * 2 ** 20); // [64 Mi floats] = 256 MiB, beyond any cache
  const streamBytes = streamBuf.length * 4;
  be.write(streamBuf, Float32Array.from({ length: streamBuf.length }, (_, i) => i)); // touch every page: untouched pages all map to one zero page
  const streamRate = streamBytes / timeIt(() => be.streamRead(streamBuf)).best / 1e9;
  be.free(streamBuf);
  console.log(`\n${be.name}, ${threads} thread(s), matvec [${rows} x ${cols}]; stream read (1 thread): ${streamRate.toFixed(2)} GB/s`);
  console.log("(best call of each; median in brackets)");
  console.log("type   | GGUF GB/s | kernel GB/s | Gweights/s        | % of stream | GEMM 32 tokens Gweights/s");
  const random = rng(1);
  const x = be.alloc(32 * cols);
  be.write(x, randomFloats(32 * cols, random));
  const out = be.alloc(32 * rows);
  for (const wt of WEIGHT_TYPES) {
    if (typeFilter !== undefined && !typeFilter.includes(wt.name)) continue;
    const src = randomWeight(wt, rows, cols, random);
    const w = be.loadWeight(src);
    const perCall = timeIt(() => be.matmul(out, w, x, 1));
    const perGemm = timeIt(() => be.matmul(out, w, x, 32));
    const ggufRate = src.data.length / perCall.best / 1e9;
    const kernelRate = be.weightBytes(w) / perCall.best / 1e9;
    const weightRate = (rows * cols) / perCall.best / 1e9;
    const weightMedian = (rows * cols) / perCall.median / 1e9;
    const gemmRate = (32 * rows * cols) / perGemm.best / 1e9;
    const gemmMedian = (32 * rows * cols) / perGemm.median / 1e9;
    console.log(`${wt.name.padEnd(6)} | ${fmt(ggufRate, 9)} | ${fmt(kernelRate, 11)} | ${fmt(weightRate, 6)} (${fmt(weightMedian, 6)}) | ${fmt((100 * kernelRate) / streamRate, 10)}% | ${fmt(gemmRate, 6)} (${fmt(gemmMedian, 6)})`);
    be.freeWeight(w);
  }
  be.dispose();
}
