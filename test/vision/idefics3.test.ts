/**
 * SmolVLM / Idefics3 pieces on their own: the projector file as llama.cpp's converter writes it and as clip.cpp reads
 * it, the longest-edge tiling (mtmd_image_preprocessor_idefics3), the prompt layout of the tiles (mtmd.cpp's
 * MTMD_SLICE_TMPL_IDEFICS3), the pixel shuffle against HF's view / permute steps, the kernels' encoder against the
 * reference one, and the tiles placed in a prompt. llama.cpp itself is the oracle in idefics3-oracle.test.ts.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { createBackend } from "../../src/backend/create-backend.ts";
import { DEFAULT_MEDIA_SETTINGS } from "../../src/config/media-settings.ts";
import { GgufValueType } from "../../src/gguf/gguf-file.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { placeImages, type VisionServing } from "../../src/server/openai/chat-completion/image-inputs.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { BackendVisionEncoder } from "../../src/vision/backend-encoder.ts";
import { CLIP_KEY } from "../../src/vision/clip-names.ts";
import { idefics3Grid, idefics3Layout } from "../../src/vision/idefics3-tiles.ts";
import { pixelShuffle } from "../../src/vision/idefics3-projector.ts";
import { resizeRgb } from "../../src/vision/image-resize.ts";
import { readVisionConfig, readVisionWeights, type VisionConfig } from "../../src/vision/mmproj.ts";
import { imageLayout, normalizeToPlanar, preprocessImage } from "../../src/vision/preprocess.ts";
import { PROJECTOR_MARKERS } from "../../src/vision/projector-markers.ts";
import { embedImagesReference } from "../../src/vision/reference-encoder.ts";
import type { VisionEncoder } from "../../src/vision/vision-client.ts";
import { VISION_SHAPES, type VisionShape } from "../../scripts/model-shapes.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { parsed } from "./small-mmproj.ts";
import { pattern } from "./test-images.ts";

await ensureKernels();
// the plain reference encoder at real width on a busy 2-core box
setDefaultTimeout(120_000);

/** A small Idefics3 SigLIP: 64 wide, 4 heads, 32 px tiles of 8 px patches (4 x 4), shuffled by 2: 4 tokens a tile. */
const SMALL: VisionShape = {
  ...VISION_SHAPES["tiny-smolvlm-256m"]!, imageSize: 32, patchSize: 8, dim: 64, ffnDim: 96, numLayers: 2, numHeads: 4,
  scaleFactor: 2, longestEdge: 64, imageSeqLength: 4, imageMean: [0.5, 0.4, 0.3], imageStd: [0.25, 0.5, 0.75],
};
const TEXT_DIM = 48;

function config(shape: VisionShape = SMALL): { c: VisionConfig; file: ReturnType<typeof parsed> } {
  const file = parsed(randomMmproj({ shapeName: "small-idefics3", vision: shape, textDim: TEXT_DIM, seed: 3 }));
  const c = readVisionConfig(file);
  if (!c.ok) throw new Error(c.error);
  return { c: c.value, file };
}

