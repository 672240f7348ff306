/**
 * LoRA in the batched forward on the WASM kernels (kernels/lora.ts, Backend.loraDelta):
 *  - the kernel against the reference backend's plain f64 sums, rows with different slots, empty slots and no slot,
 *    on one thread and spread over the pool (a long step);
 *  - a batch mixing two adapters and the base model gives every row the logits, bit for bit, and so the greedy tokens
 *    it gets alone (vLLM punica semantics: each row its own update), prefill and decode, each sequence in its own slot;
 *  - the adapter's rows match the reference forward with that adapter (the oracle);
 *  - a backend without the per-row kernel (WebGPU, a model split over several wasm32 memories) refuses with one line.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import type { Backend, LoraPairBuffers } from "../../src/backend/backend.ts";
import { parseGguf } from "../../src/gguf/reader.ts";
import { serializeGguf } from "../../src/gguf/writer.ts";
import { parseLoraAdapter } from "../../src/lora/read-lora-adapter.ts";
import type { LoraAdapter } from "../../src/lora/lora-adapter.ts";
import { argmax } from "../../src/model/decode-loop.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { LoraSlots } from "../../src/model/lora-slots.ts";
import type { SequenceChunk } from "../../src/model/model-batch.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { Runner } from "../../src/model/runner.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { randomLora } from "../../scripts/random-lora.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { rng } from "../helpers/prng.ts";
import { makeTinyModel, type TinyShape } from "../model/tiny-model.ts";

await ensureKernels();

const SHAPE: TinyShape = {
  architecture: "qwen2", vocabSize: 256, dim: 64, hiddenDim: 96, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, tied: true, contextLength: 128,
};
const model = loadModel(makeTinyModel(SHAPE, { seed: 9, matrixType: GgmlType.Q8_0 }));
if (!model.ok) throw new Error(model.error);
const { config, weights } = model.value;

function adapter(seed: number, rank: number, targets?: string[]): LoraAdapter {
  const file = parseGguf(serializeGguf(randomLora({ architecture: "qwen2", numLayers: 2, dims: config, moe: false, rank, alpha: 2 * rank, seed, targets })), `lora-${seed}.gguf`);
  if (!file.ok) throw new Error(file.error);
  const a = parseLoraAdapter(file.value, { config, maxLoraRank: 64 });
  if (!a.ok) throw new Error(a.error);
  return a.value;
}
const A = adapter(1, 8);
const B = adapter(2, 16, ["attn_q", "attn_v", "ffn_down"]);

const backends: Backend[] = [];
afterAll(() => backends.forEach((b) => b.dispose()));

/** the first build's result per row count, which the other builds must equal bit for bit */
const bitsByRows = new Map<number, Float32Array>();

describe("loraDelta kernel", () => {
  test.each([[3, 1, "relaxed-simd"], [3, 2, "simd"], [300, 2, "relaxed-simd"], [300, 1, "scalar"]] as const)("%i rows on %i threads (%s): the reference's update within 1e-5", async (numRows, threads, simd) => {
    const wasm = await createBackend({ kind: "wasm", threads, simd });
    backends.push(wasm);
    const ref = new ReferenceBackend();
    const random = rng(numRows);
    const nIn = 70; // not a multiple of 4: the tail path
    const nOut = 33;
    const values = (n: number, scale = 1) => Float32Array.from({ length: n }, () => (random() * 2 - 1) * scale);
    const pairsOn = (b: Backend): (LoraPairBuffers | null)[] => [[5, 0.5], null, [16, 2]].map((p, i) => {
      if (p === null) return null;
      const [rank, scale] = p as [number, number];
      const r = rng(100 + i);
      const a = b.alloc(rank * nIn);
      b.write(a, Float32Array.from({ length: rank * nIn }, () => r() - 0.5));
      const bb = b.alloc(nOut * rank);
      b.write(bb, Float32Array.from({ length: nOut * rank }, () => r() - 0.5));
      return { a, bt: bb, rank, scale };
    });
    const x = values(numRows * nIn);
    const y = values(numRows * nOut);
    const rowSlots = Int32Array.from({ length: numRows }, (_, r) => (r % 4) - 1); // -1 (none), 0, 1 (empty slot), 2
    const run = async (b: Backend) => {
      const xb = b.alloc(x.length);
      b.write(xb, x);
      const out = b.alloc(y.length);
      b.write(out, y);
      b.loraDelta!(out, xb, numRows, nIn, nOut, rowSlots, pairsOn(b));
      return b.read(out, y.length);
    };
    const [got, want] = [await run(wasm), await run(ref)];
    // every build and thread count gives the same bits (kernels/lora.ts keeps one summation order)
    const first = bitsByRows.get(numRows);
    if (first === undefined) bitsByRows.set(numRows, got);
    else expect(got).toEqual(first);
    let worst = 0;
    for (let i = 0; i < y.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!));
    expect(worst).toBeLessThan(1e-5);
    // rows with no slot or the empty slot are untouched; the others moved
    for (let r = 0; r < numRows; r++) {
      const row = got.subarray(r * nOut, (r + 1) * nOut);
      const same = row.every((v, j) => v === y[r * nOut + j]);
      expect(same).toBe(rowSlots[r] === -1 || rowSlots[r] === 1);
    }
  });
});

