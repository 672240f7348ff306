/**
 * Where a mixture-of-experts decode step's time goes (not a test): one sequence's decode steps at position --context,
 * timed on `Runner.execute` (no engine, no HTTP), each backend op's time added to a part of the step by the weight it
 * reads (the tensor's name: ffn_gate_inp -> router, *_exps / *_shexp -> experts, attn_* -> attention, output -> head)
 * or, for the ops without a weight, by the part that ran the op before it (the activation after the experts' gate /
 * up, the router's logits read back, ...). What no op timed is the JavaScript between ops: the routing (softmax,
 * top-k), the grouping, the runner's bookkeeping; the top-k alone is timed beside it on the same logits' shape.
 * Also the weight bytes each part reads per token (GGUF bytes of the weights the step used), so a part's time can be
 * set against its bytes.
 * With --dense F (a dense model of the same depth and weight type, e.g. make-model's qwen2.5-7b shape) both models run
 * in one process, alternating rounds, and the time per layer is set against the ratio of bytes read per layer.
 * With --threads 1 every figure is the calling thread's CPU time (all the work runs on it): on a shared machine that
 * leaves out the time other processes held the core (as bench/step-time.ts does).
 * With --prefill N the same split is taken of N-token prompt chunks instead (each round a new sequence's prompt), with
 * the routed experts' multiply-adds per second (N * k * 3 * expertHiddenDim * dim a layer over the experts' time).
 * --per-expert hides the backend's matmulGrouped, so several rows run each expert on its own (the path before it),
 * for a side-by-side run.
 * Usage: bun run bench/moe-step.ts --model F [--dense F2] [--threads 2] [--context 128] [--reps 16] [--rounds 3] [--warmup 3] [--prefill N] [--per-expert]
 */
import { parseArgs } from "node:util";
import { openModelGguf } from "../src/gguf/model-source.ts";
import { loadModel } from "../src/model/load-model.ts";
import { Runner } from "../src/model/runner.ts";
import { createBackend } from "../src/backend/create-backend.ts";
import { placeModel } from "../src/engine/model-placement.ts";
import { routeExperts } from "../src/model/moe-routing.ts";
import type { Backend, Weight, WeightSource } from "../src/backend/backend.ts";
import type { ModelConfig } from "../src/model/model-config.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    dense: { type: "string" },
    threads: { type: "string", default: "2" },
    context: { type: "string", default: "128" },
    reps: { type: "string", default: "16" },
    rounds: { type: "string", default: "3" },
    warmup: { type: "string", default: "3" },
    prefill: { type: "string", default: "0" },
    "per-expert": { type: "boolean", default: false },
  },
});
const [threads, context, reps, rounds, warmup, prefill] = [values.threads, values.context, values.reps, values.rounds, values.warmup, values.prefill].map(Number) as [number, number, number, number, number, number];
if (values.model === undefined || ![threads, context, reps, rounds].every((n) => Number.isInteger(n) && n > 0) || ![warmup, prefill].every((n) => Number.isInteger(n) && n >= 0)) {
  process.stderr.write("usage: bun run bench/moe-step.ts --model F [--dense F2] [--threads 2] [--context 128] [--reps 16] [--rounds 3] [--warmup 3] [--prefill N]\n");
  process.exit(2);
}

/** ms now: the thread's CPU time at 1 thread (see above), else wall time */
const clock = threads === 1 ? () => { const c = process.threadCpuUsage(); return (c.user + c.system) / 1000; } : () => performance.now();

/** The parts of a step, in print order. */
const PARTS = ["router", "experts", "dense ffn", "attention", "head", "other", "untimed JS"] as const;
type Part = (typeof PARTS)[number];

/** The part a weight belongs to, from its GGUF tensor name (llama.cpp's names, llama-arch.cpp). */
function partOf(name: string): Part {
  if (name.includes("ffn_gate_inp")) return "router";
  if (/_(exps|shexp)/.test(name)) return "experts";
  if (/ffn_(gate|up|down)\./.test(name)) return "dense ffn";
  if (/attn_(q|k|v|output|q_norm|k_norm|sinks)\./.test(name)) return "attention";
  if (name.startsWith("output.")) return "head";
  return "other";
}

