/**
 * Start-up memory accounting (engine/model-placement.ts) on a llama-3.1-8b-shaped q4_k_m model (tensor sizes only,
 * no data): two wasm32 memories with the layers split in two ranges, one line that says so, the KV pool of
 * --kv-cache-memory / --gpu-memory-utilization (what the weights and activations leave of that share of host memory)
 * spread with the layers, and one clear error when the machine is too small. A small model keeps one memory unless
 * FENNEC_WASM_MEMORY_BYTES caps a memory's size.
 */
import { describe, expect, test } from "bun:test";
import type { WeightSource } from "../../src/backend/backend.ts";
import { placeModel } from "../../src/engine/model-placement.ts";
import type { EngineArgs } from "../../src/engine/protocol.ts";
import type { ModelConfig } from "../../src/model/model-config.ts";
import type { LayerWeights, ModelWeights } from "../../src/model/weights.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";

const GiB = 2 ** 30;
const ARGS: EngineArgs = {
  maxNumSeqs: 16, maxNumBatchedTokens: 512, maxModelLen: 8192, blockSize: 16, kvCacheMemoryBytes: null,
  enablePrefixCaching: true, threads: 2, device: "cpu",
};

function config(numLayers: number): ModelConfig {
  return {
    architecture: "llama", name: "llama-3.1-8b-shaped", vocabSize: 128256, dim: 4096, hiddenDim: 14336, numLayers, numHeads: 32, numKvHeads: 8,
    headDim: 128, ropeDim: 128, ropeFreqBase: 500000, ropeNeox: false, rmsEps: 1e-5, contextLength: 131072, tiedEmbeddings: false,
    hasQkvBias: false, hasQkNorm: false,
  };
}

const w = (name: string, type: GgmlType, rows: number, cols: number): WeightSource => ({ name, type, rows, cols, data: new Uint8Array(0) });

function weights(numLayers: number): ModelWeights {
  const layers: LayerWeights[] = Array.from({ length: numLayers }, (_, l) => ({
    attnNorm: w(`blk.${l}.attn_norm.weight`, GgmlType.F32, 1, 4096),
    wq: w(`blk.${l}.attn_q.weight`, GgmlType.Q4_K, 4096, 4096),
    wk: w(`blk.${l}.attn_k.weight`, GgmlType.Q4_K, 1024, 4096),
    wv: w(`blk.${l}.attn_v.weight`, GgmlType.Q6_K, 1024, 4096),
    wo: w(`blk.${l}.attn_output.weight`, GgmlType.Q4_K, 4096, 4096),
    bq: null, bk: null, bv: null, qNorm: null, kNorm: null, attnPostNorm: null, ffnPostNorm: null,
    ffnNorm: w(`blk.${l}.ffn_norm.weight`, GgmlType.F32, 1, 4096),
    wGate: w(`blk.${l}.ffn_gate.weight`, GgmlType.Q4_K, 14336, 4096),
    wUp: w(`blk.${l}.ffn_up.weight`, GgmlType.Q4_K, 14336, 4096),
    wDown: w(`blk.${l}.ffn_down.weight`, GgmlType.Q6_K, 4096, 14336),
  }));
  return {
    tokenEmbd: w("token_embd.weight", GgmlType.Q4_K, 128256, 4096), layers,
    outputNorm: w("output_norm.weight", GgmlType.F32, 1, 4096), output: w("output.weight", GgmlType.Q6_K, 128256, 4096),
  };
}

