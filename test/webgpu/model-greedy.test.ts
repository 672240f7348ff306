/**
 * The whole model on the WebGPU backend (model/runner.ts unchanged, the backend passed in): the default model's greedy
 * output equals the golden ids (llama.cpp, 255 tokens from BOS), and on tiny random models of each architecture the
 * logits match the reference backend's at every position and greedy decoding picks the same tokens.
 * Tolerance: logits within 1e-3 of the reference (f32 on both sides, different summation order); a greedy pick may
 * differ only where the reference's top two logits are within that tolerance (an argmax tie), which ends the comparison.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { createWebGpuBackend } from "../../src/backend/webgpu/webgpu-backend.ts";
import { buildDefaultModel } from "../../src/gguf/default-model-build.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import type { GgufFile } from "../../src/gguf/gguf-file.ts";
import { loadModel } from "../../src/model/load-model.ts";
import type { ModelRunner } from "../../src/model/model-batch.ts";
import { Runner } from "../../src/model/runner.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { EngineCore } from "../../src/engine/engine-core.ts";
import { resolveEngineConfig } from "../../src/engine/engine-sizing.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../../src/engine/sampling-params.ts";
import { DEFAULT_MODEL_INPUTS_DIR, readGolden } from "../helpers/default-model-files.ts";
import { makeTinyModel, TINY_SHAPES, type TinyShape } from "../model/tiny-model.ts";

// a cold Mesa shader cache compiles each pipeline with LLVM: seconds on a busy 2-core machine
setDefaultTimeout(120_000);

const LOGIT_TOLERANCE = 1e-3;
const BLOCK_SIZE = 16;

async function runnerFor(gguf: GgufFile, backend: "webgpu" | "reference", numBlocks: number): Promise<ModelRunner> {
  const model = loadModel(gguf);
  if (!model.ok) throw new Error(model.error);
  const b = backend === "webgpu" ? await createWebGpuBackend({ timeoutMs: 20_000, log: () => {} }) : new ReferenceBackend();
  const runner = new Runner(model.value.config, model.value.weights, b);
  runner.allocateKvCache(numBlocks, BLOCK_SIZE);
  return runner;
}

function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

function topTwoGap(row: Float32Array): number {
  const sorted = Array.from(row).sort((a, b) => b - a);
  return sorted[0]! - sorted[1]!;
}

/** Greedy decoding from `prompt`: a prefill with logits "last", then one token per step. Returns ids and logits. */
async function greedy(runner: ModelRunner, prompt: number[], maxTokens: number, stopIds: number[] = []): Promise<{ ids: number[]; logits: Float32Array[] }> {
  const table = Int32Array.from({ length: Math.ceil((prompt.length + maxTokens) / BLOCK_SIZE) }, (_, i) => i);
  const ids: number[] = [];
  const logits: Float32Array[] = [];
  let step = await runner.execute({ sequences: [{ tokenIds: Int32Array.from(prompt), startPos: 0, blockTable: table, logits: "last" }] });
  for (let i = 0; i < maxTokens; i++) {
    logits.push(step.logits);
    const next = argmax(step.logits);
    if (stopIds.includes(next)) break;
    ids.push(next);
    if (i + 1 === maxTokens) break;
    step = await runner.execute({ sequences: [{ tokenIds: Int32Array.from([next]), startPos: prompt.length + i, blockTable: table, logits: "last" }] });
  }
  return { ids, logits };
}