/** ops that need no weight but belong to attention whatever ran before them */
const ATTENTION_OPS = new Set(["rope", "kvStore", "attention", "scale"]);
/** ops that need no weight and belong to the part that ran before them (an activation, a read-back, a copy) */
const INHERIT_OPS = new Set(["siluMul", "geluMul", "swigluOai", "read", "gatherRows", "scatterRows", "weightedRowSum"]);
/** the weight argument's index of each op that takes one (matmulShared: a list) */
const WEIGHT_ARG: Record<string, number> = { embed: 1, rmsNorm: 2, matmul: 1, matmulShared: 1, matmulEach: 1, matmulGrouped: 1, addBias: 1 };

interface Bench {
  readonly label: string;
  readonly config: ModelConfig;
  readonly runner: Runner;
  /** ms per part over the timed steps */
  readonly ms: Map<Part, number>;
  /** GGUF bytes per part of the weights one step used */
  readonly bytes: Map<Part, number>;
  readonly times: number[];
  timing: boolean;
}

async function open(path: string): Promise<Bench> {
  const gguf = await openModelGguf(path);
  if (!gguf.ok) throw new Error(gguf.error);
  const model = loadModel(gguf.value);
  if (!model.ok) throw new Error(model.error);
  const { config, weights } = model.value;
  const numBlocks = Math.ceil((Math.max(context + warmup + rounds * reps, prefill) + 1) / 16);
  const placement = placeModel(config, weights, {
    maxNumSeqs: 1, maxNumBatchedTokens: 128, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: null,
    numKvBlocksOverride: numBlocks, enablePrefixCaching: false, threads, device: "cpu",
  });
  if (!placement.ok) throw new Error(placement.error);
  const backend = await createBackend({ kind: "wasm", threads, memoryPlan: placement.value.plan });
  const bench: Bench = { label: config.name, config, runner: undefined as unknown as Runner, ms: new Map(), bytes: new Map(), times: [], timing: false };
  if (values["per-expert"]) (backend as { matmulGrouped?: unknown }).matmulGrouped = undefined;
  instrument(backend, bench);
  const runner = new Runner(config, weights, backend);
  runner.allocateKvCache(numBlocks, 16);
  (bench as { runner: Runner }).runner = runner;
  process.stdout.write(`${path}: ${config.name}, ${config.numLayers} layers, ${backend.name}, ${threads} threads; ${placement.value.line}\n`);
  return bench;
}

/** Wraps the backend's ops: each op's wall time goes to its part while `bench.timing`. */
function instrument(backend: Backend, bench: Bench): void {
  const source = new Map<Weight, WeightSource>();
  const load = backend.loadWeight.bind(backend);
  backend.loadWeight = (s: WeightSource) => {
    const w = load(s);
    source.set(w, s);
    return w;
  };
  let last: Part = "other";
  /** the weights one step read (a step's first use of each counts its bytes) */
  const seen = new Set<Weight>();
  const target = backend as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of ["embed", "rmsNorm", "matmul", "matmulShared", "matmulEach", "matmulGrouped", "addBias", "rope", "kvStore", "attention", "scale", "add", ...INHERIT_OPS]) {
    const f = target[name];
    if (typeof f !== "function") continue;
    const bound = f.bind(backend);
    target[name] = (...args: unknown[]) => {
      let part: Part = "other";
      if (name in WEIGHT_ARG) {
        const arg = args[WEIGHT_ARG[name]!];
        const ws = (Array.isArray(arg) ? arg.flat() : [arg]) as Weight[];
        part = partOf(source.get(ws[0]!)?.name ?? "");
        if (bench.timing) {
          for (const w of ws) {
            if (seen.has(w)) continue;
            seen.add(w);
            const s = source.get(w);
            // the token embedding: one row a token
            const bytes = s === undefined ? 0 : name === "embed" ? s.data.length / s.rows : s.data.length;
            bench.bytes.set(part, (bench.bytes.get(part) ?? 0) + bytes);
          }
        }
        // the router's norms and adds are "other"; its matmul's read-back follows it
        if (name !== "rmsNorm" || part === "attention") last = part;
        if (name === "rmsNorm" && part !== "attention") last = "other";
      } else if (ATTENTION_OPS.has(name)) part = last = "attention";
      else if (name === "add") last = "other";
      else if (INHERIT_OPS.has(name)) part = last;
      const t = clock();
      const r = bound(...args);
      if (bench.timing) bench.ms.set(part, (bench.ms.get(part) ?? 0) + clock() - t);
      return r;
    };
  }
  (bench as { resetSeen?: () => void }).resetSeen = () => seen.clear();
}

