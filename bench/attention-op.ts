/**
 * The attention op alone (not a test): one sequence's prompt of --rows query rows against its own keys, smollm2-135m's
 * shape by default (9 query heads, 3 KV heads, head dim 64), f16 or 8-bit cache, timed per layer call. At --threads 1
 * every figure is the calling thread's CPU time. Prints ms per call (best of --reps; with --decode the mean of --reps) and G multiply-adds/s (Q.K + P.V
 * over the causal triangle), plus a checksum of the output so two builds can be compared.
 * Usage: bun run bench/attention-op.ts [--rows 2048] [--decode] [--heads 9] [--kv-heads 3] [--head-dim 64] [--dtype f16|q8] [--threads 1] [--reps 5] [--simd simd|relaxed-simd|scalar]
 */
import { parseArgs } from "node:util";
import { createBackend } from "../src/backend/create-backend.ts";
import type { SimdLevel } from "../src/backend/wasm/simd-levels.ts";

const { values } = parseArgs({
  options: {
    rows: { type: "string", default: "2048" },
    heads: { type: "string", default: "9" },
    "kv-heads": { type: "string", default: "3" },
    "head-dim": { type: "string", default: "64" },
    dtype: { type: "string", default: "f16" },
    threads: { type: "string", default: "1" },
    reps: { type: "string", default: "5" },
    simd: { type: "string" },
    decode: { type: "boolean", default: false },
  },
});
const [rows, heads, kvHeads, headDim, threads, reps] = [values.rows, values.heads, values["kv-heads"], values["head-dim"], values.threads, values.reps].map(Number) as [number, number, number, number, number, number];
const dtype = values.dtype === "q8" ? "q8" : "f16";
const blockSize = 16;
const backend = await createBackend({ kind: "wasm", threads, simd: values.simd as SimdLevel | undefined });
const numBlocks = Math.ceil(rows / blockSize);
backend.allocKvCache({ dtype, numLayers: 1, numBlocks, blockSize, numKvHeads: kvHeads, headDim });
let seed = 1;
const rand = () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32) * 2 - 1; };
const fill = (n: number, s: number) => Float32Array.from({ length: n }, () => rand() * s);
const k = backend.alloc(rows * kvHeads * headDim), v = backend.alloc(rows * kvHeads * headDim);
const q = backend.alloc(rows * heads * headDim), out = backend.alloc(rows * heads * headDim);
backend.write(k, fill(rows * kvHeads * headDim, 2));
backend.write(v, fill(rows * kvHeads * headDim, 1));
backend.write(q, fill(rows * heads * headDim, 2));
backend.kvStore(0, k, v, Int32Array.from({ length: rows }, (_, i) => i));
const blockTable = Int32Array.from({ length: numBlocks }, (_, i) => i);
// --decode: one query row at the last position against all rows' keys (a decode step at context --rows)
const decode = values.decode === true;
const seqs = [decode ? { rowStart: 0, numRows: 1, startPos: rows - 1, blockTable } : { rowStart: 0, numRows: rows, startPos: 0, blockTable }];
const clock = threads === 1 ? () => { const c = process.threadCpuUsage(); return (c.user + c.system) / 1000; } : () => performance.now();
backend.attention(out, q, 0, heads, seqs);
let best = Infinity;
if (decode) {
  // a decode step is below the CPU clock's tick: the mean over all the reps
  for (let r = 0; r < 20; r++) backend.attention(out, q, 0, heads, seqs);
  const t = clock();
  for (let r = 0; r < reps; r++) backend.attention(out, q, 0, heads, seqs);
  best = (clock() - t) / reps;
} else {
  for (let r = 0; r < reps; r++) {
    const t = clock();
    backend.attention(out, q, 0, heads, seqs);
    best = Math.min(best, clock() - t);
  }
}
const o = await backend.read(out, rows * heads * headDim);
let h = 0;
const u = new Uint32Array(o.buffer, o.byteOffset, o.length);
for (let i = 0; i < u.length; i++) h = (Math.imul(h, 31) + u[i]!) >>> 0;
const macs = decode ? 2 * heads * headDim * rows : 2 * heads * headDim * (rows * (rows + 1)) / 2;
console.log(`attention ${dtype}${decode ? " decode" : ""} rows ${rows} heads ${heads}/${kvHeads} dim ${headDim} threads ${threads}: ${best.toFixed(best < 10 ? 3 : 1)} ms, ${(macs / best / 1e6).toFixed(2)} G mul-adds/s, checksum ${h.toString(16)}`);
backend.dispose();
