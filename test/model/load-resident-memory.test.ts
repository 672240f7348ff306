/**
 * Loading a model keeps neither the GGUF's file pages nor a copy of each tensor resident (wasm-backend.ts reads each
 * tensor from the file through one bounded buffer, backend/weight-chunks.ts): a ~50 MB model of q8_0 / q4_K / q6_K
 * tensors, split into two GGUF parts and loaded over two wasm32 memories in a process of its own
 * (load-memory-probe.ts), must grow that process's file-backed resident pages by a small fraction of the file, and its
 * peak resident memory by little more than the heap it fills. Before positioned reads the whole file stayed mapped
 * and resident until the load ended (RssFile grew by the file, VmHWM by heap + file). Reads /proc/self/status: Linux
 * only (skipped elsewhere, with the reason). The same model loaded from the file and from memory gives the same
 * logits bit for bit.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBackend } from "../../src/backend/create-backend.ts";
import { openModelGguf } from "../../src/gguf/model-source.ts";
import { tensorData } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import type { GgufFile } from "../../src/gguf/gguf-file.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { splitGgufFile } from "../helpers/split-gguf-file.ts";
import { makeTinyModel, type TinyShape } from "./tiny-model.ts";

await ensureKernels();

/** ~50 MB: large beside the process's own few MB of noise, small enough to build and load in about a second each */
const SHAPE: TinyShape = {
  architecture: "llama", vocabSize: 8192, dim: 512, hiddenDim: 1536, numLayers: 12, numHeads: 8, numKvHeads: 4, headDim: 64, tied: false, contextLength: 256,
};
/** attention q4_K, FFN q8_0, output q6_K: the three repack paths of a q4_k_m-like file; norms stay f32 */
const tensorType = (name: string, type: number): number => (name.startsWith("output.") ? GgmlType.Q6_K : /attn_(q|k|v|output)\./.test(name) ? GgmlType.Q4_K : type);

const dir = mkdtempSync(join(tmpdir(), "fennec-load-rss-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const model = makeTinyModel(SHAPE, { seed: 5, matrixType: GgmlType.Q8_0, tensorType });
const whole = join(dir, "model.gguf");
writeGgufFile(whole, { metadata: model.metadata, tensors: model.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: tensorData(model, t) })) });
const parts = splitGgufFile(whole, join(dir, "model"), 2);
const fileBytes = parts.reduce((sum, p) => sum + statSync(p).size, 0);

async function logitsOf(gguf: GgufFile): Promise<Float32Array> {
  const loaded = loadModel(gguf);
  if (!loaded.ok) throw new Error(loaded.error);
  const runner = new Runner(loaded.value.config, loaded.value.weights, await createBackend({ kind: "wasm", threads: 2 }));
  try {
    runner.allocateKvCache(4, 16);
    const step = await runner.execute({ sequences: [{ tokenIds: Int32Array.of(1, 70, 800, 4000, 8191), startPos: 0, blockTable: Int32Array.of(0), logits: "all" }] });
    return step.logits;
  } finally {
    runner.dispose();
  }
}

describe("loading a model from a file", () => {
  const linux = process.platform === "linux";
  (linux ? test : test.skip)(`keeps no file pages resident and peaks near the heap it fills${linux ? "" : " (skipped: reads /proc, Linux only)"}`, () => {
    const probe = Bun.spawnSync([process.execPath, join(import.meta.dir, "load-memory-probe.ts"), parts[0]!], { stderr: "pipe" });
    expect(probe.stderr.toString()).toBe("");
    const r = JSON.parse(probe.stdout.toString()) as { before: Record<string, number>; after: Record<string, number>; heapBytes: number; parts: number; tensors: number };
    expect(r.parts).toBe(2);
    expect(r.tensors).toBe(model.tensors.length);
    const kB = 1024;
    // the whole file resident would be +fileBytes; measured +1 MB (bun's own code pages)
    expect((r.after.RssFile! - r.before.RssFile!) * kB).toBeLessThan(0.2 * fileBytes);
    // the heap plus the 8 MiB read buffer and the load's garbage; with the file's pages it was heap + file
    expect((r.after.VmHWM! - r.before.VmRSS!) * kB).toBeLessThan(r.heapBytes + 0.5 * fileBytes);
    expect(r.heapBytes).toBeGreaterThan(fileBytes);
  }, 60_000);

  test("gives the same bits as the same model in memory", async () => {
    const fromFile = await openModelGguf(parts[0]!);
    if (!fromFile.ok) throw new Error(fromFile.error);
    expect(fromFile.value.files?.length).toBe(2);
    expect(await logitsOf(fromFile.value)).toEqual(await logitsOf(model));
  }, 60_000);
});