test("rows sharing a slot go in groups, and each row's bits are the ones it gets alone, in every build", async () => {
  const wasm = await createBackend({ kind: "wasm", threads: 2 });
  backends.push(wasm);
  const ref = new ReferenceBackend();
  const random = rng(7);
  const [numRows, nIn, nOut] = [23, 66, 38]; // not multiples of 4: the tails too
  const values = (n: number) => Float32Array.from({ length: n }, () => random() - 0.5);
  const upload = (b: Backend, v: Float32Array) => {
    const buffer = b.alloc(v.length);
    b.write(buffer, v);
    return buffer;
  };
  const pairs = [{ rank: 12, scale: 0.75 }, null, { rank: 4, scale: 2 }].map((p) => (p === null ? null : { ...p, a: values(p.rank * nIn), bt: values(p.rank * nOut) }));
  const slotsOn = (b: Backend) => pairs.map((p) => (p === null ? null : { rank: p.rank, scale: p.scale, a: upload(b, p.a), bt: upload(b, p.bt) }));
  const [wasmSlots, refSlots] = [slotsOn(wasm), slotsOn(ref)];
  const x = values(numRows * nIn);
  const y = values(numRows * nOut);
  // runs of 5 rows on one slot: groups of 4 and 1
  const rowSlots = Int32Array.from({ length: numRows }, (_, r) => (Math.floor(r / 5) % 4) - 1);
  const run = async (b: Backend, slots: typeof wasmSlots, rows: number, xs: Float32Array, ys: Float32Array, rs: Int32Array) => {
    const out = upload(b, ys);
    b.loraDelta!(out, upload(b, xs), rows, nIn, nOut, rs, slots);
    return b.read(out, rows * nOut);
  };
  const all = await run(wasm, wasmSlots, numRows, x, y, rowSlots);
  for (const r of [5, 6, 8, 9, 15, 19, 22]) {
    const alone = await run(wasm, wasmSlots, 1, x.subarray(r * nIn, (r + 1) * nIn), y.subarray(r * nOut, (r + 1) * nOut), rowSlots.subarray(r, r + 1));
    expect(alone).toEqual(all.subarray(r * nOut, (r + 1) * nOut));
  }
  // the scalar build runs the same sums in the same order (its groups take the plain loop)
  const scalar = await createBackend({ kind: "wasm", threads: 1, simd: "scalar" });
  backends.push(scalar);
  expect(await run(scalar, slotsOn(scalar), numRows, x, y, rowSlots)).toEqual(all);
  const want = await run(ref, refSlots, numRows, x, y, rowSlots);
  let worst = 0;
  for (let i = 0; i < y.length; i++) worst = Math.max(worst, Math.abs(all[i]! - want[i]!));
  expect(worst).toBeLessThan(1e-5);
});

