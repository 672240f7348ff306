/**
 * Encoded image bytes to 8-bit RGB, as llama.cpp's mtmd_helper_bitmap_init_from_buf loads them (stb_image with 3
 * channels asked for: alpha dropped, not composited; 16-bit samples >> 8; low-bit grey scaled to 0..255; a GIF's
 * first frame). The header is read first (image-header.ts), so a wrong magic, a truncated header, an empty or an
 * oversized image (a decompression bomb) is refused before any decoder allocates for it. Decoders: fast-png, jpeg-js,
 * omggif (pure JS) and @jsquash/webp (libwebp in WASM, its .wasm embedded in the binary: webp-wasm.ts).
 */
import { decode as decodePngFile, convertIndexedToRgb } from "fast-png";
import { decode as decodeJpegFile } from "jpeg-js";
import { GifReader } from "omggif";
import { err, ok, type Result } from "../util/result.ts";
import { MAX_IMAGE_PIXELS, readImageHeader, type ImageFormat, type ImageHeader } from "./image-header.ts";
import type { RgbImage } from "./image-resize.ts";
import { decodeWebpRgba } from "./webp-wasm.ts";

export interface DecodeLimits {
  /** width x height above this is refused from the header (default: Pillow's decompression-bomb limit) */
  readonly maxPixels: number;
}

export const DEFAULT_DECODE_LIMITS: DecodeLimits = { maxPixels: MAX_IMAGE_PIXELS };

/** Interleaved samples with `channels` per pixel (grey, grey+alpha, RGB, RGBA) to RGB, dropping alpha as stb does. */
function toRgb(width: number, height: number, channels: number, sample: (i: number) => number): Uint8Array {
  const n = width * height;
  const out = new Uint8Array(n * 3); // [height][width][3]
  for (let p = 0; p < n; p++) {
    if (channels <= 2) {
      const g = sample(p * channels);
      out[p * 3] = g; out[p * 3 + 1] = g; out[p * 3 + 2] = g;
    } else {
      out[p * 3] = sample(p * channels);
      out[p * 3 + 1] = sample(p * channels + 1);
      out[p * 3 + 2] = sample(p * channels + 2);
    }
  }
  return out;
}

/** Grey samples of 1, 2 or 4 bits, rows padded to a byte, scaled to 0..255 (stb_image's depth_scale_table). */
function unpackLowBitGrey(data: Uint8Array, width: number, height: number, depth: number): Uint8Array {
  const rowBytes = Math.ceil((width * depth) / 8);
  const scale = 255 / ((1 << depth) - 1);
  const out = new Uint8Array(width * height); // [height][width]
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const bit = x * depth;
      const byte = data[y * rowBytes + (bit >> 3)]!;
      out[y * width + x] = ((byte >> (8 - depth - (bit & 7))) & ((1 << depth) - 1)) * scale;
    }
  }
  return out;
}

function decodePng(bytes: Uint8Array): RgbImage {
  const png = decodePngFile(bytes);
  const { width, height } = png;
  if (png.palette !== undefined) {
    const rgb = convertIndexedToRgb(png); // [height][width][3 or 4]
    const channels = rgb.length / (width * height);
    return { width, height, data: toRgb(width, height, channels, (i) => rgb[i]!) };
  }
  const data = png.depth < 8 ? unpackLowBitGrey(png.data as Uint8Array, width, height, png.depth) : png.data;
  // stb_image's 16-bit to 8-bit conversion keeps the high byte
  const shift = png.depth === 16 ? 8 : 0;
  return { width, height, data: toRgb(width, height, png.channels, (i) => data[i]! >> shift) };
}

function decodeJpeg(bytes: Uint8Array, header: ImageHeader): RgbImage {
  // jpeg-js' own guards stay as a second fence; the header check already bounded the size
  const maxResolutionInMP = Math.ceil((header.width * header.height) / 1e6) + 1;
  const jpeg = decodeJpegFile(bytes, { useTArray: true, formatAsRGBA: false, tolerantDecoding: false, maxResolutionInMP, maxMemoryUsageInMB: Math.ceil((header.width * header.height * 12) / 2 ** 20) + 64 });
  if (jpeg.width !== header.width || jpeg.height !== header.height) throw new Error(`decoded ${jpeg.width}x${jpeg.height}, the header says ${header.width}x${header.height}`);
  return { width: jpeg.width, height: jpeg.height, data: jpeg.data };
}

function decodeGif(bytes: Uint8Array): RgbImage {
  const gif = new GifReader(bytes);
  if (gif.numFrames() < 1) throw new Error("no frames");
  const { width, height } = gif;
  const rgba = new Uint8Array(width * height * 4); // [height][width][4], transparent pixels stay black as in stb
  gif.decodeAndBlitFrameRGBA(0, rgba);
  return { width, height, data: toRgb(width, height, 4, (i) => rgba[i]!) };
}

async function decodeWebp(bytes: Uint8Array): Promise<RgbImage> {
  const { width, height, data } = await decodeWebpRgba(bytes);
  return { width, height, data: toRgb(width, height, 4, (i) => data[i]!) };
}

const DECODERS: Readonly<Record<ImageFormat, (bytes: Uint8Array, header: ImageHeader) => RgbImage | Promise<RgbImage>>> = {
  png: decodePng,
  jpeg: decodeJpeg,
  gif: decodeGif,
  webp: decodeWebp,
};

/**
 * Encoded bytes to RGB, or one line naming what is wrong (format, size, corruption).
 * @example const img = await decodeImage(bytes); // ok({ width: 640, height: 480, data: Uint8Array(921600) })
 */
export async function decodeImage(bytes: Uint8Array, limits: DecodeLimits = DEFAULT_DECODE_LIMITS): Promise<Result<RgbImage>> {
  if (bytes.length === 0) return err("the image is empty (0 bytes)");
  const header = readImageHeader(bytes);
  if (!header.ok) return header;
  const { format, width, height } = header.value;
  const name = format.toUpperCase();
  if (width * height > limits.maxPixels) {
    return err(`image of ${width}x${height} = ${width * height} pixels is larger than the limit of ${limits.maxPixels} pixels`);
  }
  let img: RgbImage;
  try {
    img = await DECODERS[format](bytes, header.value);
  } catch (e) {
    const why = (e instanceof Error ? e.message : String(e)).split("\n")[0]!.slice(0, 200);
    return err(`corrupt or truncated ${name} image (${width}x${height}): ${why}`);
  }
  if (img.width !== width || img.height !== height || img.data.length !== width * height * 3) {
    return err(`corrupt ${name} image: decoded ${img.width}x${img.height}, the header says ${width}x${height}`);
  }
  return ok(img);
}
