/**
 * The whole stack on the WASM backend: the default model (stories260K, built by build.ts into build/) must reproduce
 * llama.cpp's 255 greedy ids from BOS (test/fixtures/stories260K-golden.json) on every kernel build, with 2 threads.
 */
import { describe, expect, test } from "bun:test";
import { defaultModelPath } from "../../src/gguf/default-model.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { argmax, decodeTokens } from "../../src/model/decode-loop.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { readGolden } from "../helpers/default-model-files.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";

await ensureKernels();
const { createWasmBackend } = await import("../../src/backend/wasm/wasm-backend.ts");
const { supportsLevel } = await import("../../src/backend/wasm/kernel-module.ts");

describe("stories260K golden greedy ids on the wasm backend", () => {
  const golden = readGolden();
  for (const level of ["scalar", "simd", "relaxed-simd"] as const) {
    const it = supportsLevel(level) ? test : test.skip;
    it(`${level}, 2 threads: 255 ids`, async () => {
      const gguf = readGguf(defaultModelPath());
      if (!gguf.ok) throw new Error(gguf.error);
      const model = loadModel(gguf.value);
      if (!model.ok) throw new Error(model.error);
      const backend = await createWasmBackend({ threads: 2, simd: level });
      const runner = new Runner(model.value.config, model.value.weights, backend);
      const ids: number[] = [];
      const want = golden.greedyFromBos.ids;
      for await (const id of decodeTokens(runner, [1], { maxTokens: want.length, stopIds: [1, 2], pick: argmax })) ids.push(id);
      runner.dispose();
      expect(ids).toEqual(want);
    });
  }
});
