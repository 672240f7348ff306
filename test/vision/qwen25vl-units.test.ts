/**
 * Qwen2.5-VL's projector reading (vision/qwen25vl-mmproj.ts), smart resize (vision/qwen25vl-preprocess.ts) and the
 * encoder's patch layout (merge order, windows), on small hand-made projectors written by scripts/random-mmproj.ts;
 * and the engine's side of an image's grid (admission, each chunk's M-RoPE streams).
 * The numbers against llama.cpp are in qwen25vl-oracle.test.ts.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { GgufFile, GgufMetadataEntry } from "../../src/gguf/gguf-file.ts";
import { mdBool } from "../../src/gguf/metadata.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { readVisionConfig } from "../../src/vision/mmproj.ts";
import { QWEN25VL_KEY, readQwen25vlConfig, readQwen25vlWeights } from "../../src/vision/qwen25vl-mmproj.ts";
import { preprocessQwen25vl, qwen25vlTargetSize } from "../../src/vision/qwen25vl-preprocess.ts";
import { patchGrid, qwen25vlWindowedLayer } from "../../src/vision/qwen25vl-reference-encoder.ts";
import { VISION_SHAPES, type VisionShape } from "../../scripts/model-shapes.ts";
import { checkMultimodal, chunkRopePositions } from "../../src/engine/multimodal-inputs.ts";
import type { EngineRequest } from "../../src/engine/protocol.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";

const dir = mkdtempSync(join(tmpdir(), "fennec-qwen25vl-units-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Qwen2.5-VL's layout at a small width: 64 wide, 4 heads of 16, 3 layers, every 3rd full */
const SMALL: VisionShape = { ...VISION_SHAPES["qwen2.5-vl-3b"]!, dim: 64, ffnDim: 96, numHeads: 4, numLayers: 3, windowPattern: 3 };

function written(shape: VisionShape, edit?: (m: Map<string, GgufMetadataEntry>) => void): GgufFile {
  const gguf = randomMmproj({ shapeName: "small-qwen2.5-vl", vision: shape, textDim: 32, seed: 1 });
  const metadata = new Map(gguf.metadata);
  edit?.(metadata);
  const path = join(dir, `mm-${Math.random().toString(36).slice(2)}.gguf`);
  writeGgufFile(path, { ...gguf, metadata });
  const file = readGguf(path);
  if (!file.ok) throw new Error(file.error);
  return file.value;
}

describe("Qwen2.5-VL projector file", () => {
  test("the converter's keys and tensors read back: merge 2, windows of 112 px = 4 tokens, 8..4096 tokens of 28 px", () => {
    const file = written(SMALL);
    const c = readQwen25vlConfig(file);
    if (!c.ok) throw new Error(c.error);
    expect(c.value).toMatchObject({ patchSize: 14, dim: 64, ffnDim: 96, numLayers: 3, numHeads: 4, headDim: 16, projectionDim: 32, merge: 2, windowPattern: 3, windowTokens: 4 });
    expect([c.value.minPixels, c.value.maxPixels]).toEqual([8 * 28 * 28, 4096 * 28 * 28]);
    expect(c.value.imageMean).toEqual(VISION_SHAPES["qwen2.5-vl-3b"]!.imageMean.map(Math.fround) as [number, number, number]);
    const w = readQwen25vlWeights(file, c.value);
    if (!w.ok) throw new Error(w.error);
    expect([w.value.patchEmbd0.length, w.value.patchEmbd1.length, w.value.merger0.length, w.value.merger2.length]).toEqual([64 * 3 * 14 * 14, 64 * 3 * 14 * 14, 256 * 256, 32 * 256]);
    expect(w.value.layers.length).toBe(3);
    expect(w.value.layers[0]!.biases.ln1).toBeUndefined();
    expect(w.value.layers[2]!.biases.ffnGate!.length).toBe(96);
    // layers 0 and 1 in windows, layer 2 full ((l + 1) % n_wa_pattern == 0)
    expect([0, 1, 2].map((l) => qwen25vlWindowedLayer(c.value, l))).toEqual([true, true, false]);
    // the Gemma 3 reader (the one the server's vision worker uses) names what it does not serve
    const other = readVisionConfig(file);
    expect(other.ok).toBe(false);
    if (!other.ok) expect(other.error).toMatch(/projector type "qwen2.5vl_merger" is not supported/);
  });

  test.each([
    ["without n_wa_pattern", (m: Map<string, GgufMetadataEntry>) => m.delete(QWEN25VL_KEY.windowPattern), /clip\.vision\.n_wa_pattern/],
    ["without use_silu", (m: Map<string, GgufMetadataEntry>) => m.delete("clip.use_silu"), /clip\.use_silu must be true/],
    ["with use_gelu", (m: Map<string, GgufMetadataEntry>) => m.set("clip.use_gelu", mdBool(true)), /clip\.use_silu must be true/],
    ["another projector", (m: Map<string, GgufMetadataEntry>) => m.set("clip.projector_type", { type: 8, value: "gemma3" }), /projector type "gemma3" is not "qwen2.5vl_merger"/],
  ] as const)("a file %s is refused with one error naming the key", (_, edit, message) => {
    const c = readQwen25vlConfig(written(SMALL, edit));
    expect(c.ok).toBe(false);
    if (!c.ok) expect(c.error).toMatch(message);
  });

  test("a missing layer tensor is named", () => {
    const gguf = randomMmproj({ shapeName: "small", vision: SMALL, textDim: 32, seed: 1 });
    const path = join(dir, "missing.gguf");
    writeGgufFile(path, { ...gguf, tensors: gguf.tensors.filter((t) => t.name !== "v.blk.1.ffn_gate.bias") });
    const file = readGguf(path);
    if (!file.ok) throw new Error(file.error);
    const c = readQwen25vlConfig(file.value);
    if (!c.ok) throw new Error(c.error);
    const w = readQwen25vlWeights(file.value, c.value);
    expect(w.ok).toBe(false);
    if (!w.ok) expect(w.error).toMatch(/missing tensor v\.blk\.1\.ffn_gate\.bias/);
  });
});

