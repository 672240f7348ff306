/**
 * A model forced onto several wasm32 memories (a contiguous range of layers, their weights and KV blocks, per memory;
 * wasm/split-wasm-backend.ts) computes the same bits as on one: tiny models of every architecture, tied and untied
 * output, f32 and q8_0 matrices, a batched step of two prefills and then batched decode steps, on 2 threads. The KV
 * blocks export in the one-memory layout. The plan itself (memory-plan.ts) is checked on an 8B-sized model.
 */
import { describe, expect, test } from "bun:test";
import { createBackend } from "../../src/backend/create-backend.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import type { MemoryPlan } from "../../src/backend/wasm/memory-plan.ts";
import { makeTinyModel, TINY_SHAPES } from "../model/tiny-model.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";

await ensureKernels();
const { planMemories, memoryOfTensor } = await import("../../src/backend/wasm/memory-plan.ts");

const BLOCK_SIZE = 4;
const NUM_LAYERS = 5;

/** layers [0, 2) in memory 0, [2, 5) in memory 1; or three memories */
const PLANS: Record<string, MemoryPlan> = {
  one: { numMemories: 1, layerMemory: [0, 0, 0, 0, 0], firstLayer: [0], weightBytes: [0], memoryBytes: 2 ** 32 },
  two: { numMemories: 2, layerMemory: [0, 0, 1, 1, 1], firstLayer: [0, 2], weightBytes: [0, 0], memoryBytes: 2 ** 32 },
  three: { numMemories: 3, layerMemory: [0, 1, 1, 1, 2], firstLayer: [0, 1, 4], weightBytes: [0, 0, 0], memoryBytes: 2 ** 32 },
};

interface Run {
  readonly logits: Float32Array[];
  readonly kv: Uint8Array;
}

async function run(arch: keyof typeof TINY_SHAPES, matrixType: GgmlType, plan: MemoryPlan): Promise<Run> {
  const gguf = makeTinyModel({ ...TINY_SHAPES[arch]!, numLayers: NUM_LAYERS }, { seed: 3, matrixType });
  const model = loadModel(gguf);
  if (!model.ok) throw new Error(model.error);
  const backend = await createBackend({ kind: "wasm", threads: 2, memoryPlan: plan });
  expect(backend.constructor.name).toBe(plan.numMemories > 1 ? "SplitWasmBackend" : "WasmBackend");
  const runner = new Runner(model.value.config, model.value.weights, backend);
  try {
    runner.allocateKvCache(16, BLOCK_SIZE);
    const a = Int32Array.of(0, 1, 2, 3, 4, 5, 6, 7, 8);
    const b = Int32Array.of(3, 4, 5, 6);
    const logits: Float32Array[] = [];
    let step = await runner.execute({ sequences: [
      { tokenIds: b, startPos: 0, blockTable: Int32Array.of(6, 7), logits: "all" },
      { tokenIds: a, startPos: 0, blockTable: Int32Array.of(0, 1, 2, 3), logits: "all" },
    ] });
    logits.push(step.logits);
    let posA = a.length;
    let posB = b.length;
    for (let i = 0; i < 5; i++) {
      step = await runner.execute({ sequences: [
        { tokenIds: Int32Array.of((7 * i + 2) % 61), startPos: posA++, blockTable: Int32Array.of(0, 1, 2, 3), logits: "last" },
        { tokenIds: Int32Array.of((5 * i + 1) % 61), startPos: posB++, blockTable: Int32Array.of(6, 7, 8), logits: "last" },
      ] });
      logits.push(step.logits);
    }
    const kv = runner.exportKvBlocks(Int32Array.of(0, 2, 7));
    // what was exported imports back into other blocks and reads out the same
    runner.importKvBlocks(Int32Array.of(11, 12, 13), kv);
    expect(runner.exportKvBlocks(Int32Array.of(11, 12, 13))).toEqual(kv);
    return { logits, kv };
  } finally {
    runner.dispose();
  }
}

describe("a tiny model over several wasm32 memories gives the same bits as on one", () => {
  const cases = (["llama", "qwen2", "qwen3", "gemma3"] as const).flatMap((arch) => [GgmlType.F32, GgmlType.Q8_0].map((t) => [arch, t] as const));
  test.each(cases)("%s, matrices of ggml type %d", async (arch, matrixType) => {
    const one = await run(arch, matrixType, PLANS.one!);
    expect(one.logits[0]!.length).toBe(13 * 61);
    for (const name of ["two", "three"]) {
      const split = await run(arch, matrixType, PLANS[name]!);
      expect(split.logits).toEqual(one.logits);
      expect(split.kv).toEqual(one.kv);
    }
  }, 60_000);
});

