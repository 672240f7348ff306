/**
 * gpt-oss on the batched forward against the plain oracle (reference-forward.ts): attention sinks in the WASM
 * attention kernels (a row of one key segment adds its sink in the tile, a row of several in attention_merge),
 * alternating 128-token sliding windows on the hybrid KV cache groups, q/k/v/o, router and expert biases, swiglu_oai
 * experts, top-k-then-softmax gating. A 600-token prompt (rows of 1..3 key segments of 256, windows that cross a
 * segment's edge), a batch of 8 mixed requests against each alone, the swiglu_oai kernel on its clamps, and the
 * backends without sinks refusing with one line.
 */
import { expect, test } from "bun:test";
import type { Backend } from "../../src/backend/backend.ts";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { argmax } from "../../src/model/decode-loop.ts";
import { kvCacheGroups } from "../../src/model/kv-cache-groups.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { Runner } from "../../src/model/runner.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { maxAbsDiff } from "../helpers/vectors.ts";
import { makeTinyModel, TINY_GPT_OSS, type TinyShape } from "./tiny-model.ts";

await ensureKernels();

/** gpt-oss-20b's window (128) and a context past two key segments; 4 heads on 2 KV heads (query heads share a segment's scores) */
const LONG: TinyShape = { ...TINY_GPT_OSS, slidingWindow: 128, contextLength: 1024, numLayers: 4, numHeads: 4, numKvHeads: 2, headDim: 16 };
const BLOCK = 16;

function load(shape: TinyShape, mxfp4: boolean) {
  const loaded = loadModel(makeTinyModel(shape, {
    seed: 11, tensorType: (name, t) => (mxfp4 && name.includes("_exps.weight") ? GgmlType.MXFP4 : t),
  }));
  if (!loaded.ok) throw new Error(loaded.error);
  return loaded.value;
}

/** Each group's table: blocks [g * perGroup, (g + 1) * perGroup) */
function tables(numGroups: number, perGroup: number, offset = 0): Int32Array[] {
  return Array.from({ length: numGroups }, (_, g) => Int32Array.from({ length: perGroup }, (_, b) => offset + g * perGroup + b));
}

// f32 weights: the kernels' f16 KV cache is the only rounding, so every row is held to runner.test.ts's f32 bound (MXFP4
// experts read q8_0 activations, not bit-equal to the oracle's, and a rare near-tie routes a row differently; they are
// checked on short prompts in moe-forward.test.ts and against llama.cpp in moe-llamacpp.test.ts)
test("a 600-token prompt in two chunks, then decode, gives the oracle's logits at every row (WASM, hybrid KV groups)", async () => {
  const bound = 3e-3;
  const { config, weights } = load(LONG, false);
  expect(config).toMatchObject({ attentionSinks: true, slidingWindow: 128, slidingLayers: [true, false, true, false] });
  const prompt = Array.from({ length: 600 }, (_, i) => (i * 37 + 5) % config.vocabSize);
  const decode = [3, 14, 15, 9];
  const all = [...prompt, ...decode];
  const oracle = new ReferenceForward(config, weights, all.length);
  const expected = all.map((t, pos) => Float32Array.from(oracle.forward(t, pos)));

  const groups = kvCacheGroups(config);
  expect(groups.groups.map((g) => g.slidingWindow)).toEqual([0, 128]);
  const perGroup = Math.ceil(all.length / BLOCK);
  const runner = new Runner(config, weights, await createBackend({ kind: "wasm", threads: 2 }));
  runner.allocateKvCache(groups.groups.length * perGroup, BLOCK, groups);
  const blockTables = tables(groups.groups.length, perGroup);
  const seq = (start: number, end: number, logits: "all" | "last") =>
    ({ tokenIds: Int32Array.from(all.slice(start, end)), startPos: start, blockTable: blockTables[0]!, blockTables, logits });
  const got: Float32Array[] = [];
  const width = config.vocabSize;
  for (const [start, end] of [[0, 300], [300, 600]] as const) {
    const out = (await runner.execute({ sequences: [seq(start, end, "all")] })).logits;
    for (let i = 0; i < end - start; i++) got.push(out.slice(i * width, (i + 1) * width));
  }
  for (let pos = prompt.length; pos < all.length; pos++) got.push((await runner.execute({ sequences: [seq(pos, pos + 1, "last")] })).logits);
  runner.dispose();
  let worst = 0;
  for (let pos = 0; pos < all.length; pos++) worst = Math.max(worst, maxAbsDiff(got[pos]!, expected[pos]!));
  // the sinks matter at every length: the oracle without them is far from the WASM rows past the first segment
  const noSinks = new ReferenceForward(config, { ...weights, layers: weights.layers.map((l) => ({ ...l, attnSinks: null })) }, all.length);
  let control = 0;
  for (let pos = 0; pos < all.length; pos++) {
    const logits = noSinks.forward(all[pos]!, pos);
    if (pos >= 512) control = Math.max(control, maxAbsDiff(logits, got[pos]!));
  }
  console.log(`gpt-oss: 604 rows, WASM vs oracle max |dlogit| ${worst.toExponential(2)}; without sinks (rows past 512) ${control.toExponential(2)}`);
  expect(worst).toBeLessThan(bound);
  expect(control).toBeGreaterThan(10 * bound);
}, 120_000);

