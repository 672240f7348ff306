/**
 * Qwen2.5-VL's image preprocessing as llama.cpp's mtmd does it (mtmd-image.cpp mtmd_image_preprocessor_dyn_size):
 * "smart resize" to a size whose sides are multiples of patch x merge (28 px) near the image's own, scaled down when
 * over max_pixels and up when under min_pixels (img_tool::calc_size_preserved_ratio, in f32 like the C++), then a
 * bicubic resize letterboxed on black into that size (img_tool::resize, PAD_CEIL: clip-model.h's default pad), then
 * x / 255, (x - mean) / std: one tile of the image's own size.
 */
import { resizeWithPad, type RgbImage } from "./image-resize.ts";
import { normalizeToPlanar, type PixelTile } from "./preprocess.ts";
import type { Qwen25vlConfig } from "./qwen25vl-mmproj.ts";

/**
 * The encoder's input size for an image (calc_size_preserved_ratio with align = patch x merge, no longest edge).
 * @example qwen25vlTargetSize(150, 90, 28, 8 * 784, 4096 * 784) // { width: 140, height: 84 }
 */
export function qwen25vlTargetSize(width: number, height: number, align: number, minPixels: number, maxPixels: number): { width: number; height: number } {
  const f = Math.fround;
  // static_cast<int>(std::round / ceil / floor(x / f)) * f, the division in f32
  const round = (x: number) => Math.round(f(f(x) / align)) * align;
  const ceil = (x: number) => Math.ceil(f(f(x) / align)) * align;
  const floor = (x: number) => Math.floor(f(f(x) / align)) * align;
  let w = Math.max(align, round(width));
  let h = Math.max(align, round(height));
  if (maxPixels > 0 && h * w > maxPixels) {
    const beta = f(Math.sqrt(f(f(f(height) * width) / maxPixels)));
    h = Math.max(align, floor(f(height / beta)));
    w = Math.max(align, floor(f(width / beta)));
  } else if (minPixels > 0 && h * w < minPixels) {
    const beta = f(Math.sqrt(f(f(minPixels) / f(f(height) * width))));
    h = ceil(f(height * beta));
    w = ceil(f(width * beta));
  }
  return { width: w, height: h };
}

/** One image to the encoder's input: the smart-resized tile, normalised, channel-planar [3][height][width]. */
export function preprocessQwen25vl(img: RgbImage, c: Qwen25vlConfig): PixelTile {
  if (img.width <= 0 || img.height <= 0 || img.data.length !== img.width * img.height * 3) {
    throw new Error(`image of ${img.width}x${img.height} pixels with ${img.data.length} bytes is not RGB`);
  }
  const size = qwen25vlTargetSize(img.width, img.height, c.patchSize * c.merge, c.minPixels, c.maxPixels);
  return normalizeToPlanar(resizeWithPad(img, size.width, size.height, "bicubic", [0, 0, 0]), c.imageMean, c.imageStd);
}