/** fills the cache to --context with one prompt chunk per 128 tokens */
async function fill(b: Bench): Promise<void> {
  const table = Int32Array.from({ length: Math.ceil((Math.max(context + warmup + rounds * reps, prefill) + 1) / 16) }, (_, i) => i);
  for (let p = 0; p < context; p += 128) {
    const n = Math.min(128, context - p);
    await b.runner.execute({ sequences: [{ tokenIds: Int32Array.from({ length: n }, (_, i) => 300 + (((p + i) * 7919) % (b.config.vocabSize - 300))), startPos: p, blockTable: table, logits: "last" }] });
  }
  (b as { table?: Int32Array }).table = table;
}

const steps = new Map<Bench, number>();
async function decodeSteps(b: Bench, n: number, timed: boolean): Promise<void> {
  const table = (b as { table?: Int32Array }).table!;
  for (let i = 0; i < n; i++) {
    const pos = steps.get(b) ?? context;
    steps.set(b, pos + 1);
    (b as { resetSeen?: () => void }).resetSeen!();
    if (timed) b.bytes.clear();
    b.timing = timed;
    const t = clock();
    await b.runner.execute({ sequences: [{ tokenIds: Int32Array.of(300 + ((pos * 131) % (b.config.vocabSize - 300))), startPos: pos, blockTable: table, logits: "last" }] });
    const ms = clock() - t;
    b.timing = false;
    if (timed) b.times.push(ms);
  }
}

/** --prefill: n prompts of `prefill` tokens, each from position 0 (over the same blocks) */
let prompts = 0;
async function prefillSteps(b: Bench, n: number, timed: boolean): Promise<void> {
  const table = (b as { table?: Int32Array }).table!;
  for (let i = 0; i < n; i++) {
    const seed = ++prompts;
    (b as { resetSeen?: () => void }).resetSeen!();
    if (timed) b.bytes.clear();
    b.timing = timed;
    const t = clock();
    await b.runner.execute({ sequences: [{ tokenIds: Int32Array.from({ length: prefill }, (_, j) => 300 + (((seed * 104729 + j) * 7919) % (b.config.vocabSize - 300))), startPos: 0, blockTable: table, logits: "last" }] });
    const ms = clock() - t;
    b.timing = false;
    if (timed) b.times.push(ms);
  }
}
const step = prefill > 0 ? prefillSteps : decodeSteps;

const benches = [await open(values.model)];
if (values.dense !== undefined) benches.push(await open(values.dense));
for (const b of benches) {
  await fill(b);
  await step(b, warmup, false);
}
for (let r = 0; r < rounds; r++) for (const b of benches) await step(b, reps, true);

