/**
 * `fennec inspect` and the MFU figures on mixture-of-experts models: active parameters are the total less the experts
 * a token is not routed to (counted here from the shape, not from the tensors), the bytes a decoded token reads are
 * the heap bytes of every weight but the unrouted experts (counted from each expert's own slice as the forward pass
 * loads it) and one embedding row, and a step's weight reads grow with its tokens' distinct experts up to all of them.
 */
import { describe, expect, test } from "bun:test";
import { weightHeapBytes } from "../../src/backend/wasm/wasm-weight.ts";
import { factsText, inspectModel } from "../../src/commands/inspect.ts";
import { shapeCost, stepCost } from "../../src/metrics/mfu.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { expertRows } from "../../src/model/weights.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { makeTinyModel, TINY_MOE_SHAPES, TINY_SHAPES } from "../model/tiny-model.ts";

describe.each(["qwen3moe", "gpt-oss", "granitemoe"])("%s", (name) => {
  const shape = TINY_MOE_SHAPES[name]!;
  const gguf = makeTinyModel(shape, { matrixType: GgmlType.Q8_0, tensorType: (t, type) => (t.includes("_exps.weight") ? GgmlType.MXFP4 : type) });

  test("active parameters and the bytes one decoded token reads", () => {
    const facts = inspectModel(gguf, null);
    if (!facts.ok) throw new Error(facts.error);
    const f = facts.value;
    const e = shape.experts!;
    // one expert's gate, up and down (and gpt-oss's biases of each) per layer
    const perExpert = 3 * shape.dim * e.hiddenDim + (name === "gpt-oss" ? 2 * e.hiddenDim + shape.dim : 0);
    expect(f.experts).toEqual({ count: e.count, used: e.used });
    expect(f.active_parameters).toBe(f.parameters - shape.numLayers * (e.count - e.used) * perExpert);

    const loaded = loadModel(gguf);
    if (!loaded.ok) throw new Error(loaded.error);
    const { weights } = loaded.value;
    let expected = 0;
    const heap = (w: { type: GgmlType; rows: number; cols: number }) => weightHeapBytes(w.type, w.rows, w.cols);
    const stacked = new Set(["ffnGateExps", "ffnUpExps", "ffnDownExps", "ffnGateExpsBias", "ffnUpExpsBias", "ffnDownExpsBias"]);
    for (const layer of weights.layers) {
      for (const [key, w] of Object.entries(layer)) {
        if (w === null || w === undefined) continue;
        // k experts' own slices, as moe-ffn.ts loads them (a bias row's bytes: the heap pads one short row, unread)
        const slice = stacked.has(key) ? expertRows(w, 0, e.count) : null;
        expected += slice === null ? heap(w) : e.used * (key.endsWith("Bias") ? slice.data.length : heap(slice));
      }
    }
    expected += heap(weights.outputNorm) + (weights.output === weights.tokenEmbd ? heap(weights.tokenEmbd) : heap(weights.output) + heap(weights.tokenEmbd) / weights.tokenEmbd.rows);
    expect(f.memory.weights_bytes_read_per_token).toBe(Math.round(expected));
    expect(f.memory.weights_bytes_read_per_token).toBeLessThan(f.memory.weights_heap_bytes);
    expect(factsText(f)).toMatch(new RegExp(`\\(${e.used} of ${e.count} experts routed\\)`));
    expect(factsText(f)).toMatch(/weights read per decoded token +[\d.]+ (KiB|MB|bytes) \(the routed experts only\)/);
  });

  test("MFU: FLOPs count the active parameters, a step reads min(E, k x tokens) experts per layer", () => {
    const loaded = loadModel(gguf);
    if (!loaded.ok) throw new Error(loaded.error);
    const config = loaded.value.config;
    const e = shape.experts!;
    const cost = shapeCost(config, 1, 2);
    const expertBytes = shape.numLayers * 3 * shape.dim * e.hiddenDim;
    const one = stepCost(cost, 1, 0);
    expect(one.flops).toBe(2 * cost.matmulParams);
    expect(one.readBytes).toBe(cost.weightBytes);
    // 2 tokens route to at most 2k experts; 64 tokens to all E
    expect(stepCost(cost, 2, 0).readBytes).toBe(cost.weightBytes + Math.min(e.count - e.used, e.used) * expertBytes);
    expect(stepCost(cost, 64, 0).readBytes).toBe(cost.weightBytes + (e.count - e.used) * expertBytes);
  });
});

test("a dense model has no active-parameter row, and reads every weight but the embedding table per token", () => {
  const shape = TINY_SHAPES.qwen2!;
  const facts = inspectModel(makeTinyModel(shape, { matrixType: GgmlType.Q8_0 }), null);
  if (!facts.ok) throw new Error(facts.error);
  expect(facts.value.active_parameters).toBeUndefined();
  expect(factsText(facts.value)).not.toContain("active ");
  const embd = facts.value.tensors.find((t) => t.name === "token_embd.weight")!;
  expect(facts.value.memory.weights_bytes_read_per_token).toBe(Math.round(facts.value.memory.weights_heap_bytes - embd.heap_bytes! + embd.heap_bytes! / shape.vocabSize));
});