describe("a batch mixing adapters and the base model", () => {
  const PROMPTS = [[1, 20, 33, 47, 5, 9], [1, 7, 7, 100, 12], [1, 64, 3, 250, 18, 77, 2]];
  const SLOTS = [0, 2, -1]; // adapter A in slot 0, B in slot 2, the base
  const STEPS = 12;

  async function newRunner(): Promise<Runner> {
    const runner = new Runner(config, weights, await createBackend({ kind: "wasm", threads: 2 }));
    runner.allocateKvCache(3 * 2, 16);
    runner.enableLora(3);
    runner.loadLora(0, A);
    runner.loadLora(2, B);
    return runner;
  }
  const table = (i: number) => Int32Array.of(2 * i, 2 * i + 1);

  /** Greedy decoding of `which` sequences together in one batch per step: their tokens and every step's logits. */
  async function decode(runner: Runner, which: number[]): Promise<{ tokens: number[][]; logits: Float32Array[][] }> {
    const tokens = which.map(() => [] as number[]);
    const logits = which.map(() => [] as Float32Array[]);
    const lengths = which.map((i) => PROMPTS[i]!.length);
    for (let step = 0; step <= STEPS; step++) {
      const sequences: SequenceChunk[] = which.map((i, j) => step === 0
        ? { tokenIds: Int32Array.from(PROMPTS[i]!), startPos: 0, blockTable: table(i), logits: "last", loraSlot: SLOTS[i] }
        : { tokenIds: Int32Array.of(tokens[j]!.at(-1)!), startPos: lengths[j]! + step - 1, blockTable: table(i), logits: "last", loraSlot: SLOTS[i] });
      const out = await runner.execute({ sequences });
      which.forEach((_, j) => {
        const row = out.logits.subarray(out.rowStart[j]! * config.vocabSize, (out.rowStart[j]! + 1) * config.vocabSize).slice();
        logits[j]!.push(row);
        tokens[j]!.push(argmax(row));
      });
    }
    return { tokens, logits };
  }

  test("every row gets the same logits and greedy tokens as alone; the adapters' rows are the oracle's", async () => {
    const runner = await newRunner();
    const mixed = await decode(runner, [0, 1, 2]);
    runner.dispose();
    for (const i of [0, 1, 2]) {
      const alone = await newRunner();
      const one = await decode(alone, [i]);
      alone.dispose();
      expect(mixed.tokens[i]).toEqual(one.tokens[0]!);
      mixed.logits[i]!.forEach((row, s) => expect(row).toEqual(one.logits[0]![s]!));
    }
    // the three rows differ: each adapter changed its sequence (same prompt in every slot would show it too)
    const oracle = (i: number) => {
      const lora = SLOTS[i]! < 0 ? undefined : { adapter: SLOTS[i] === 0 ? A : B, scale: 1 };
      const ref = new ReferenceForward(config, weights, 64, lora === undefined ? {} : { lora });
      const all = [...PROMPTS[i]!, ...mixed.tokens[i]!];
      const rows: Float32Array[] = [];
      for (let pos = 0; pos < all.length - 1; pos++) {
        const l = ref.forward(all[pos]!, pos);
        if (pos >= PROMPTS[i]!.length - 1) rows.push(l.slice());
      }
      return rows;
    };
    for (const i of [0, 1, 2]) {
      const want = oracle(i);
      let worst = 0;
      want.forEach((row, s) => row.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - mixed.logits[i]![s]![j]!)))));
      // q8_0 weights: the kernels read q8_0 activations, the oracle exact f32 (test/model/runner.test.ts's wasm q8_0 bound)
      expect(worst).toBeLessThan(0.1);
    }
    // with the adapters swapped in the slots, the base row stays as it was and the adapted rows change
    const swapped = await newRunner();
    swapped.loadLora(0, B);
    swapped.loadLora(2, A);
    const other = await decode(swapped, [0, 1, 2]);
    swapped.dispose();
    other.logits[2]!.forEach((row, s) => expect(row).toEqual(mixed.logits[2]![s]!));
    expect(other.logits[0]![0]).not.toEqual(mixed.logits[0]![0]);
  });

  test("unloading a slot returns its rows to the base model", async () => {
    const runner = await newRunner();
    runner.unloadLora(0);
    const r = await decode(runner, [0, 2]);
    runner.dispose();
    const base = new Runner(config, weights, await createBackend({ kind: "wasm", threads: 2 }));
    base.allocateKvCache(6, 16);
    const plain = await decode(base, [0, 2]);
    base.dispose();
    expect(r.logits).toEqual(plain.logits);
  });
});

describe("backends without the per-row kernel", () => {
  test("a split WASM model and a backend lacking loraDelta refuse LoRA with one line", async () => {
    const { loraDelta: _, ...noKernel } = new ReferenceBackend() as unknown as Record<string, unknown>;
    const fake = { ...noKernel, name: "webgpu" } as unknown as Backend;
    expect(() => new LoraSlots(fake, 2, 2)).toThrow(/^LoRA adapters are not supported on the webgpu backend \(they run on the single-memory WASM backend\); drop --enable-lora$/);
    const runner = new Runner(config, weights, await createBackend({ kind: "wasm", threads: 1 }));
    expect(() => runner.loadLora(0, A)).toThrow("runner: enableLora was not called");
    expect(() => { runner.enableLora(2); runner.loadLora(2, A); }).toThrow("LoRA slot 2 is outside 0..1 (max_loras 2)");
    runner.dispose();
  });
});