describe("the projector file", () => {
  test("written with conversion/smolvlm.py's keys and tensor types, read as clip.cpp's idefics3 loader reads it", () => {
    const { c, file } = config();
    const md = (key: string) => (file.metadata.get(key)?.value as unknown);
    expect(md(CLIP_KEY.projectorType)).toBe("idefics3");
    expect(md(CLIP_KEY.projectorScaleFactor)).toBe(2);
    expect(md(CLIP_KEY.preprocImageSize)).toBe(64);
    expect(md(CLIP_KEY.useGelu)).toBe(true);
    expect(file.metadata.get(CLIP_KEY.layerNormEps)?.type).toBe(GgufValueType.FLOAT32);
    const types = new Map(file.tensors.map((t) => [t.name, t]));
    // ".embeddings." forced to f32, other matrices f16, vectors f32; the fc is [vision width x 4][text width]
    expect(types.get("v.patch_embd.weight")?.type).toBe(GgmlType.F32);
    expect(types.get("v.position_embd.weight")?.type).toBe(GgmlType.F32);
    expect(types.get("v.blk.0.attn_q.weight")?.type).toBe(GgmlType.F16);
    expect(types.get("mm.model.fc.weight")?.shape).toEqual([64 * 4, TEXT_DIM]);
    expect(types.get("mm.model.fc.weight")?.type).toBe(GgmlType.F16);
    expect(types.has("mm.input_projection.weight")).toBe(false);
    expect(c).toMatchObject({ projector: "idefics3", nMerge: 2, resizeAlgo: "lanczos", longestEdge: 64, patchesPerSide: 4, tokensPerImage: 4, projectionDim: TEXT_DIM });
    const w = readVisionWeights(file, c);
    if (!w.ok) throw new Error(w.error);
    expect(w.value.fc?.length).toBe(64 * 4 * TEXT_DIM);
  });

  test("a file without clip.vision.preproc_image_size is refused naming the key", () => {
    const gguf = randomMmproj({ shapeName: "small-idefics3", vision: SMALL, textDim: TEXT_DIM, seed: 3 });
    const metadata = new Map([...gguf.metadata].filter(([key]) => key !== CLIP_KEY.preprocImageSize));
    const c = readVisionConfig(parsed({ ...gguf, metadata }));
    expect(c.ok).toBe(false);
    if (!c.ok) expect(c.error).toContain("clip.vision.preproc_image_size");
  });

  test("a file without mm.model.fc is refused naming the tensor", () => {
    const gguf = randomMmproj({ shapeName: "small-idefics3", vision: SMALL, textDim: TEXT_DIM, seed: 3 });
    const file = parsed({ ...gguf, tensors: gguf.tensors.filter((t) => t.name !== "mm.model.fc.weight") });
    const c = readVisionConfig(file);
    if (!c.ok) throw new Error(c.error);
    const w = readVisionWeights(file, c.value);
    expect(w.ok).toBe(false);
    if (!w.ok) expect(w.error).toContain("missing tensor mm.model.fc.weight");
  });
});

describe("tiling (tiles of 128, longest edge 256, as tiny-smolvlm-256m)", () => {
  const c = { imageSize: 128, longestEdge: 256, projector: "idefics3" } as VisionConfig;
  test.each([
    // width, height -> resized (C's int truncation, then an odd side made even), columns, rows
    [150, 90, 256, 154, 2, 2],
    [64, 200, 82, 256, 1, 2],
    [300, 300, 256, 256, 2, 2],
    [120, 128, 240, 256, 2, 2],
    [1000, 10, 256, 2, 2, 1],
    [20, 20, 256, 256, 2, 2],
  ])("%i x %i -> %i x %i, %i x %i tiles", (width, height, rw, rh, cols, rows) => {
    expect(idefics3Grid(width, height, c)).toEqual({ cols, rows, resized: { width: rw, height: rh } });
  });

  test("an image so wide that its short side truncates to 0 is refused", () => {
    expect(() => idefics3Grid(1000, 1, c)).toThrow("too narrow");
  });

  test("the tiles are the refined image's crops row by row, then its overview (lanczos both times)", () => {
    const { c: small } = config();
    const img = { width: 50, height: 30, data: pattern(50, 30, 4) };
    const tiles = preprocessImage(img, small);
    const grid = idefics3Grid(50, 30, small); // 64 x 38 -> 2 x 2 tiles of 32
    expect(grid).toEqual({ cols: 2, rows: 2, resized: { width: 64, height: 38 } });
    expect(tiles.length).toBe(5);
    const refined = resizeRgb(resizeRgb(img, 64, 38, "lanczos"), 64, 64, "lanczos");
    const crop = (x0: number, y0: number) => {
      const data = new Uint8Array(32 * 32 * 3);
      for (let y = 0; y < 32; y++) data.set(refined.data.subarray(((y0 + y) * 64 + x0) * 3, ((y0 + y) * 64 + x0 + 32) * 3), y * 32 * 3);
      return normalizeToPlanar({ width: 32, height: 32, data }, small.imageMean, small.imageStd).pixels;
    };
    expect(tiles[1]!.pixels).toEqual(crop(32, 0));
    expect(tiles[2]!.pixels).toEqual(crop(0, 32));
    expect(tiles[4]!.pixels).toEqual(normalizeToPlanar(resizeRgb(refined, 32, 32, "lanczos"), small.imageMean, small.imageStd).pixels);
  });

  test("lanczos rings at a hard edge where bilinear does not (Pillow's filters differ)", () => {
    const step = new Uint8Array(8 * 3).map((_, i) => (Math.floor(i / 3) < 4 ? 40 : 200));
    const img = { width: 8, height: 1, data: step };
    const lanczos = resizeRgb(img, 32, 1, "lanczos").data.filter((_, i) => i % 3 === 0);
    const bilinear = resizeRgb(img, 32, 1, "bilinear").data.filter((_, i) => i % 3 === 0);
    expect(Math.min(...lanczos)).toBeLessThan(40);
    expect(Math.max(...lanczos)).toBeGreaterThan(200);
    expect(Math.min(...bilinear)).toBe(40);
    expect(Math.max(...bilinear)).toBe(200);
  });
});

