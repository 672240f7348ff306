import { describe, expect, test } from "bun:test";
import { GgufValueType } from "../../src/gguf/gguf-file.ts";
import { mdString, mdU32 } from "../../src/gguf/metadata.ts";
import { CLIP_KEY, CLIP_TENSOR } from "../../src/vision/clip-names.ts";
import { readVisionConfig, readVisionWeights } from "../../src/vision/mmproj.ts";
import { VISION_SHAPES } from "../../scripts/model-shapes.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";
import { parsed, SMALL_TEXT_DIM, SMALL_VISION, smallMmproj } from "./small-mmproj.ts";

/** The metadata of a projector file with some keys changed and no tensors (readVisionConfig reads keys only). */
function metadataOnly(change: (m: Map<string, import("../../src/gguf/gguf-file.ts").GgufMetadataEntry>) => void, vision = SMALL_VISION) {
  const gguf = randomMmproj({ shapeName: "small", vision, textDim: SMALL_TEXT_DIM, seed: 1 });
  const metadata = new Map(gguf.metadata);
  change(metadata);
  return parsed({ metadata, tensors: [] });
}

describe("mmproj config (clip.* keys)", () => {
  test("the small projector's keys: widths, heads, mean/std from the file, scale factor 2 written and read", () => {
    const file = smallMmproj();
    expect(file.metadata.get(CLIP_KEY.projectorScaleFactor)?.value).toBe(2);
    const c = readVisionConfig(file);
    if (!c.ok) throw new Error(c.error);
    expect(c.value).toMatchObject({
      projector: "gemma3", imageSize: 56, patchSize: 14, dim: 64, ffnDim: 96, numLayers: 2, numHeads: 4, headDim: 16,
      projectionDim: SMALL_TEXT_DIM, nMerge: 2, patchesPerSide: 4, tokensPerImage: 4, resizeAlgo: "bilinear",
    });
    expect(c.value.imageMean).toEqual([0.5, Math.fround(0.4), Math.fround(0.3)]);
    expect(c.value.imageStd).toEqual([0.25, 0.5, 0.75]);
    expect(c.value.eps).toBeCloseTo(1e-6, 12);
  });

  test("Gemma 3's real SigLIP: no scale_factor key (the default 4), 64 x 64 patches pooled to 256 tokens", () => {
    const file = metadataOnly(() => {}, VISION_SHAPES["gemma3-4b"]);
    expect(file.metadata.has(CLIP_KEY.projectorScaleFactor)).toBe(false);
    const c = readVisionConfig(file);
    if (!c.ok) throw new Error(c.error);
    expect(c.value).toMatchObject({ imageSize: 896, dim: 1152, ffnDim: 4304, numHeads: 16, numLayers: 27, nMerge: 4, patchesPerSide: 64, tokensPerImage: 256 });
  });

  const refusals: [string, (m: Map<string, never>) => void, RegExp][] = [
    ["a language model file", (m) => m.set("general.architecture", mdString("gemma3") as never), /not a projector \(mmproj\) file/],
    ["an unsupported projector", (m) => m.set(CLIP_KEY.projectorType, mdString("qwen2.5vl_merger") as never), /projector type "qwen2.5vl_merger" is not supported/],
    ["an audio-only projector", (m) => m.delete(CLIP_KEY.hasVisionEncoder), /no vision encoder/],
    ["a missing width", (m) => m.delete(CLIP_KEY.embeddingLength), /missing metadata key "clip.vision.embedding_length"/],
    ["a patch that does not tile the image", (m) => m.set(CLIP_KEY.patchSize, mdU32(15) as never), /not a multiple of patch size 15/],
    ["a pool that does not divide the grid", (m) => m.set(CLIP_KEY.projectorScaleFactor, mdU32(3) as never), /do not pool by 3/],
    ["grouped-query vision attention", (m) => m.set(CLIP_KEY.headCountKv, mdU32(2) as never), /2 KV heads for 4 heads/],
    ["a head size that is not width / heads", (m) => m.set(CLIP_KEY.headDim, mdU32(32) as never), /head size 32 x 4 heads is not the width 64/],
    ["a zero std", (m) => m.set(CLIP_KEY.imageStd, { type: GgufValueType.ARRAY, value: { elementType: GgufValueType.FLOAT32, values: [0.5, 0, 0.5] } } as never), /image_std has a zero/],
    ["a std of two values", (m) => m.set(CLIP_KEY.imageStd, { type: GgufValueType.ARRAY, value: { elementType: GgufValueType.FLOAT32, values: [0.5, 0.5] } } as never), /should hold 3 floats/],
  ];
  for (const [what, change, message] of refusals) {
    test(`refuses ${what} with an error naming the file`, () => {
      const c = readVisionConfig(metadataOnly(change as never));
      expect(c.ok).toBe(false);
      if (!c.ok) {
        expect(c.error).toMatch(message);
        expect(c.error.startsWith("small-mmproj.gguf: ")).toBe(true);
      }
    });
  }
});