describe("smart resize (calc_size_preserved_ratio)", () => {
  const [min, max] = [8 * 784, 4096 * 784];
  test.each([
    // sides rounded to the nearest multiple of 28
    [150, 90, 140, 84],
    [64, 200, 56, 196],
    [112, 112, 112, 112],
    // 28 x 28 is under 8 tokens: scaled up by sqrt(6272 / 600), each side rounded up
    [30, 20, 112, 84],
    // over 4096 tokens: scaled down by sqrt(12e6 / 3211264), each side rounded down
    [4000, 3000, 2044, 1540],
    // a sliver stays at least one 28 px cell wide
    [2000, 3, 1988, 28],
  ])("%i x %i -> %i x %i", (w, h, tw, th) => {
    const size = qwen25vlTargetSize(w, h, 28, min, max);
    expect([size.width, size.height]).toEqual([tw, th]);
    expect(size.width * size.height).toBeLessThanOrEqual(max);
  });

  test("the tile is the target size, normalised with the file's mean and std", () => {
    const c = readQwen25vlConfig(written(SMALL));
    if (!c.ok) throw new Error(c.error);
    const img = { width: 150, height: 90, data: new Uint8Array(150 * 90 * 3).fill(200) };
    const tile = preprocessQwen25vl(img, c.value);
    expect([tile.width, tile.height]).toEqual([140, 84]);
    // 150 x 90 fills 140 x 84 exactly (same aspect): no letterbox, every pixel the colour
    for (let ch = 0; ch < 3; ch++) {
      const want = Math.fround(Math.fround(Math.fround(200 / 255) - c.value.imageMean[ch]!) / c.value.imageStd[ch]!);
      expect(tile.pixels[ch * 140 * 84 + 1000]).toBeCloseTo(want, 6);
    }
  });
});

describe("patch layout", () => {
  test("merge order: each 2 x 2 block's patches together, blocks row by row; windows of 4 x 4 merged tokens", () => {
    const g = patchGrid(4, 20, 4); // 4 x 20 patches: 2 x 10 merged tokens, windows 4 tokens wide
    expect(Array.from(g.ys.slice(0, 8))).toEqual([0, 0, 1, 1, 0, 0, 1, 1]);
    expect(Array.from(g.xs.slice(0, 8))).toEqual([0, 1, 0, 1, 2, 3, 2, 3]);
    // merged token (0, 4) opens the second window, (0, 8) the third (2 tokens wide: a partial window)
    expect([g.window[4 * 3], g.window[4 * 4], g.window[4 * 8], g.window[4 * 10]]).toEqual([0, 1, 2, 0]);
  });
});

describe("engine admission and chunks of M-RoPE images", () => {
  const item = (grid?: { cols: number; rows: number }) => ({
    identifier: "img", offset: 1, length: 6, embeddings: new Float32Array(6 * 4), attendAhead: false, ...(grid !== undefined ? { mropeGrid: grid } : {}),
  });
  const request = (multimodal: ReturnType<typeof item>[]) => ({ promptTokenIds: [1, 2, 2, 2, 2, 2, 2, 3], multimodal }) as unknown as EngineRequest;

  test("a grid covering the image is taken by an M-RoPE model; a bad grid, a grid elsewhere or no grid there is refused", () => {
    expect(checkMultimodal(request([item({ cols: 3, rows: 2 })]), 4, true)).toBeNull();
    expect(checkMultimodal(request([item()]), 4, false)).toBeNull();
    expect(checkMultimodal(request([item({ cols: 4, rows: 2 })]), 4, true)?.message).toMatch(/a 4 x 2 grid does not cover its 6 positions/);
    expect(checkMultimodal(request([item({ cols: 3, rows: 2 })]), 4, false)?.message).toMatch(/has an M-RoPE grid, which this model \(no rope sections\) cannot place/);
    expect(checkMultimodal(request([item()]), 4, true)?.message).toMatch(/has no M-RoPE grid/);
  });

  test("a chunk's rope streams: none without grids; with one, the slots' M-RoPE positions", () => {
    expect(chunkRopePositions([item()], 0, 8)).toEqual({});
    const { ropePositions } = chunkRopePositions([item({ cols: 3, rows: 2 })], 6, 8);
    // slot 6 is the image's last row (p0 = 1: t 1, y 2, x 3); slot 7 text at 7 + max(3, 2) - 6 = 4
    expect(Array.from(ropePositions!)).toEqual([1, 4, 2, 4, 3, 4, 0, 4]);
  });
});