describe("the tiles' place in the prompt", () => {
  test("2 rows of 3: <fake_token_around_image><row_R_col_C> per tile, \\n between rows, then the overview", () => {
    const layout = idefics3Layout({ cols: 3, rows: 2, resized: { width: 0, height: 0 } }, 64);
    const text = layout.map((p) => ("text" in p ? p.text : `[${p.rows}]`)).join("");
    const tile = (r: number, c: number) => `<fake_token_around_image><row_${r}_col_${c}>[64]`;
    expect(text).toBe(`${tile(1, 1)}${tile(1, 2)}${tile(1, 3)}\n${tile(2, 1)}${tile(2, 2)}${tile(2, 3)}\n\n<fake_token_around_image><global-img>[64]<fake_token_around_image>`);
  });

  test("the server places each tile's rows as its own multimodal input, markers tokenized with special tokens", () => {
    const { c } = config();
    const layout = imageLayout(40, 20, c)!; // 64 x 32: 2 x 1 tiles
    const vocab: Record<string, number> = {
      "<image>": 7, "<fake_token_around_image>": 8, "<row_1_col_1>": 11, "<row_1_col_2>": 12, "<global-img>": 9, "\n\n": 10,
    };
    const encode = (text: string) => text.split(/(<[^>]+>)/).filter((s) => s !== "").map((s) => vocab[s] ?? -1);
    const tokenizer = { encode } as unknown as Tokenizer;
    const vision = { encoder: { info: { markers: PROJECTOR_MARKERS.idefics3, tokensPerImage: 4, projectionDim: 2 } } as unknown as VisionEncoder, media: DEFAULT_MEDIA_SETTINGS } satisfies VisionServing;
    const embeddings = Float32Array.from({ length: 3 * 4 * 2 }, (_, i) => i);
    const placed = placeImages(tokenizer, [1, 7, 2], [{ hash: "h", embeddings, cacheHit: false, width: 40, height: 20, layout }], vision);
    expect(placed.promptTokenIds).toEqual([1, 8, 11, 7, 7, 7, 7, 8, 12, 7, 7, 7, 7, 10, 8, 9, 7, 7, 7, 7, 8, 2]);
    expect(placed.multimodal.map(({ identifier, offset, length, attendAhead, embeddings: e }) => ({ identifier, offset, length, attendAhead, first: e[0] }))).toEqual([
      { identifier: "h/0", offset: 3, length: 4, attendAhead: false, first: 0 },
      { identifier: "h/1", offset: 9, length: 4, attendAhead: false, first: 8 },
      { identifier: "h/2", offset: 16, length: 4, attendAhead: false, first: 16 },
    ]);
    const short = { hash: "h", embeddings: embeddings.subarray(2), cacheHit: false, width: 40, height: 20, layout };
    expect(() => placeImages(tokenizer, [1, 7, 2], [short], vision)).toThrow("its tiles take 12");
  });
});