describe("default model (stories260K)", () => {
  const golden = readGolden();
  const dir = mkdtempSync(join(tmpdir(), "fennec-webgpu-"));
  let gguf: GgufFile;
  beforeAll(async () => {
    const path = join(dir, "default-model.gguf");
    await buildDefaultModel(DEFAULT_MODEL_INPUTS_DIR, path, join(dir, "cache"));
    const read = readGguf(path);
    if (!read.ok) throw new Error(read.error);
    gguf = read.value;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("greedy from BOS equals llama.cpp's golden ids (255 tokens)", async () => {
    const want = golden.greedyFromBos.ids;
    const runner = await runnerFor(gguf, "webgpu", Math.ceil(300 / BLOCK_SIZE));
    const got = await greedy(runner, [1], want.length, [1, 2]);
    runner.dispose();
    expect(got.ids).toEqual(want);
  });
});

const SHAPES: readonly [string, TinyShape, GgmlType][] = [
  ...Object.entries(TINY_SHAPES).map(([name, s]) => [`${name} f32`, s, GgmlType.F32] as [string, TinyShape, GgmlType]),
  ["qwen2 q8_0", TINY_SHAPES.qwen2!, GgmlType.Q8_0],
  ["llama q4_0", TINY_SHAPES.llama!, GgmlType.Q4_0],
  // K-quants need rows of 256: a wider llama
  ["llama q4_k (dim 256)", { ...TINY_SHAPES.llama!, dim: 256, hiddenDim: 256, numHeads: 4, numKvHeads: 2, headDim: 64 }, GgmlType.Q4_K],
  ["qwen3 q6_k (dim 256)", { ...TINY_SHAPES.qwen3!, dim: 256, hiddenDim: 512, numHeads: 4, numKvHeads: 2, headDim: 64 }, GgmlType.Q6_K],
];

describe.each(SHAPES)("tiny %s", (_name, shape, matrixType) => {
  test("logits match the reference backend and greedy picks the same tokens", async () => {
    const gguf = makeTinyModel(shape, { seed: 5, matrixType });
    const prompt = [3, 17, 42, 8, 1];
    const gpu = await runnerFor(gguf, "webgpu", 8);
    const ref = await runnerFor(gguf, "reference", 8);
    const got = await greedy(gpu, prompt, 24);
    const want = await greedy(ref, prompt, 24);
    gpu.dispose();
    ref.dispose();
    for (let i = 0; i < want.ids.length; i++) {
      let worst = 0;
      for (let j = 0; j < want.logits[i]!.length; j++) worst = Math.max(worst, Math.abs(got.logits[i]![j]! - want.logits[i]![j]!));
      expect(worst).toBeLessThan(LOGIT_TOLERANCE);
      if (got.ids[i] !== want.ids[i]) {
        expect(topTwoGap(want.logits[i]!)).toBeLessThan(LOGIT_TOLERANCE);
        return; // an argmax tie: the sequences part here
      }
    }
    expect(got.ids).toEqual(want.ids);
  });
});

test("KV blocks exported after a prefill and imported into another WebGPU runner continue identically (pd handoff)", async () => {
  const gguf = makeTinyModel(TINY_SHAPES.qwen2!, { seed: 9, matrixType: GgmlType.Q8_0 });
  const prompt = Int32Array.from([3, 17, 42, 8, 1, 5, 9]);
  const table = Int32Array.from([2, 0]); // blocks of 16: the prompt and its continuation
  const prefill = await runnerFor(gguf, "webgpu", 4);
  const first = await prefill.execute({ sequences: [{ tokenIds: prompt, startPos: 0, blockTable: table, logits: "last" }] });
  const next = Int32Array.of(argmax(first.logits));
  const decode = await runnerFor(gguf, "webgpu", 4);
  decode.importKvBlocks(table, prefill.exportKvBlocks(table));
  const handedOff = await decode.execute({ sequences: [{ tokenIds: next, startPos: prompt.length, blockTable: table, logits: "last" }] });
  const stayed = await prefill.execute({ sequences: [{ tokenIds: next, startPos: prompt.length, blockTable: table, logits: "last" }] });
  expect(Array.from(handedOff.logits)).toEqual(Array.from(stayed.logits));
  prefill.dispose();
  decode.dispose();
});

test("gemma3 with vLLM's hybrid KV cache manager (sliding groups free their blocks) decodes as the reference with one group", async () => {
  // 6 layers: 4 sliding (window 8) in two groups, 2 full; blocks of 4, a prompt of 7 windows: most sliding blocks are freed
  const shape: TinyShape = { ...TINY_SHAPES.gemma3!, numLayers: 6, slidingWindow: 8, slidingWindowPattern: 3, contextLength: 128 };
  const model = loadModel(makeTinyModel(shape, { seed: 5 }));
  if (!model.ok) throw new Error(model.error);
  const prompt = Array.from({ length: 56 }, (_, i) => (i * 7 + 3) % shape.vocabSize);
  const greedyIds = async (backend: "webgpu" | "reference", disableHybridKvCacheManager: boolean): Promise<{ ids: number[]; rows: Float32Array[]; numGroups: number }> => {
    const b = backend === "webgpu" ? await createWebGpuBackend({ timeoutMs: 20_000, log: () => {} }) : new ReferenceBackend();
    const runner = new Runner(model.value.config, model.value.weights, b);
    const rows: Float32Array[] = [];
    const recording: ModelRunner = {
      config: runner.config, kvBytesPerBlock: (bs, n) => runner.kvBytesPerBlock(bs, n), allocateKvCache: (n, bs, g) => runner.allocateKvCache(n, bs, g),
      execute: async (batch) => { const out = await runner.execute(batch); if (out.logits.length > 0) rows.push(out.logits.slice()); return out; },
      exportKvBlocks: (ids) => runner.exportKvBlocks(ids), importKvBlocks: (ids, d) => runner.importKvBlocks(ids, d), dispose: () => runner.dispose(),
    };
    const args = { maxNumSeqs: 4, maxNumBatchedTokens: 16, maxModelLen: null, blockSize: 4, kvCacheMemoryBytes: null, enablePrefixCaching: true, threads: 1, device: "webgpu" as const, numKvBlocksOverride: 64, disableHybridKvCacheManager };
    const config = resolveEngineConfig(args, recording, 1e9, 1e10);
    if (!config.ok) throw new Error(config.error);
    const engine = new EngineCore(recording, config.value, 0, () => performance.now(), 1);
    engine.addRequest({ requestId: "r", promptTokenIds: prompt, sampling: { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, maxTokens: 16, ignoreEos: true }, arrivalMs: 0 });
    const ids: number[] = [];
    while (engine.hasWork()) for (const d of (await engine.step())!.deltas) ids.push(...d.newTokenIds);
    expect(engine.kv.pool.numFreeBlocks).toBe(64);
    const numGroups = engine.kv.groups.length;
    recording.dispose();
    return { ids, rows, numGroups };
  };
  const gpu = await greedyIds("webgpu", false);
  const ref = await greedyIds("reference", true);
  expect(gpu.numGroups).toBe(3);
  expect(ref.numGroups).toBe(1);
  for (let i = 0; i < ref.ids.length; i++) {
    let worst = 0;
    for (let j = 0; j < ref.rows[i]!.length; j++) worst = Math.max(worst, Math.abs(gpu.rows[i]![j]! - ref.rows[i]![j]!));
    expect(worst).toBeLessThan(LOGIT_TOLERANCE);
    if (gpu.ids[i] !== ref.ids[i]) {
      expect(topTwoGap(ref.rows[i]!)).toBeLessThan(LOGIT_TOLERANCE);
      return;
    }
  }
  expect(gpu.ids).toEqual(ref.ids);
});