describe("memory plan", () => {
  // llama-3.1-8b q4_k_m: per layer 4 x q4_K [4096 x 4096 / 1024 x 4096] + 3 x [14336 x 4096], token_embd q4_K, output q6_K
  const layerTensors = (l: number) => [
    { name: `blk.${l}.attn_q.weight`, type: GgmlType.Q4_K, rows: 4096, cols: 4096 },
    { name: `blk.${l}.attn_k.weight`, type: GgmlType.Q4_K, rows: 1024, cols: 4096 },
    { name: `blk.${l}.attn_v.weight`, type: GgmlType.Q6_K, rows: 1024, cols: 4096 },
    { name: `blk.${l}.attn_output.weight`, type: GgmlType.Q4_K, rows: 4096, cols: 4096 },
    { name: `blk.${l}.ffn_gate.weight`, type: GgmlType.Q4_K, rows: 14336, cols: 4096 },
    { name: `blk.${l}.ffn_up.weight`, type: GgmlType.Q4_K, rows: 14336, cols: 4096 },
    { name: `blk.${l}.ffn_down.weight`, type: GgmlType.Q6_K, rows: 4096, cols: 14336 },
    { name: `blk.${l}.attn_norm.weight`, type: GgmlType.F32, rows: 1, cols: 4096 },
  ];
  const tensors = [
    { name: "token_embd.weight", type: GgmlType.Q4_K, rows: 128256, cols: 4096 },
    ...Array.from({ length: 32 }, (_, l) => layerTensors(l)).flat(),
    { name: "output_norm.weight", type: GgmlType.F32, rows: 1, cols: 4096 },
    { name: "output.weight", type: GgmlType.Q6_K, rows: 128256, cols: 4096 },
  ];
  const kvBytesPerLayer = 2 ** 30 / 32; // a 1 GiB pool

  test("an 8B q4_k_m model takes two memories, contiguous and balanced, embedding first and head last", () => {
    const plan = planMemories({ tensors, numLayers: 32, kvBytesPerLayer, reserveBytes: 256 * 2 ** 20 });
    if (!plan.ok) throw new Error(plan.error);
    const p = plan.value;
    expect(p.numMemories).toBe(2);
    expect(p.firstLayer[0]).toBe(0);
    expect(p.layerMemory).toEqual(p.layerMemory.slice().sort((a, b) => a - b)); // contiguous ranges
    const total = p.weightBytes[0]! + p.weightBytes[1]!;
    expect(total).toBeGreaterThan(4.5e9);
    expect(Math.abs(p.weightBytes[0]! - p.weightBytes[1]!)).toBeLessThan(0.15 * total);
    for (const w of p.weightBytes) expect(w + 16 * kvBytesPerLayer).toBeLessThan(2 ** 32);
    expect(memoryOfTensor(p, "token_embd.weight")).toBe(0);
    expect(memoryOfTensor(p, "output.weight")).toBe(1);
    expect(memoryOfTensor(p, "blk.31.ffn_up.weight")).toBe(1);
    expect(memoryOfTensor(p, "blk.0.ffn_up.weight")).toBe(0);
  });

  test("a small model stays in one memory; a cap on a memory's size forces a split", () => {
    const small = tensors.filter((t) => t.name.startsWith("blk.0.") || t.name.startsWith("blk.1."));
    const one = planMemories({ tensors: small, numLayers: 2, kvBytesPerLayer: 2 ** 20, reserveBytes: 2 ** 20 });
    expect(one.ok && one.value.numMemories).toBe(1);
    const forced = planMemories({ tensors: small, numLayers: 2, kvBytesPerLayer: 2 ** 20, reserveBytes: 2 ** 20, memoryBytes: 200 * 2 ** 20 }); // a layer is 0.14 GiB
    expect(forced.ok && forced.value.layerMemory).toEqual([0, 1]);
  });

  test("a layer larger than a memory is one clear error", () => {
    const plan = planMemories({ tensors, numLayers: 32, kvBytesPerLayer, reserveBytes: 0, memoryBytes: 2 ** 28 });
    expect(plan.ok).toBe(false);
    if (!plan.ok) expect(plan.error).toMatch(/^one layer of this model \(.* GiB of weights and KV cache, plus .* GiB of activations\) does not fit in a 0\.25 GiB wasm32 memory; lower/);
  });
});
