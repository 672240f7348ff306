/**
 * --kv-cache-dtype fp8 (fennec's 8-bit cache: int8 with one scale per token row) end to end on the WASM kernels:
 * logits within the documented tolerance of the f16 cache on random-weight models (every architecture), the default
 * model's golden greedy ids for its first 100 tokens, and the memory: about half the bytes per block, so about twice
 * the blocks for the same --kv-cache-memory.
 */
import { describe, expect, test } from "bun:test";
import { defaultModelPath } from "../../src/gguf/default-model.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { argmax, decodeTokens } from "../../src/model/decode-loop.ts";
import { resolveEngineConfig } from "../../src/engine/engine-sizing.ts";
import { kvCacheDtypeOf } from "../../src/config/cache-dtype.ts";
import type { KvCacheDtype } from "../../src/backend/backend.ts";
import { readGolden } from "../helpers/default-model-files.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { makeTinyModel, TINY_SHAPES } from "./tiny-model.ts";

await ensureKernels();
const { createWasmBackend } = await import("../../src/backend/wasm/wasm-backend.ts");

/** max |logit difference| / rms of the f16 cache's logits that the 8-bit cache may give on random-weight models
 * (measured 0.043 llama, 0.051 qwen2, 0.048 qwen3 over 40 positions; documented in the README) */
const Q8_LOGIT_TOLERANCE = 8e-2;

async function logitsOf(shapeName: string, dtype: KvCacheDtype): Promise<Float32Array> {
  const model = loadModel(makeTinyModel(TINY_SHAPES[shapeName]!, { seed: 3 }));
  if (!model.ok) throw new Error(model.error);
  const backend = await createWasmBackend({ threads: 2 });
  const runner = new Runner(model.value.config, model.value.weights, backend, undefined, dtype);
  runner.allocateKvCache(8, 16);
  const tokens = Int32Array.from({ length: 40 }, (_, i) => (i * 17 + 5) % model.value.config.vocabSize);
  // a 32-token prefill, then 8 decode steps: every logit row after the first reads the cache
  const rows: Float32Array[] = [];
  const table = Int32Array.from([0, 1, 2]);
  const first = await runner.execute({ sequences: [{ tokenIds: tokens.subarray(0, 32), startPos: 0, blockTable: table, logits: "all" }] });
  rows.push(first.logits);
  for (let p = 32; p < 40; p++) rows.push((await runner.execute({ sequences: [{ tokenIds: tokens.subarray(p, p + 1), startPos: p, blockTable: table, logits: "last" }] })).logits);
  runner.dispose();
  const out = new Float32Array(rows.reduce((n, r) => n + r.length, 0));
  let o = 0;
  for (const r of rows) { out.set(r, o); o += r.length; }
  return out;
}

describe("--kv-cache-dtype fp8 (8-bit KV cache)", () => {
  for (const shape of Object.keys(TINY_SHAPES)) {
    test(`${shape}: logits within ${Q8_LOGIT_TOLERANCE} x rms of the f16 cache, and not identical to it`, async () => {
      const f16 = await logitsOf(shape, "f16");
      const q8 = await logitsOf(shape, "q8");
      let sumSq = 0;
      let maxErr = 0;
      for (let i = 0; i < f16.length; i++) { sumSq += f16[i]! ** 2; maxErr = Math.max(maxErr, Math.abs(q8[i]! - f16[i]!)); }
      const rel = maxErr / Math.sqrt(sumSq / f16.length);
      expect(rel).toBeLessThan(Q8_LOGIT_TOLERANCE);
      expect(rel).toBeGreaterThan(0); // really a different cache
    });
  }

  test("the default model keeps its golden greedy ids for 100 tokens; blocks for the same memory about double", async () => {
    const gguf = readGguf(defaultModelPath());
    if (!gguf.ok) throw new Error(gguf.error);
    const model = loadModel(gguf.value);
    if (!model.ok) throw new Error(model.error);
    const want = readGolden().greedyFromBos.ids.slice(0, 100);
    const blocks: number[] = [];
    for (const dtype of ["f16", "q8"] as const) {
      const backend = await createWasmBackend({ threads: 2 });
      const runner = new Runner(model.value.config, model.value.weights, backend, undefined, dtype);
      const ids: number[] = [];
      for await (const id of decodeTokens(runner, [1], { maxTokens: want.length, stopIds: [1, 2], pick: argmax })) ids.push(id);
      expect(ids).toEqual(want);
      const config = resolveEngineConfig({ maxNumSeqs: 4, maxNumBatchedTokens: 64, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: 2 ** 20, enablePrefixCaching: true, threads: 2, device: "cpu" }, runner, 2 ** 30);
      if (!config.ok) throw new Error(config.error);
      blocks.push(config.value.numBlocks);
      runner.dispose();
    }
    // stories260K: kvDim 32, so a token row is 32 int8 + a 4-byte scale against 64 bytes of f16
    expect(blocks[1]! / blocks[0]!).toBeCloseTo(64 / 36, 1);
  });

  test("vLLM's names: fp8 / fp8_e4m3 served, the rest refused with what to use; webgpu refuses 8-bit", () => {
    expect(kvCacheDtypeOf("fp8", "cpu")).toEqual({ ok: true, value: "fp8" });
    expect(kvCacheDtypeOf("fp8_e4m3", "cpu")).toEqual({ ok: true, value: "fp8_e4m3" });
    expect(kvCacheDtypeOf("auto", "webgpu")).toEqual({ ok: true, value: "auto" });
    expect(kvCacheDtypeOf("fp8_e5m2", "cpu")).toEqual({ ok: false, error: "--kv-cache-dtype fp8_e5m2 is not supported by fennec; use auto (f16) or fp8 / fp8_e4m3 (fennec's 8-bit cache)" });
    expect(kvCacheDtypeOf("q8_0", "cpu").ok).toBe(false);
    expect(kvCacheDtypeOf("fp8", "webgpu")).toMatchObject({ ok: false, error: expect.stringContaining("--device webgpu") });
  });
});