test("a batch of 8 mixed requests gives each the greedy tokens it gets alone (gpt-oss, hybrid KV groups)", async () => {
  const { config, weights } = load(LONG, true);
  const groups = kvCacheGroups(config);
  const decodeSteps = 6;
  // prompts of 1..300 tokens: rows of one and of two key segments, windows and not, share each step's experts
  const prompts = Array.from({ length: 8 }, (_, i) => Int32Array.from({ length: 1 + ((i * 97) % 300) }, (_, j) => (i * 7919 + j * 104729) % config.vocabSize));
  const perGroup = Math.ceil((300 + decodeSteps) / BLOCK);
  const perRequest = groups.groups.length * perGroup;
  const runner = new Runner(config, weights, await createBackend({ kind: "wasm", threads: 2 }));
  runner.allocateKvCache(8 * perRequest, BLOCK, groups);
  const tablesOf = prompts.map((_, i) => tables(groups.groups.length, perGroup, i * perRequest));
  const seq = (i: number, tokenIds: Int32Array, startPos: number) => ({ tokenIds, startPos, blockTable: tablesOf[i]![0]!, blockTables: tablesOf[i]!, logits: "last" as const });

  const alone: number[][] = [];
  for (let i = 0; i < 8; i++) {
    const out: number[] = [];
    let logits = (await runner.execute({ sequences: [seq(i, prompts[i]!, 0)] })).logits;
    for (let s = 0; s < decodeSteps; s++) {
      out.push(argmax(logits));
      logits = (await runner.execute({ sequences: [seq(i, Int32Array.of(out.at(-1)!), prompts[i]!.length + s)] })).logits;
    }
    alone.push(out);
  }
  const together: number[][] = prompts.map(() => []);
  const width = config.vocabSize;
  let batch = await runner.execute({ sequences: prompts.map((p, i) => seq(i, p, 0)) });
  for (let s = 0; s < decodeSteps; s++) {
    prompts.forEach((_, i) => together[i]!.push(argmax(batch.logits.subarray(i * width, (i + 1) * width))));
    batch = await runner.execute({ sequences: prompts.map((p, i) => seq(i, Int32Array.of(together[i]!.at(-1)!), p.length + s)) });
  }
  runner.dispose();
  expect(together).toEqual(alone);
}, 120_000);

test("swiglu_oai on the WASM kernels: the reference backend's values through and past the clamps, on the SIMD and scalar lanes", async () => {
  const n = 4099; // whole quads and a tail
  // gate over [-30, 15) in a scrambled order, up over [-12, 12): every pair of regions meets
  const gate = Float32Array.from({ length: n }, (_, i) => -30 + (45 * ((i * 577) % n)) / n);
  const up = Float32Array.from({ length: n }, (_, i) => -12 + (24 * i) / n);
  const results: Float32Array[] = [];
  for (const backend of [new ReferenceBackend(), await createBackend({ kind: "wasm", threads: 2 })] as Backend[]) {
    const [g, u, o] = [backend.alloc(n), backend.alloc(n), backend.alloc(n)];
    backend.write(g, gate);
    backend.write(u, up);
    backend.swigluOai!(o, g, u, n, 1.702, 7);
    results.push(await backend.read(o, n));
    backend.dispose();
  }
  const [ref, wasm] = results;
  let worst = 0;
  for (let i = 0; i < n; i++) worst = Math.max(worst, Math.abs(ref![i]! - wasm![i]!) / Math.max(1, Math.abs(ref![i]!)));
  expect(worst).toBeLessThan(1e-6);
  // the clamps: gate past 7 counts as 7, up past +-7 as +-7
  expect(ref![gate.findIndex((x, i) => x > 8 && up[i]! > 8)]).toBeCloseTo((7 / (1 + Math.exp(-1.702 * 7))) * 8, 4);
});

test("a backend without attention sinks or swiglu_oai (WebGPU) refuses gpt-oss with one line", () => {
  const { config, weights } = load(TINY_GPT_OSS, false);
  const without = (key: string) => new Proxy(new ReferenceBackend(), { get: (target, k) => (k === key ? undefined : Reflect.get(target, k)) });
  expect(() => new Runner(config, weights, without("attentionSinks"))).toThrow(/^the reference backend does not run gpt-oss \(no attention sinks\); use the CPU \(WASM\) backend$/);
  expect(() => new Runner(config, weights, without("swigluOai"))).toThrow(/^the reference backend does not run gpt-oss's experts \(no swiglu_oai op\); use the CPU \(WASM\) backend$/);
});