describe("mmproj weights (v.* / mm.* tensors)", () => {
  test("every tensor in f32 with its shape; norms are ones, matrices random", () => {
    const file = smallMmproj();
    const c = readVisionConfig(file);
    if (!c.ok) throw new Error(c.error);
    const w = readVisionWeights(file, c.value);
    if (!w.ok) throw new Error(w.error);
    expect(w.value.patchEmbd.length).toBe(64 * 3 * 14 * 14);
    expect(w.value.positionEmbd.length).toBe(16 * 64);
    expect(w.value.inputProjection.length).toBe(64 * SMALL_TEXT_DIM);
    expect(w.value.layers).toHaveLength(2);
    expect(w.value.layers[1]!.weights.ffnUp.length).toBe(64 * 96);
    expect(w.value.layers[1]!.biases.ffnUp.length).toBe(96);
    expect(w.value.layers[1]!.biases.ffnDown.length).toBe(64);
    expect([...w.value.layers[0]!.weights.ln1].every((x) => x === 1)).toBe(true);
    expect([...w.value.softEmbNorm].every((x) => x === 1)).toBe(true);
    const q = w.value.layers[0]!.weights.attnQ;
    const std = Math.sqrt(q.reduce((s, x) => s + x * x, 0) / q.length);
    expect(std).toBeGreaterThan(0.015);
    expect(std).toBeLessThan(0.025);
  });

  test("a file of older converters (ffn_up and ffn_down swapped) is read as clip.cpp reads it", () => {
    const gguf = randomMmproj({ shapeName: "small", vision: SMALL_VISION, textDim: SMALL_TEXT_DIM, seed: 1 });
    const swapName = (n: string) => n.replace("ffn_up", "FFN_TMP").replace("ffn_down", "ffn_up").replace("FFN_TMP", "ffn_down");
    const swapped = parsed({ metadata: gguf.metadata, tensors: gguf.tensors.map((t) => ({ ...t, name: swapName(t.name) })) });
    const normal = smallMmproj();
    const c = readVisionConfig(normal);
    if (!c.ok) throw new Error(c.error);
    const a = readVisionWeights(normal, c.value);
    const b = readVisionWeights(swapped, c.value);
    if (!a.ok || !b.ok) throw new Error("unreadable");
    expect(b.value.layers[0]!.weights.ffnUp).toEqual(a.value.layers[0]!.weights.ffnUp);
    expect(b.value.layers[0]!.biases.ffnDown).toEqual(a.value.layers[0]!.biases.ffnDown);
  });

  test("a missing or misshapen tensor is refused by name", () => {
    const gguf = randomMmproj({ shapeName: "small", vision: SMALL_VISION, textDim: SMALL_TEXT_DIM, seed: 1 });
    const c = readVisionConfig(smallMmproj());
    if (!c.ok) throw new Error(c.error);
    const missing = parsed({ metadata: gguf.metadata, tensors: gguf.tensors.filter((t) => t.name !== CLIP_TENSOR.mmSoftEmbNorm) });
    const r1 = readVisionWeights(missing, c.value);
    expect(r1.ok ? "" : r1.error).toBe(`small-mmproj.gguf: missing tensor ${CLIP_TENSOR.mmSoftEmbNorm}`);
    // a projector written for another text width
    const other = parsed(randomMmproj({ shapeName: "small", vision: SMALL_VISION, textDim: 48, seed: 1 }));
    const r2 = readVisionWeights(other, c.value);
    expect(r2.ok ? "" : r2.error).toMatch(/mm\.input_projection\.weight has shape \[48, 64\], expected \[32, 64\]/);
  });
});