describe("pixel shuffle", () => {
  /** HF Idefics3Connector.pixel_shuffle as strided index steps: view, permute(0, 2, 1, 3), reshape, permute, reshape. */
  function hfPixelShuffle(x: Float32Array, side: number, dim: number, s: number): Float32Array {
    // view(h, w / s, dim * s): element [h][w'][k] is x at h, w' * s + k / dim, k % dim
    const a = (h: number, w2: number, k: number) => x[(h * side + w2 * s + Math.floor(k / dim)) * dim + (k % dim)]!;
    // permute -> [w / s][h][dim * s], reshape -> [w / s][h / s][dim * s * s]: [w'][h'][m] = a(h' * s + m / (dim s), w', m % (dim s))
    const b = (w2: number, h2: number, m: number) => a(h2 * s + Math.floor(m / (dim * s)), w2, m % (dim * s));
    // permute -> [h / s][w / s][dim * s * s], reshape to tokens
    const out = new Float32Array(x.length);
    const n = side / s;
    for (let h2 = 0; h2 < n; h2++) for (let w2 = 0; w2 < n; w2++) for (let m = 0; m < dim * s * s; m++) out[(h2 * n + w2) * dim * s * s + m] = b(w2, h2, m);
    return out;
  }

  test.each([[4, 3, 2], [8, 5, 4], [6, 2, 3]])("a %i x %i grid of width %i: the same features in the same order as HF's", (side, dim, s) => {
    const x = Float32Array.from({ length: side * side * dim }, (_, i) => i);
    expect(pixelShuffle(x, side, dim, s)).toEqual(hfPixelShuffle(x, side, dim, s));
  });
});

describe("the kernels' encoder against the reference one", () => {
  test.each([
    { name: "small (64 wide, 4 heads)", shape: SMALL },
    { name: "tiny-smolvlm-256m's real-width SigLIP (1 layer)", shape: { ...VISION_SHAPES["tiny-smolvlm-256m"]!, numLayers: 1 } },
  ])("$name: every tile within the kernels' rounding", async ({ shape }) => {
    const { c, file } = config(shape);
    const w = readVisionWeights(file, c);
    if (!w.ok) throw new Error(w.error);
    const encoder = new BackendVisionEncoder(c, w.value, await createBackend({ kind: "wasm", threads: 2 }));
    const tiles = preprocessImage({ width: 70, height: 40, data: pattern(70, 40, 1) }, c).slice(-2);
    const expected = embedImagesReference(tiles, c, w.value);
    for (const [i, tile] of tiles.entries()) {
      const ours = await encoder.embedTile(tile);
      const ref = expected[i]!;
      let maxDiff = 0, maxAbs = 0;
      for (let k = 0; k < ours.length; k++) {
        maxDiff = Math.max(maxDiff, Math.abs(ours[k]! - ref[k]!));
        maxAbs = Math.max(maxAbs, Math.abs(ref[k]!));
      }
      expect(ours.length).toBe(c.tokensPerImage * TEXT_DIM);
      // f32 weights and matmuls, f16 K/V in the kernels' attention: measured below 1e-4 of the largest value
      console.log(`idefics3 kernels tile ${i}: max |diff| ${(maxDiff / maxAbs).toExponential(2)} of the largest`);
      expect(maxDiff / maxAbs).toBeLessThan(2e-4);
    }
    encoder.dispose();
  });
});