describe("model placement", () => {
  test("an 8B q4_k_m model with a 1 GiB KV pool: two memories, one line with the layers, weights and KV of each", () => {
    const p = placeModel(config(32), weights(32), { ...ARGS, kvCacheMemoryBytes: GiB }, {}, 8 * GiB, 24 * GiB);
    if (!p.ok) throw new Error(p.error);
    expect(p.value.plan.numMemories).toBe(2);
    const split = p.value.plan.firstLayer[1]!;
    expect(split).toBeGreaterThan(12);
    expect(split).toBeLessThan(20);
    expect(p.value.line).toMatch(new RegExp(`^memory: 2 wasm32 memories of at most 4\\.00 GiB; #0 layers 0-${split - 1}: 2\\.\\d\\d GiB weights \\+ \\d+\\.\\d MiB KV; #1 layers ${split}-31: 2\\.\\d\\d GiB weights \\+ \\d+\\.\\d MiB KV; \\d+\\.\\d MiB activations per memory; 512 KV blocks of 16 tokens$`));
    expect(p.value.kvBlocks).toBe(512); // 1 GiB / (16 tokens x 128 KiB)
  });

  test("--gpu-memory-utilization: the KV pool gets what the weights and activations leave of that share of host memory", () => {
    const p = placeModel(config(32), weights(32), { ...ARGS, kvCacheMemoryFraction: 0.5 }, {}, 8 * GiB, 16 * GiB);
    if (!p.ok) throw new Error(p.error);
    const kvBytes = p.value.kvBlocks * 16 * 128 * 1024;
    expect(kvBytes).toBeLessThanOrEqual(8 * GiB - p.value.modelBytes);
    // sized for the three memories weights + pool looked like needing; two hold them: one memory's activations to spare
    expect(kvBytes).toBeGreaterThan(8 * GiB - p.value.modelBytes - 0.3 * GiB);
    expect(p.value.plan.numMemories).toBe(2); // 5.0 GiB of repacked weights and about 2.5 GiB of KV cache
    const none = placeModel(config(32), weights(32), { ...ARGS, kvCacheMemoryFraction: 0.2 }, {}, 8 * GiB, 16 * GiB);
    expect(none.ok ? "" : none.error).toMatch(/^--gpu-memory-utilization 0\.2 of 17179869184 bytes holds no KV block after \d+ bytes of weights and activations/);
  });

  test("a model too large for the machine is one clear error, before anything is allocated", () => {
    const p = placeModel(config(32), weights(32), { ...ARGS, kvCacheMemoryBytes: 4 * GiB }, {}, 4 * GiB, 6 * GiB);
    const error = p.ok ? "" : p.error;
    expect(error).toMatch(/^this model needs \d+\.\d\d GiB \(\d\.\d\d GiB of weights, 4\.00 GiB of KV cache, \d+\.\d MiB of activations\) and this machine has 6\.00 GiB; lower --kv-cache-memory/);
    // the repacked weights of a 4.8 GiB q4_k_m model: about the file's size (test/kernels/repacked-size.test.ts)
    const weightsGiB = Number(/\((\d\.\d\d) GiB of weights/.exec(error)?.[1]);
    expect(weightsGiB).toBeGreaterThan(4.8);
    expect(weightsGiB).toBeLessThan(5.2);
  });

  test("a small model keeps one memory; FENNEC_WASM_MEMORY_BYTES caps a memory and forces a split; a bad value is refused", () => {
    const one = placeModel(config(2), weights(2), { ...ARGS, kvCacheMemoryBytes: 64 * 2 ** 20 }, {}, 8 * GiB, 24 * GiB);
    expect(one.ok && one.value.plan.numMemories).toBe(1);
    expect(one.ok && one.value.line).toMatch(/^memory: 1 wasm32 memory; #0 layers 0-1: /);
    const two = placeModel(config(2), weights(2), { ...ARGS, kvCacheMemoryBytes: 64 * 2 ** 20 }, { FENNEC_WASM_MEMORY_BYTES: "1G" }, 8 * GiB, 24 * GiB);
    expect(two.ok && two.value.plan.layerMemory).toEqual([0, 1]);
    const bad = placeModel(config(2), weights(2), ARGS, { FENNEC_WASM_MEMORY_BYTES: "lots" }, 8 * GiB, 24 * GiB);
    expect(bad.ok ? "" : bad.error).toBe("FENNEC_WASM_MEMORY_BYTES=lots is not a memory size between 1M and 4G");
  });
});
