/**
 * The whole stack on the WASM backend: the default model (stories260K, built by build.ts into build/) must reproduce
 * llama.cpp's 255 greedy ids from BOS on every kernel build, with 2 threads. Skips (with the reason) when the model
 * has not been built.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { readGguf } from "../../src/gguf/reader.ts";
import { argmax, decodeTokens } from "../../src/model/decode-loop.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";

await ensureKernels();
const { createWasmBackend } = await import("../../src/backend/wasm/wasm-backend.ts");
const { supportsLevel } = await import("../../src/backend/wasm/kernel-module.ts");

const root = join(import.meta.dir, "..", "..");
const modelPath = join(root, "build", "default-model.gguf");
const goldenPath = join(root, "..", "shared", "models", "stories260K-golden.json");
const missing = !existsSync(modelPath) ? `${modelPath} not built (bun run build.ts --skip-compile)` : !existsSync(goldenPath) ? `${goldenPath} missing` : null;

describe("stories260K golden greedy ids on the wasm backend", () => {
  if (missing !== null) {
    test.skip(`skipped: ${missing}`, () => {});
    return;
  }
  const golden = JSON.parse(readFileSync(goldenPath, "utf8")) as { greedyFromBos: { ids: number[] } };
  for (const level of ["scalar", "simd", "relaxed-simd"] as const) {
    const it = supportsLevel(level) ? test : test.skip;
    it(`${level}, 2 threads: 255 ids`, async () => {
      const gguf = readGguf(modelPath);
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
