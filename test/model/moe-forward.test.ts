/**
 * Mixture-of-experts and Granite models on every fast path against the plain oracle (reference-forward.ts): the
 * batched forward on the reference backend and on the WASM kernels (f32 and q8_0 / MXFP4 experts) give the oracle's
 * logits for a prompt run as one prefill (every row's logits: each row routed on its own) and then decode steps; the
 * routing math on hand-made logits; the config errors of expert metadata are one line each.
 */
import { describe, expect, test } from "bun:test";
import { createBackend } from "../../src/backend/create-backend.ts";
import type { Backend } from "../../src/backend/backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { GgufValueType } from "../../src/gguf/gguf-file.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { readModelConfig } from "../../src/model/read-model-config.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { Runner } from "../../src/model/runner.ts";
import { groupByExpert, routeExperts } from "../../src/model/moe-routing.ts";
import { shapeCost } from "../../src/metrics/mfu.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { maxAbsDiff } from "../helpers/vectors.ts";
import { makeTinyModel, TINY_MOE_SHAPES } from "./tiny-model.ts";

await ensureKernels();

const PROMPT = [1, 5, 9, 2, 33, 17, 40, 8, 12, 3];
const u32 = (value: number) => ({ type: GgufValueType.UINT32, value });

describe.each(Object.keys(TINY_MOE_SHAPES))("%s", (name) => {
  const shape = TINY_MOE_SHAPES[name]!;
  test.each([["f32", GgmlType.F32], ["q8_0", GgmlType.Q8_0], ["mxfp4", GgmlType.MXFP4]] as const)("%s: reference backend and WASM match the oracle, prefill then decode", async (_t, type) => {
    // experts in the type; MXFP4 only for the stacked experts (as gpt-oss files), the rest q8_0
    const loaded = loadModel(makeTinyModel(shape, {
      seed: 7, matrixType: type === GgmlType.MXFP4 ? GgmlType.Q8_0 : type,
      tensorType: (tensor, t) => (type === GgmlType.MXFP4 && tensor.includes("_exps.") ? GgmlType.MXFP4 : t),
    }));
    if (!loaded.ok) throw new Error(loaded.error);
    const { config, weights } = loaded.value;
    const oracle = new ReferenceForward(config, weights, 64);
    const expected = PROMPT.map((t, pos) => Float32Array.from(oracle.forward(t, pos)));
    const backends: [string, Backend][] = [["reference", new ReferenceBackend()], ["wasm", await createBackend({ kind: "wasm", threads: 2 })]];
    for (const [label, backend] of backends) {
      const runner = new Runner(config, weights, backend);
      runner.allocateKvCache(4, 16);
      const table = Int32Array.of(0, 1, 2, 3);
      const split = 6;
      const prefill = await runner.execute({ sequences: [{ tokenIds: Int32Array.from(PROMPT.slice(0, split)), startPos: 0, blockTable: table, logits: "all" }] });
      const got: Float32Array[] = Array.from({ length: split }, (_, i) => prefill.logits.slice(i * config.vocabSize, (i + 1) * config.vocabSize));
      for (let pos = split; pos < PROMPT.length; pos++) {
        got.push((await runner.execute({ sequences: [{ tokenIds: Int32Array.of(PROMPT[pos]!), startPos: pos, blockTable: table, logits: "last" }] })).logits);
      }
      runner.dispose();
      // runner.test.ts's bounds: the WASM KV cache is f16 and its kernels read q8_0 activations for quantized weights
      // (as ggml), the oracle is exact f32
      const bound = label === "reference" ? 1e-4 : type === GgmlType.F32 ? 3e-3 : 0.1;
      for (let pos = 0; pos < PROMPT.length; pos++) expect(maxAbsDiff(got[pos]!, expected[pos]!)).toBeLessThan(bound);
    }
  });
});