const fmt = (x: number, d = 2) => x.toFixed(d);
const MB = 1e6;
for (const b of benches) {
  const n = b.times.length;
  const sorted = [...b.times].sort((x, y) => x - y);
  const mean = b.times.reduce((a, x) => a + x, 0) / n;
  const inOps = [...b.ms.values()].reduce((a, x) => a + x, 0) / n;
  b.ms.set("untimed JS", mean * n - inOps * n);
  const totalBytes = [...b.bytes.values()].reduce((a, x) => a + x, 0);
  process.stdout.write(`\n${b.label}: ${prefill > 0 ? `prefill of ${prefill} tokens` : `decode step at context ${context}`}${threads === 1 ? " (thread CPU time)" : ""}, ${n} steps (${rounds} rounds of ${reps}): best ${fmt(sorted[0]!)} / median ${fmt(sorted[n >> 1]!)} / mean ${fmt(mean)} ms; ${fmt(totalBytes / MB, 1)} MB of weights read per token\n`);
  process.stdout.write(`  ${"part".padEnd(12)} ${"ms/step".padStart(8)} ${"share".padStart(6)} ${"MB/token".padStart(9)} ${"GB/s".padStart(6)}\n`);
  for (const part of PARTS) {
    const ms = (b.ms.get(part) ?? 0) / n;
    const bytes = b.bytes.get(part) ?? 0;
    if (ms === 0 && bytes === 0) continue;
    const rate = bytes > 0 && ms > 0 ? fmt(bytes / (ms / 1000) / 1e9, 1) : "";
    process.stdout.write(`  ${part.padEnd(12)} ${fmt(ms).padStart(8)} ${fmt((100 * ms) / mean, 1).padStart(5)}% ${(bytes > 0 ? fmt(bytes / MB, 1) : "").padStart(9)} ${rate.padStart(6)}\n`);
  }
  const moe = b.config.moe;
  if (moe !== undefined) {
    // the routing's softmax and top-k alone, on logits of this model's width
    const logits = Float32Array.from({ length: moe.expertCount }, (_, i) => Math.sin(i * 12.9898) * 0.5);
    for (let i = 0; i < 200; i++) routeExperts(logits, 1, moe);
    const t = performance.now();
    for (let i = 0; i < 2000; i++) routeExperts(logits, 1, moe);
    const each = (performance.now() - t) / 2000;
    const experts = (b.ms.get("experts") ?? 0) / n;
    if (prefill > 0 && experts > 0) {
      const macs = prefill * moe.expertUsedCount * 3 * moe.expertHiddenDim * b.config.dim * b.config.numLayers;
      process.stdout.write(`  routed experts: ${fmt(macs / (experts / 1000) / 1e9, 1)} G multiply-adds/s (${prefill} x ${moe.expertUsedCount} rows x 3 projections a layer)\n`);
    }
    process.stdout.write(`  routing (softmax + top-${moe.expertUsedCount} of ${moe.expertCount}) alone: ${fmt(each * 1000, 1)} us a row, ${fmt(each * b.config.numLayers, 3)} ms a step\n`);
  }
}

/** a layer's time: the step less its head and the embedding's row (their share is the same whatever the FFN) */
const perLayer = (b: Bench) => {
  const n = b.times.length;
  const mean = b.times.reduce((a, x) => a + x, 0) / n;
  const head = (b.ms.get("head") ?? 0) / n;
  const bytes = [...b.bytes].filter(([p]) => p !== "head" && p !== "other").reduce((a, [, x]) => a + x, 0);
  return { ms: (mean - head) / b.config.numLayers, bytes: bytes / b.config.numLayers };
};
if (benches.length === 2) {
  const [m, d] = benches.map(perLayer) as [{ ms: number; bytes: number }, { ms: number; bytes: number }];
  process.stdout.write(`\nper layer (the step less the output head, over ${benches[0]!.config.numLayers} and ${benches[1]!.config.numLayers} layers):\n`);
  process.stdout.write(`  ${benches[0]!.label}: ${fmt(m.ms, 3)} ms, ${fmt(m.bytes / MB, 1)} MB read\n`);
  process.stdout.write(`  ${benches[1]!.label}: ${fmt(d.ms, 3)} ms, ${fmt(d.bytes / MB, 1)} MB read\n`);
  process.stdout.write(`  time ratio ${fmt(m.ms / d.ms, 3)} against bytes ratio ${fmt(m.bytes / d.bytes, 3)}\n`);
}
for (const b of benches) b.runner.dispose();
process.exit(0);
