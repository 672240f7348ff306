/**
 * Reading a LoRA adapter against its base: make-model's adapters read back with the shapes, rank and alpha asked
 * for; every mismatch with the base is one line naming it; the reference forward's update is y += scale * B(A x).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mdF32, mdString } from "../../src/gguf/metadata.ts";
import { KEY } from "../../src/gguf/names.ts";
import { parseGguf } from "../../src/gguf/reader.ts";
import { serializeGguf, writeGgufFile, type GgufToWrite } from "../../src/gguf/writer.ts";
import { loraScale, loraUpdate } from "../../src/lora/lora-adapter.ts";
import { parseLoraAdapter, readLoraAdapter } from "../../src/lora/read-lora-adapter.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { randomLora, type RandomLoraOptions } from "../../scripts/random-lora.ts";
import { makeTinyModel, type TinyShape } from "../model/tiny-model.ts";

const SHAPE: TinyShape = {
  architecture: "llama", vocabSize: 64, dim: 32, hiddenDim: 48, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8, tied: true, contextLength: 32,
};
const base = loadModel(makeTinyModel(SHAPE, { seed: 3 }));
if (!base.ok) throw new Error(base.error);
const config = base.value.config;
const LORA: RandomLoraOptions = { architecture: "llama", numLayers: 2, dims: config, moe: false, rank: 4, alpha: 8, seed: 5 };

const dir = mkdtempSync(join(tmpdir(), "fennec-lora-read-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const parse = (gguf: GgufToWrite, maxLoraRank = 16) => {
  const file = parseGguf(serializeGguf(gguf), "adapter.gguf");
  if (!file.ok) throw new Error(file.error);
  return parseLoraAdapter(file.value, { config, maxLoraRank });
};
const withMetadata = (gguf: GgufToWrite, key: string, value: ReturnType<typeof mdString> | null): GgufToWrite => {
  const metadata = new Map(gguf.metadata);
  if (value === null) metadata.delete(key);
  else metadata.set(key, value);
  return { ...gguf, metadata };
};

describe("readLoraAdapter", () => {
  test("reads make-model's adapter back: every target of every layer, its rank, alpha and values", () => {
    const path = join(dir, "a.gguf");
    writeGgufFile(path, randomLora(LORA));
    const a = readLoraAdapter(path, { config, maxLoraRank: 16 });
    if (!a.ok) throw new Error(a.error);
    expect(a.value.rank).toBe(4);
    expect(a.value.alpha).toBe(8);
    expect(a.value.layers.map((l) => [...l.keys()])).toEqual([0, 1].map(() => ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]));
    const q = a.value.layers[1]!.get("attn_q")!;
    expect([q.rank, q.nIn, q.nOut, q.a.length, q.b.length]).toEqual([4, 32, 32, 4 * 32, 32 * 4]);
    const down = a.value.layers[0]!.get("ffn_down")!;
    expect([down.nIn, down.nOut]).toEqual([48, 32]);
    expect(q.a.some((v) => v !== 0) && q.b.some((v) => v !== 0)).toBe(true);
    expect(a.value.bytes).toBe(2 * (4 * (32 + 32) + 2 * 4 * (32 + 16) + 4 * (32 + 32) + 2 * 4 * (32 + 48) + 4 * (48 + 32)) * 4);
  });

  test("f16 adapters read as the same values to f16 precision; chosen targets only", () => {
    const a = parse(randomLora({ ...LORA, type: "f16", targets: ["attn_v", "ffn_up"] }));
    const b = parse(randomLora(LORA));
    if (!a.ok || !b.ok) throw new Error("parse failed");
    expect([...a.value.layers[0]!.keys()]).toEqual(["attn_v", "ffn_up"]);
    const [x, y] = [a.value.layers[0]!.get("ffn_up")!.b, b.value.layers[0]!.get("ffn_up")!.b];
    for (let i = 0; i < x.length; i++) expect(Math.abs(x[i]! - y[i]!)).toBeLessThanOrEqual(Math.abs(y[i]!) * 1e-3 + 1e-7);
  });

  test("refuses what is not an adapter for this base, each with one line naming it", () => {
    const good = randomLora(LORA);
    const cases: [GgufToWrite, RegExp, number?][] = [
      [withMetadata(good, KEY.generalType, mdString("model")), /not a LoRA adapter \(general.type is "model"/],
      [withMetadata(good, KEY.generalType, null), /general.type is null/],
      [withMetadata(good, KEY.adapterType, mdString("control_vector")), /adapter.type is "control_vector", expected "lora"/],
      [withMetadata(good, KEY.architecture, mdString("qwen2")), /for architecture "qwen2", the base model is llama/],
      [randomLora({ ...LORA, dims: { ...config, hiddenDim: 64 } }), /ffn_gate.weight has lora_a \[32, 4\] and lora_b \[4, 64\], the base tensor needs \[32, rank\] and \[rank, 48\]/],
      [randomLora({ ...LORA, numLayers: 3 }), /blk.2.attn_q.weight is past the base model's 2 layers/],
      [good, /LoRA rank 4 is greater than max_lora_rank 2/, 2],
      [{ ...good, tensors: good.tensors.filter((t) => t.name !== "blk.1.attn_k.weight.lora_b") }, /blk.1.attn_k.weight has no .lora_b/],
      [{ ...good, tensors: good.tensors.map((t) => (t.name.startsWith("blk.0.attn_q.") ? { ...t, name: t.name.replace("blk.0.attn_q.", "output.") } : t)) }, /output.weight is not a tensor LoRA can adapt here/],
      [{ ...good, tensors: [...good.tensors, { ...good.tensors[0]!, name: "blk.0.attn_q.weight.lora_c" }] }, /tensor blk.0.attn_q.weight.lora_c is neither .lora_a nor .lora_b/],
      [{ ...good, tensors: [] }, /has no lora_a \/ lora_b tensors/],
    ];
    for (const [gguf, message, maxRank] of cases) {
      const r = parse(gguf, maxRank);
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.error).toMatch(message);
        expect(r.error).not.toContain("\n");
      }
    }
    expect(parse(withMetadata(good, KEY.adapterLoraAlpha, mdF32(0))).ok).toBe(true);
  });

  test("a file that is not there is one line", () => {
    const r = readLoraAdapter(join(dir, "missing.gguf"), { config, maxLoraRank: 16 });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toMatch(/^LoRA adapter .*missing.gguf/);
  });
});

describe("the low-rank update", () => {
  test("loraScale is alpha / rank times the user's scale, or the user's scale without alpha (llama.cpp get_scale)", () => {
    expect(loraScale(16, 8, 1)).toBe(2);
    expect(loraScale(16, 8, 0.5)).toBe(1);
    expect(loraScale(0, 8, 0.75)).toBe(0.75);
  });

  test("loraUpdate adds scale * B (A x) to y", () => {
    const pair = { rank: 2, nIn: 3, nOut: 2, a: Float32Array.of(1, 0, 2, 0, 1, -1), b: Float32Array.of(1, 1, 2, -1) };
    const y = Float32Array.of(10, 20);
    loraUpdate(y, Float32Array.of(1, 2, 3), pair, 0.5);
    // A x = [7, -1]; B (A x) = [6, 15]
    expect([...y]).toEqual([13, 27.5]);
  });

  test("the reference forward with an adapter: different logits; scale 0 and no adapter give the base's bits", () => {
    const adapter = parse(randomLora(LORA));
    if (!adapter.ok) throw new Error(adapter.error);
    const run = (lora?: { adapter: typeof adapter.value; scale: number }) => {
      const ref = new ReferenceForward(config, base.value.weights, 8, lora === undefined ? {} : { lora });
      return [1, 5, 9].map((t, pos) => ref.forward(t, pos).slice());
    };
    const plain = run();
    const zero = run({ adapter: adapter.value, scale: 0 });
    const adapted = run({ adapter: adapter.value, scale: 1 });
    expect(zero).toEqual(plain);
    const diff = Math.max(...adapted[2]!.map((v, i) => Math.abs(v - plain[2]![i]!)));
    expect(diff).toBeGreaterThan(1e-3);
  });
});
