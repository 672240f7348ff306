/**
 * Small images in every supported format, written by the encoders of the decoding libraries themselves (fast-png,
 * jpeg-js, omggif, @jsquash/webp), from one deterministic RGB pattern, for the decoder and server tests.
 */
import { encode as encodePng } from "fast-png";
import { encode as encodeJpeg } from "jpeg-js";
import { GifWriter } from "omggif";
import encodeWebp from "@jsquash/webp/encode.js";
import type { RgbImage } from "../../src/vision/image-resize.ts";

/** A smooth RGB pattern ([height][width][3]) that JPEG keeps close. */
export function pattern(width: number, height: number, seed = 0): Uint8Array {
  const rgb = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      rgb[i] = Math.round((255 * x) / Math.max(1, width - 1));
      rgb[i + 1] = Math.round((255 * y) / Math.max(1, height - 1));
      rgb[i + 2] = (seed * 37 + 128) & 0xff;
    }
  }
  return rgb;
}

export const pngOf = (width: number, height: number, rgb: Uint8Array, channels = 3): Uint8Array =>
  encodePng({ width, height, data: channels === 3 ? rgb : withAlpha(rgb, 77), channels, depth: 8 });

export const jpegOf = (width: number, height: number, rgb: Uint8Array, quality = 95): Uint8Array =>
  new Uint8Array(encodeJpeg({ width, height, data: withAlpha(rgb, 255) }, quality).data);

/** Lossless WebP, so decoding gives the pattern back exactly. */
export async function webpOf(width: number, height: number, rgb: Uint8Array): Promise<Uint8Array> {
  const data = new Uint8ClampedArray(withAlpha(rgb, 255));
  return new Uint8Array(await encodeWebp({ width, height, data, colorSpace: "srgb" } as ImageData, { lossless: 1 }));
}

/** A GIF of a 4-colour palette (index = (x + y) % 4), and the RGB it stands for. */
export function gifOf(width: number, height: number): { bytes: Uint8Array; rgb: Uint8Array } {
  const palette = [0xff0000, 0x00ff00, 0x0000ff, 0x808080];
  const indexed = new Uint8Array(width * height);
  const rgb = new Uint8Array(width * height * 3);
  for (let i = 0; i < width * height; i++) {
    const c = palette[(indexed[i] = ((i % width) + Math.floor(i / width)) % 4)]!;
    rgb.set([c >> 16, (c >> 8) & 0xff, c & 0xff], i * 3);
  }
  const buf = new Uint8Array(1024 + width * height * 2);
  const writer = new GifWriter(buf, width, height, { palette });
  writer.addFrame(0, 0, width, height, indexed);
  return { bytes: buf.slice(0, writer.end()), rgb };
}

function withAlpha(rgb: Uint8Array, alpha: number): Uint8Array {
  const n = rgb.length / 3;
  const out = new Uint8Array(n * 4);
  for (let i = 0; i < n; i++) out.set([rgb[i * 3]!, rgb[i * 3 + 1]!, rgb[i * 3 + 2]!, alpha], i * 4);
  return out;
}

/** A binary PPM (P6), which llama.cpp's stb_image reads exactly as fennec's decoder: the oracles' lossless input. */
export function ppm(img: RgbImage): Uint8Array {
  const header = new TextEncoder().encode(`P6\n${img.width} ${img.height}\n255\n`);
  const out = new Uint8Array(header.length + img.data.length);
  out.set(header);
  out.set(img.data, header.length);
  return out;
}

/** A test card: gradients and a checkerboard, so resizing, letterboxing and lanczos filters all matter. */
export function testCard(width: number, height: number): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) {
    const i = (y * width + x) * 3;
    data[i] = Math.round((255 * x) / (width - 1));
    data[i + 1] = Math.round((255 * y) / (height - 1));
    data[i + 2] = ((x >> 3) + (y >> 3)) % 2 === 0 ? 230 : 20;
  }
  return { width, height, data };
}
