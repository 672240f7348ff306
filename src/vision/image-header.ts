/**
 * What an image is before any decoder runs: its format from the magic bytes and its size from the header (PNG IHDR,
 * GIF logical screen, JPEG start-of-frame, WebP VP8 / VP8L / VP8X), so an unsupported, truncated or oversized image
 * is refused with one clear line before a decoder allocates for it. The pixel limit is Pillow's decompression-bomb
 * error (PIL/Image.py _decompression_bomb_check: more than 2 x MAX_IMAGE_PIXELS), which vLLM's image loading
 * (vllm/multimodal/image.py, through PIL) raises on.
 */
import { err, ok, type Result } from "../util/result.ts";

export type ImageFormat = "png" | "jpeg" | "webp" | "gif";

export interface ImageHeader {
  readonly format: ImageFormat;
  readonly width: number;
  readonly height: number;
}

/** PIL.Image.MAX_IMAGE_PIXELS (89,478,485); Pillow raises DecompressionBombError past twice that */
export const MAX_IMAGE_PIXELS = 2 * 89_478_485;

const startsWith = (b: Uint8Array, sig: readonly number[], at = 0): boolean => sig.every((x, i) => b[at + i] === x);
const ascii = (s: string): number[] => [...s].map((c) => c.charCodeAt(0));
const u16le = (b: Uint8Array, at: number): number => b[at]! | (b[at + 1]! << 8);
const u16be = (b: Uint8Array, at: number): number => (b[at]! << 8) | b[at + 1]!;
const u24le = (b: Uint8Array, at: number): number => b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16);
const u32be = (b: Uint8Array, at: number): number => ((b[at]! << 24) >>> 0) + (b[at + 1]! << 16) + (b[at + 2]! << 8) + b[at + 3]!;

type Size = Result<{ width: number; height: number }>;

function png(b: Uint8Array): Size {
  // signature (8), IHDR length (4), "IHDR", width, height: big-endian
  if (b.length < 24 || !startsWith(b, ascii("IHDR"), 12)) return err("truncated PNG header (no IHDR)");
  return ok({ width: u32be(b, 16), height: u32be(b, 20) });
}

function gif(b: Uint8Array): Size {
  if (b.length < 10) return err("truncated GIF header");
  return ok({ width: u16le(b, 6), height: u16le(b, 8) });
}

/** SOF0-3, 5-7, 9-11, 13-15 carry the frame size; DHT (C4), JPG (C8) and DAC (CC) share the range but do not. */
const isStartOfFrame = (m: number): boolean => m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc;

function jpeg(b: Uint8Array): Size {
  let at = 2;
  while (at + 4 <= b.length) {
    if (b[at] !== 0xff) return err(`corrupt JPEG: no marker at byte ${at}`);
    const marker = b[at + 1]!;
    if (marker === 0xff) { at++; continue; } // fill byte
    // markers without a length: TEM, RST0-7
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) { at += 2; continue; }
    if (marker === 0xd9 || marker === 0xda) return err("corrupt JPEG: no frame header before the image data");
    const length = u16be(b, at + 2);
    if (length < 2) return err(`corrupt JPEG: segment length ${length} at byte ${at}`);
    if (isStartOfFrame(marker)) {
      if (at + 9 > b.length) break;
      return ok({ width: u16be(b, at + 7), height: u16be(b, at + 5) });
    }
    at += 2 + length;
  }
  return err("truncated JPEG header (no frame header)");
}

function webp(b: Uint8Array): Size {
  if (b.length < 30) return err("truncated WebP header");
  const chunk = String.fromCharCode(...b.subarray(12, 16));
  if (chunk === "VP8 ") {
    // frame tag (3), start code 9d 01 2a, 14-bit width and height
    if (!startsWith(b, [0x9d, 0x01, 0x2a], 23)) return err("corrupt WebP: no VP8 start code");
    return ok({ width: u16le(b, 26) & 0x3fff, height: u16le(b, 28) & 0x3fff });
  }
  if (chunk === "VP8L") {
    if (b[20] !== 0x2f) return err("corrupt WebP: no VP8L signature");
    const bits = b[21]! | (b[22]! << 8) | (b[23]! << 16) | (b[24]! << 24);
    return ok({ width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 });
  }
  if (chunk === "VP8X") return ok({ width: u24le(b, 24) + 1, height: u24le(b, 27) + 1 });
  return err(`unsupported WebP chunk "${chunk.replace(/[^\x20-\x7e]/g, "?")}"`);
}

/** Each format's leading signature bytes and how many bytes its magic check needs (WebP: RIFF, a size, WEBP). */
const SIGNATURES: readonly { format: ImageFormat; bytes: Uint8Array; magicLength: number }[] = [
  { format: "png", bytes: new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), magicLength: 8 },
  { format: "jpeg", bytes: new Uint8Array([0xff, 0xd8, 0xff]), magicLength: 3 },
  { format: "gif", bytes: new Uint8Array(ascii("GIF8")), magicLength: 6 },
  { format: "webp", bytes: new Uint8Array(ascii("RIFF")), magicLength: 12 },
];

/** Magic bytes -> format and header reader, in the order they are tried. */
const FORMATS: readonly { format: ImageFormat; magic: (b: Uint8Array) => boolean; size: (b: Uint8Array) => Size }[] = [
  { format: "png", magic: (b) => startsWith(b, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), size: png },
  { format: "jpeg", magic: (b) => startsWith(b, [0xff, 0xd8, 0xff]), size: jpeg },
  { format: "gif", magic: (b) => startsWith(b, ascii("GIF87a")) || startsWith(b, ascii("GIF89a")), size: gif },
  { format: "webp", magic: (b) => startsWith(b, ascii("RIFF")) && startsWith(b, ascii("WEBP"), 8), size: webp },
];

/**
 * The format and size of an encoded image, or one line saying why it cannot be used.
 * @example readImageHeader(bytes) // ok({ format: "png", width: 640, height: 480 })
 */
export function readImageHeader(bytes: Uint8Array): Result<ImageHeader> {
  const entry = FORMATS.find((f) => f.magic(bytes));
  // a file cut inside its signature: say so rather than "unsupported"
  const cut = entry === undefined && bytes.length > 0
    ? SIGNATURES.find((s) => bytes.length < s.magicLength && startsWith(s.bytes, [...bytes.subarray(0, s.bytes.length)]))
    : undefined;
  if (cut !== undefined) return err(`truncated ${cut.format.toUpperCase()} header (${bytes.length} bytes)`);
  if (entry === undefined) {
    return err(`unsupported image format (supported: ${FORMATS.map((f) => f.format.toUpperCase()).join(", ")})`);
  }
  const size = entry.size(bytes);
  if (!size.ok) return size;
  const { width, height } = size.value;
  if (width === 0 || height === 0) return err(`${entry.format.toUpperCase()} image of ${width}x${height} pixels is empty`);
  if (width * height > MAX_IMAGE_PIXELS) {
    return err(`image of ${width}x${height} = ${width * height} pixels is larger than the limit of ${MAX_IMAGE_PIXELS} pixels`);
  }
  return ok({ format: entry.format, width, height });
}