test("a backend without the routed-expert ops (WebGPU) refuses a mixture-of-experts model with one line", () => {
  const loaded = loadModel(makeTinyModel(TINY_MOE_SHAPES.qwen3moe!));
  if (!loaded.ok) throw new Error(loaded.error);
  const reference = new ReferenceBackend();
  const withoutMoe = new Proxy(reference, { get: (target, key) => (key === "scatterRows" || key === "weightedRowSum" ? undefined : Reflect.get(target, key)) });
  expect(() => new Runner(loaded.value.config, loaded.value.weights, withoutMoe)).toThrow(/the reference backend does not run mixture-of-experts models/);
});

test("MFU counts a mixture-of-experts model's active parameters: the router, k experts and the shared one", () => {
  const config = readModelConfig(makeTinyModel(TINY_MOE_SHAPES.granitemoe!));
  if (!config.ok) throw new Error(config.error);
  const { dim, vocabSize, numLayers, numHeads, numKvHeads, headDim } = config.value;
  const attention = 2 * dim * numHeads * headDim + 2 * dim * numKvHeads * headDim;
  // 8 experts of 64, 2 routed, a shared expert of 32
  const ffn = dim * 8 + 3 * dim * 64 * 2 + 3 * dim * 32;
  expect(shapeCost(config.value, 1, 2).matmulParams).toBe(numLayers * (attention + ffn) + dim * vocabSize);
});

describe("routing", () => {
  const moe = { expertCount: 6, expertUsedCount: 3, expertHiddenDim: 4, gating: "softmax" as const, normTopK: true };
  test("softmax, the k best in descending order (ties: lower id), renormalised or not", () => {
    const logits = Float32Array.of(0.5, 2, -1, 2, 1, 0.5);
    const { ids, weights } = routeExperts(logits, 1, moe);
    expect(Array.from(ids)).toEqual([1, 3, 4]);
    const e = Array.from(logits, Math.exp);
    const sum = e.reduce((a, b) => a + b, 0);
    const chosen = (e[1]! + e[3]! + e[4]!) / sum;
    expect(weights[0]).toBeCloseTo(e[1]! / sum / chosen, 6);
    expect(weights[0]! + weights[1]! + weights[2]!).toBeCloseTo(1, 6);
    const plain = routeExperts(logits, 1, { ...moe, normTopK: false });
    expect(plain.weights[2]).toBeCloseTo(e[4]! / sum, 6);
  });

  test("rows are grouped by expert in token order, with their (row, slot) places", () => {
    const ids = Int32Array.of(2, 0, 0, 2, 1, 2); // 3 rows, k = 2
    expect(groupByExpert(ids, 2, 4).map((g) => [g.expert, Array.from(g.rows), Array.from(g.slots)])).toEqual([
      [0, [0, 1], [1, 2]], [1, [2], [4]], [2, [0, 1, 2], [0, 3, 5]],
    ]);
  });
});

describe("expert metadata errors", () => {
  const qwen3moe = TINY_MOE_SHAPES.qwen3moe!;
  test.each([
    [{ "qwen3moe.expert_used_count": u32(9) }, /expert_used_count = 9 is more than qwen3moe.expert_count = 8/],
    [{ "qwen3moe.expert_count": null }, /missing metadata qwen3moe.expert_count/],
    [{ "qwen3moe.expert_group_count": u32(2) }, /grouped expert routing/],
  ] as const)("%o", (metadata, message) => {
    const config = readModelConfig(makeTinyModel(qwen3moe, { metadata }));
    expect(config.ok).toBe(false);
    if (!config.ok) expect(config.error).toMatch(message);
  });

  test("granite without logit_scale, and a dense architecture with experts, are refused", () => {
    const granite = readModelConfig(makeTinyModel(TINY_MOE_SHAPES.granite!, { metadata: { "granite.logit_scale": null } }));
    expect(!granite.ok && granite.error).toMatch(/missing metadata granite.logit_scale/);
    const llama = readModelConfig(makeTinyModel({ ...TINY_MOE_SHAPES.olmoe!, architecture: "llama", experts: undefined }, { metadata: { "llama.expert_count": u32(8) } }));
    expect(!llama.ok && llama.error).toMatch(/llama has no experts/);
  });
});
