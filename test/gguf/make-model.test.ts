/**
 * make-model: tiny random models of every architecture, in several types, load in llama.cpp (node-llama-cpp) and
 * generate; the q4_k_m recipe reproduces the type mix and size the kernels reference (§1.1) reconstructs for the
 * real shapes; the CLI writes a file and rejects bad flags with one line and exit 2.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $ } from "bun";
import type { Llama } from "node-llama-cpp";
import { MODEL_SHAPES, vocabPath, type ModelShape } from "../../scripts/model-shapes.ts";
import { randomModel } from "../../scripts/random-model.ts";
import type { GgufFile } from "../../src/gguf/gguf-file.ts";
import { getU32 } from "../../src/gguf/metadata.ts";
import { readGguf, tensorData } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { byteSize, GgmlType, weightType } from "../../src/tensor/dtypes.ts";
import { disposeLlamaCpp, openLlamaCpp } from "../helpers/llama-cpp.ts";

// llama.cpp loads, model files and the first extraction of llama.cpp's vocab files take seconds on a busy 2-core box
setDefaultTimeout(120_000);

const root = join(import.meta.dir, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "fennec-make-model-"));
const vocabs = new Map<string, GgufFile>();
let llama: Llama;

function vocab(name: ModelShape["vocab"]): GgufFile {
  if (!vocabs.has(name)) {
    const file = readGguf(vocabPath(name));
    if (!file.ok) throw new Error(file.error);
    vocabs.set(name, file.value);
  }
  return vocabs.get(name)!;
}

beforeAll(async () => {
  llama = await openLlamaCpp();
});
afterAll(async () => {
  await disposeLlamaCpp(llama);
  rmSync(dir, { recursive: true, force: true });
});

const CASES: [string, string][] = [
  ["tiny-smollm2-135m", "q8_0"], ["tiny-smollm2-135m", "f16"], ["tiny-smollm2-135m", "q4_k_m"],
  ["tiny-qwen2.5-0.5b", "q4_0"], ["tiny-qwen2.5-0.5b", "q6_k"],
  ["tiny-qwen3-0.6b", "q4_k_m"], ["tiny-qwen3-0.6b", "q5_1"],
  ["tiny-llama-3.2-1b", "q5_k"], ["tiny-llama-3.2-1b", "q4_1"],
  ["tiny-phi-3.5-mini", "q4_k_m"], ["tiny-smollm3-3b", "q8_0"],
  // gemma3: make-model's gemma3-270m shape is loaded by llama.cpp in test/model/llamacpp-gemma3.test.ts
];

describe("tiny random models load in llama.cpp and generate", () => {
  test.each(CASES)("%s %s", async (shapeName, type) => {
    const shape = MODEL_SHAPES[shapeName]!;
    const path = join(dir, `${shapeName}-${type}.gguf`);
    writeGgufFile(path, randomModel({ shapeName, shape, type, seed: 7, vocab: vocab(shape.vocab) }));
    const file = readGguf(path);
    if (!file.ok) throw new Error(file.error);
    expect(file.value.metadata.get("general.architecture")?.value).toBe(shape.architecture);
    const model = await llama.loadModel({ modelPath: path });
    try {
      expect(model.fileInfo.metadata.general.architecture as string).toBe(shape.architecture);
      const context = await model.createContext({ contextSize: 128, batchSize: 32, threads: 1 });
      const generated: number[] = [];
      for await (const token of context.getSequence().evaluate([...model.tokenize("Hello world")], { temperature: 0 })) {
        generated.push(Number(token));
        if (generated.length === 8) break;
      }
      expect(generated.length).toBe(8);
      const numTokens = (vocab(shape.vocab).metadata.get("tokenizer.ggml.tokens")!.value as { values: unknown[] }).values.length;
      for (const id of generated) expect(id).toBeLessThan(numTokens);
      await context.dispose();
    } finally {
      await model.dispose();
    }
  }, 120_000);
});

describe("rope scaling and fused tensors as llama.cpp's converter writes them", () => {
  test("llama-3.2-1b: rope_freqs from config.json's llama3 rope_scaling (1 for fast dims, 32 for slow ones)", () => {
    const shape = MODEL_SHAPES["tiny-llama-3.2-1b"]!;
    const m = randomModel({ shapeName: "t", shape, type: "f32", seed: 1, vocab: vocab(shape.vocab) });
    const t = m.tensors.find((x) => x.name === "rope_freqs.weight")!;
    expect(t.shape).toEqual([shape.headDim / 2]);
    const f = new Float32Array((t.data as () => Uint8Array)().slice().buffer);
    expect(f[0]).toBe(1);
    expect(f[f.length - 1]).toBe(32);
    for (let i = 1; i < f.length; i++) expect(f[i]!).toBeGreaterThanOrEqual(f[i - 1]!);
    expect(m.metadata.has("llama.rope.scaling.type")).toBe(false);
  });

  test("phi-3.5-mini: attn_qkv and a 2x ffn_up, no ffn_gate; LongRoPE factors and attn_factor sqrt(1 + ln 32 / ln 4096)", () => {
    const shape = MODEL_SHAPES["phi-3.5-mini"]!;
    const m = randomModel({ shapeName: "t", shape: { ...shape, numLayers: 1 }, type: "q8_0", seed: 1, vocab: vocab(shape.vocab) });
    const byName = new Map(m.tensors.map((t) => [t.name, t]));
    expect(byName.get("blk.0.attn_qkv.weight")!.shape).toEqual([3072, 3 * 3072]);
    expect(byName.get("blk.0.ffn_up.weight")!.shape).toEqual([3072, 2 * 8192]);
    expect(byName.has("blk.0.ffn_gate.weight") || byName.has("blk.0.attn_q.weight")).toBe(false);
    expect(byName.get("rope_factors_long.weight")!.shape).toEqual([48]);
    expect(byName.get("rope_factors_short.weight")!.shape).toEqual([48]);
    expect(m.metadata.get("phi3.rope.scaling.original_context_length")?.value).toBe(4096);
    expect(m.metadata.get("phi3.rope.scaling.attn_factor")?.value as number).toBeCloseTo(Math.sqrt(1 + Math.log(32) / Math.log(4096)), 6);
  });
});

describe("weights", () => {
  test("one seed gives the same underlying weights in every type; another seed does not", () => {
    const shape = { ...MODEL_SHAPES["tiny-smollm2-135m"]!, numLayers: 1 };
    const q = (type: string, seed: number) => {
      const m = randomModel({ shapeName: "t", shape, type, seed, vocab: vocab(shape.vocab) });
      const t = m.tensors.find((x) => x.name === "blk.0.attn_q.weight")!;
      const w = weightType(t.type)!;
      const n = t.shape[0]! * t.shape[1]!;
      const out = new Float32Array(n);
      w.dequantize((t.data as () => Uint8Array)(), out, n);
      return out;
    };
    const f32 = q("f32", 3), q8 = q("q8_0", 3), other = q("f32", 4);
    let maxDiff = 0, sumSq = 0;
    for (let i = 0; i < f32.length; i++) { maxDiff = Math.max(maxDiff, Math.abs(f32[i]! - q8[i]!)); sumSq += f32[i]! ** 2; }
    const std = Math.sqrt(sumSq / f32.length);
    expect(std).toBeGreaterThan(0.018);
    expect(std).toBeLessThan(0.022);
    expect(maxDiff).toBeLessThan(0.001); // q8_0 step of a 0.07-wide block
    expect(other[0]).not.toBe(f32[0]);
  });
});

describe("q4_k_m recipe on the real shapes (kernels reference §1.1)", () => {
  // [shape, share of 2-D weights per type (%), size MB] as reconstructed in the reference
  const EXPECTED: [string, Record<string, number>, number][] = [
    ["smollm2-135m", { q5_0: 58, q8_0: 22, q4_k: 11, q6_k: 9 }, 104],
    ["qwen2.5-0.5b", { q5_0: 51, q8_0: 28, q4_k: 11, q6_k: 11 }, 392],
    ["llama-3.2-1b", { q4_k: 67, q6_k: 33 }, 800],
    // the published Llama-3.1-8B-Instruct-Q4_K_M.gguf is 4.92 GB, Qwen2.5-7B-Instruct-Q4_K_M.gguf 4.68 GB
    ["llama-3.1-8b", { q4_k: 81, q6_k: 19 }, 4920],
    ["qwen2.5-7b", { q4_k: 80, q6_k: 20 }, 4680],
  ];
  test.each(EXPECTED)("%s", (shapeName, shares, sizeMB) => {
    const shape = MODEL_SHAPES[shapeName]!;
    const m = randomModel({ shapeName, shape, type: "q4_k_m", seed: 0, vocab: vocab(shape.vocab) });
    const counts = new Map<string, number>();
    let total = 0, bytes = 0;
    for (const t of m.tensors) {
      if (t.shape.length === 1) { expect(t.type).toBe(GgmlType.F32); continue; }
      const n = t.shape.reduce((a, b) => a * b, 1);
      const w = weightType(t.type)!;
      counts.set(w.name, (counts.get(w.name) ?? 0) + n);
      total += n;
      bytes += byteSize(w, n);
    }
    expect([...counts.keys()].sort()).toEqual(Object.keys(shares).sort());
    for (const [name, percent] of Object.entries(shares)) expect(Math.abs((100 * counts.get(name)!) / total - percent)).toBeLessThan(1.5);
    expect(Math.abs(bytes / 1e6 - sizeMB) / sizeMB).toBeLessThan(0.02);
  });
});

describe("make-model CLI", () => {
  test("writes a file with the requested overrides", async () => {
    const out = join(dir, "cli.gguf");
    const r = await $`${process.execPath} run make-model -- --shape tiny-smollm2-135m --type q4_0 --layers 1 --seed 5 --out ${out}`.cwd(root).quiet().nothrow();
    expect(r.exitCode).toBe(0);
    const file = readGguf(out);
    if (!file.ok) throw new Error(file.error);
    expect(getU32(file.value, "llama.block_count")).toEqual({ ok: true, value: 1 });
    expect(file.value.tensors.find((t) => t.name === "blk.0.attn_q.weight")!.type).toBe(GgmlType.Q4_0);
    expect(tensorData(file.value, file.value.tensors[0]!).length).toBe(byteSize(weightType(GgmlType.Q4_0)!, 256 * 50257));
  }, 60_000);

  test.each([
    [["--shape", "nope", "--type", "q8_0", "--out", "x.gguf"], /unknown shape "nope"/],
    [["--shape", "tiny-qwen3-0.6b", "--type", "q3_k", "--out", "x.gguf"], /unknown type "q3_k"/],
    [["--shape", "tiny-qwen3-0.6b", "--type", "q8_0"], /--shape, --type and --out \(or --lora-out alone\) are required/],
    [["--shape", "tiny-qwen3-0.6b", "--type", "q8_0", "--out", "x.gguf", "--bogus", "1"], /unknown flag --bogus/],
    [["--shape", "tiny-qwen3-0.6b", "--type", "q8_0", "--out", "x.gguf", "--layers", "0"], /--layers must be a positive integer/],
  ])("bad flags: %p", async (args, message) => {
    const r = await $`${process.execPath} scripts/make-model.ts ${args}`.cwd(root).quiet().nothrow();
    expect(r.exitCode).toBe(2);
    const stderr = r.stderr.toString();
    expect(stderr.split("\n")[0]).toMatch(/^make-model: /);
    expect(stderr).toMatch(message);
    expect(stderr).not.toContain("    at ");
  });
});
