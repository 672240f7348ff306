import { describe, expect, test } from "bun:test";
import { readVisionConfig, readVisionWeights, type VisionConfig, type VisionWeights } from "../../src/vision/mmproj.ts";
import type { PixelTile } from "../../src/vision/preprocess.ts";
import { embedImagesReference, encodeTileReference } from "../../src/vision/reference-encoder.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";
import { parsed, SMALL_TEXT_DIM, SMALL_VISION, smallMmproj } from "./small-mmproj.ts";

function load(numLayers = SMALL_VISION.numLayers): { c: VisionConfig; w: VisionWeights } {
  const file = numLayers === SMALL_VISION.numLayers ? smallMmproj() : parsed(randomMmproj({ shapeName: "small", vision: { ...SMALL_VISION, numLayers }, textDim: SMALL_TEXT_DIM, seed: 1 }));
  const c = readVisionConfig(file);
  if (!c.ok) throw new Error(c.error);
  const w = readVisionWeights(file, c.value);
  if (!w.ok) throw new Error(w.error);
  return { c: c.value, w: w.value };
}

/** A deterministic tile with values in [-1, 1). */
function tile(size: number, seed: number): PixelTile {
  const pixels = new Float32Array(3 * size * size);
  let s = seed >>> 0;
  for (let i = 0; i < pixels.length; i++) { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; pixels[i] = s / 2 ** 31 - 1; }
  return { width: size, height: size, pixels };
}

/** The tile with patch (px, py) filled from another tile. */
function withPatch(base: PixelTile, from: PixelTile, px: number, py: number, p: number): PixelTile {
  const pixels = base.pixels.slice();
  for (let ch = 0; ch < 3; ch++) for (let y = py * p; y < (py + 1) * p; y++) for (let x = px * p; x < (px + 1) * p; x++) {
    const i = (ch * base.height + y) * base.width + x;
    pixels[i] = from.pixels[i]!;
  }
  return { ...base, pixels };
}

const rowsChanged = (a: Float32Array, b: Float32Array, width: number): number[] =>
  Array.from({ length: a.length / width }, (_, r) => r).filter((r) => a.subarray(r * width, (r + 1) * width).some((x, i) => x !== b[r * width + i]));

describe("reference SigLIP encoder + Gemma 3 projector", () => {
  test("one block of [tokensPerImage][projectionDim] finite embeddings per tile, tiles independent", () => {
    const { c, w } = load();
    const [a, b] = embedImagesReference([tile(56, 1), tile(56, 2)], c, w);
    expect(a!.length).toBe(4 * SMALL_TEXT_DIM);
    expect(a!.every(Number.isFinite)).toBe(true);
    expect(rowsChanged(a!, b!, SMALL_TEXT_DIM)).toEqual([0, 1, 2, 3]);
    const [again] = embedImagesReference([tile(56, 1)], c, w);
    expect(again).toEqual(a!);
  });

  test("patch embedding: patch n = py * side + px reads its own 14 x 14 pixels (no layers: nothing mixes)", () => {
    const { c, w } = load(0);
    const base = tile(56, 3);
    const changed = withPatch(base, tile(56, 4), 3, 1, 14);
    const rows = rowsChanged(encodeTileReference(base, c, w), encodeTileReference(changed, c, w), c.dim);
    expect(rows).toEqual([1 * 4 + 3]);
  });

  test("the 2 x 2 average pool: patch (3, 1) feeds token (1, 0), patch (0, 3) feeds token (0, 1)", () => {
    const { c, w } = load(0);
    const base = tile(56, 5);
    const [e0] = embedImagesReference([base], c, w);
    const [e1] = embedImagesReference([withPatch(base, tile(56, 6), 3, 1, 14)], c, w);
    const [e2] = embedImagesReference([withPatch(base, tile(56, 6), 0, 3, 14)], c, w);
    expect(rowsChanged(e0!, e1!, SMALL_TEXT_DIM)).toEqual([1]);
    expect(rowsChanged(e0!, e2!, SMALL_TEXT_DIM)).toEqual([2]);
  });

  test("attention is bidirectional: the last patch changes the first token's embedding", () => {
    const { c, w } = load(1);
    const base = tile(56, 7);
    const [e0] = embedImagesReference([base], c, w);
    const [e1] = embedImagesReference([withPatch(base, tile(56, 8), 3, 3, 14)], c, w);
    expect(rowsChanged(e0!, e1!, SMALL_TEXT_DIM)).toEqual([0, 1, 2, 3]);
  });

  test("without position embeddings the ViT is permutation-equivariant: swapping two patches swaps their rows", () => {
    const { c, w: withPos } = load();
    const w = { ...withPos, positionEmbd: new Float32Array(withPos.positionEmbd.length) };
    const base = tile(56, 9);
    // swap patches (0, 0) and (2, 3) (patch index 3 * 4 + 2 = 14)
    const pixels = base.pixels.slice();
    const swapped = { ...base, pixels };
    for (let ch = 0; ch < 3; ch++) for (let y = 0; y < 14; y++) for (let x = 0; x < 14; x++) {
      const a = (ch * 56 + y) * 56 + x, b = (ch * 56 + 3 * 14 + y) * 56 + 2 * 14 + x;
      [pixels[a], pixels[b]] = [base.pixels[b]!, base.pixels[a]!];
    }
    const x0 = encodeTileReference(base, c, w);
    const x1 = encodeTileReference(swapped, c, w);
    const row = (x: Float32Array, n: number) => [...x.subarray(n * c.dim, (n + 1) * c.dim)];
    const close = (a: number[], b: number[]) => a.forEach((v, i) => expect(v).toBeCloseTo(b[i]!, 4));
    close(row(x1, 0), row(x0, 14));
    close(row(x1, 14), row(x0, 0));
    close(row(x1, 5), row(x0, 5));
    // and with the learned positions it is not
    expect(Math.abs(row(encodeTileReference(swapped, c, withPos), 0)[0]! - row(encodeTileReference(base, c, withPos), 14)[0]!)).toBeGreaterThan(1e-4);
  });

  test("a tile of the wrong size is refused", () => {
    const { c, w } = load(0);
    expect(() => encodeTileReference(tile(28, 1), c, w)).toThrow("a 28x28 tile, the encoder takes 56x56");
  });
});
