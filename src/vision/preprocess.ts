/**
 * An image to the encoder's input, as llama.cpp's mtmd does it per projector (tools/mtmd/mtmd-image.cpp
 * mtmd_image_preprocessor_*): resize (and pad), then x / 255, then (x - mean) / std per channel in f32
 * (clip_image_f32::from_u8, normalize), laid out channel-planar as clip.cpp feeds inp_raw ([3][height][width]).
 */
import { resizeWithPad, type RgbImage } from "./image-resize.ts";
import type { VisionConfig } from "./mmproj.ts";
import type { ProjectorType } from "./clip-names.ts";
import { idefics3Grid, idefics3Layout, idefics3Tiles } from "./idefics3-tiles.ts";
import type { ImageLayoutPiece } from "./vision-protocol.ts";

/** One encoder input: a square (Gemma 3) or rectangular tile, normalised, channel-planar. */
export interface PixelTile {
  readonly width: number;
  readonly height: number;
  /** [3][height][width] */
  readonly pixels: Float32Array;
}

/** RGB bytes to normalised planar floats with the projector's mean and std (read from the GGUF). */
export function normalizeToPlanar(img: RgbImage, mean: readonly number[], std: readonly number[]): PixelTile {
  const n = img.width * img.height;
  const pixels = new Float32Array(3 * n); // [3][height][width]
  for (let i = 0; i < n; i++) {
    for (let c = 0; c < 3; c++) {
      // f32 at every step, as clip_image_f32 holds floats
      const x = Math.fround(img.data[i * 3 + c]! / 255);
      pixels[c * n + i] = Math.fround(Math.fround(x - mean[c]!) / std[c]!);
    }
  }
  return { width: img.width, height: img.height, pixels };
}

/** Gemma 3 (mtmd_image_preprocessor_fixed_size): one image_size square, letterboxed on black. */
function fixedSize(img: RgbImage, c: VisionConfig): PixelTile[] {
  const square = resizeWithPad(img, c.imageSize, c.imageSize, c.resizeAlgo, [0, 0, 0]);
  return [normalizeToPlanar(square, c.imageMean, c.imageStd)];
}

/** The preprocessor of each supported projector (mtmd.cpp mtmd_context: image_preproc per projector type). */
const PREPROCESSORS: Readonly<Record<ProjectorType, (img: RgbImage, c: VisionConfig) => PixelTile[]>> = {
  gemma3: fixedSize,
  idefics3: (img, c) => idefics3Tiles(img, c).map((tile) => normalizeToPlanar(tile, c.imageMean, c.imageStd)),
};

/**
 * Where a tiled image's tiles go in the prompt, per projector that tiles (mtmd.cpp's slice templates); the others put
 * one block of rows between their markers (projector-markers.ts).
 */
const LAYOUTS: Partial<Readonly<Record<ProjectorType, (width: number, height: number, c: VisionConfig) => ImageLayoutPiece[]>>> = {
  idefics3: (width, height, c) => idefics3Layout(idefics3Grid(width, height, c), c.tokensPerImage),
};

/** Whether the projector tiles images, so an image's place in the prompt follows its size. */
export const tilesImages = (c: VisionConfig): boolean => LAYOUTS[c.projector] !== undefined;

/** The prompt layout of an image of width x height, or undefined for a one-block projector. */
export function imageLayout(width: number, height: number, c: VisionConfig): ImageLayoutPiece[] | undefined {
  return LAYOUTS[c.projector]?.(width, height, c);
}

/** The encoder inputs of one decoded image, in the order the encoder takes them. */
export function preprocessImage(img: RgbImage, c: VisionConfig): PixelTile[] {
  if (img.width <= 0 || img.height <= 0 || img.data.length !== img.width * img.height * 3) {
    throw new Error(`image of ${img.width}x${img.height} pixels with ${img.data.length} bytes is not RGB`);
  }
  return PREPROCESSORS[c.projector](img, c);
}
