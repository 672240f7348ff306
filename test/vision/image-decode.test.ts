import { describe, expect, test } from "bun:test";
import { encode as encodePng } from "fast-png";
import { decodeImage } from "../../src/vision/image-decode.ts";
import { gifOf, jpegOf, pattern, pngOf, webpOf } from "./test-images.ts";

const decoded = async (bytes: Uint8Array) => {
  const r = await decodeImage(bytes);
  if (!r.ok) throw new Error(r.error);
  return r.value;
};
const refused = async (bytes: Uint8Array, limits?: { maxPixels: number }) => {
  const r = await decodeImage(bytes, limits);
  if (r.ok) throw new Error("decoded, expected a refusal");
  return r.error;
};

describe("image decoding to RGB", () => {
  const rgb = pattern(37, 23);

  test("PNG RGB gives the pixels back exactly; RGBA drops alpha (stb_image with 3 channels)", async () => {
    expect(await decoded(pngOf(37, 23, rgb))).toEqual({ width: 37, height: 23, data: rgb });
    expect((await decoded(pngOf(37, 23, rgb, 4))).data).toEqual(rgb);
  });

  test("PNG 16-bit keeps the high byte; grey becomes three equal channels", async () => {
    const wide = new Uint16Array(2 * 1 * 3).map((_, i) => i * 10000 + 255);
    const img = await decoded(encodePng({ width: 2, height: 1, data: wide, channels: 3, depth: 16 }));
    expect([...img.data]).toEqual([...wide].map((v) => v >> 8));
    const grey = await decoded(encodePng({ width: 3, height: 1, data: new Uint8Array([0, 100, 255]), channels: 1, depth: 8 }));
    expect([...grey.data]).toEqual([0, 0, 0, 100, 100, 100, 255, 255, 255]);
  });

  test("JPEG decodes within JPEG's loss of the pattern", async () => {
    const img = await decoded(jpegOf(37, 23, rgb));
    expect([img.width, img.height]).toEqual([37, 23]);
    let worst = 0;
    for (let i = 0; i < rgb.length; i++) worst = Math.max(worst, Math.abs(img.data[i]! - rgb[i]!));
    expect(worst).toBeLessThan(24);
  });

  test("WebP (libwebp in WASM), lossless, gives the pixels back exactly", async () => {
    expect(await decoded(await webpOf(37, 23, rgb))).toEqual({ width: 37, height: 23, data: rgb });
  });

  test("GIF: the first frame through its palette", async () => {
    const gif = gifOf(9, 5);
    expect(await decoded(gif.bytes)).toEqual({ width: 9, height: 5, data: gif.rgb });
  });
});

describe("bad images are refused with a line naming the problem", () => {
  const png = pngOf(16, 16, pattern(16, 16));

  test("empty, wrong magic, unsupported format", async () => {
    expect(await refused(new Uint8Array(0))).toBe("the image is empty (0 bytes)");
    expect(await refused(new TextEncoder().encode("hello, not an image"))).toMatch(/^unsupported image format \(supported: PNG, JPEG, GIF, WEBP\)/);
    expect(await refused(new TextEncoder().encode("BM6\0\0\0\0\0"))).toMatch(/unsupported image format/);
  });

  test("truncated files: in the header, and in the pixel data", async () => {
    expect(await refused(png.subarray(0, 12))).toMatch(/truncated PNG header/);
    expect(await refused(png.subarray(0, png.length - 30))).toMatch(/^corrupt or truncated PNG image \(16x16\)/);
    const jpeg = jpegOf(32, 32, pattern(32, 32));
    expect(await refused(jpeg.subarray(0, Math.floor(jpeg.length / 2)))).toMatch(/JPEG/);
    const webp = await webpOf(16, 16, pattern(16, 16));
    expect(await refused(webp.subarray(0, webp.length - 10))).toMatch(/^corrupt or truncated WEBP image/);
    const gif = gifOf(16, 16).bytes;
    expect(await refused(gif.subarray(0, 20))).toMatch(/GIF/);
  });

  test("zero-size and huge headers are refused before decoding (a decompression bomb costs no memory)", async () => {
    const withSize = (w: number, h: number) => {
      const b = png.slice();
      new DataView(b.buffer).setUint32(16, w);
      new DataView(b.buffer).setUint32(20, h);
      return b;
    };
    expect(await refused(withSize(0, 16))).toBe("PNG image of 0x16 pixels is empty");
    const before = process.memoryUsage().rss;
    expect(await refused(withSize(100_000, 100_000))).toMatch(/^image of 100000x100000 = 10000000000 pixels is larger than the limit of 178956970 pixels$/);
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 2 ** 20);
    expect(await refused(png, { maxPixels: 100 })).toBe("image of 16x16 = 256 pixels is larger than the limit of 100 pixels");
  });
});

describe("a file cut inside its signature is called truncated", () => {
  test("every format, at every length short of its magic", async () => {
    const rgb = pattern(8, 8);
    const files = { PNG: pngOf(8, 8, rgb), JPEG: jpegOf(8, 8, rgb), GIF: gifOf(8, 8).bytes, WEBP: await webpOf(8, 8, rgb) };
    const magicLength = { PNG: 8, JPEG: 3, GIF: 6, WEBP: 12 };
    for (const [name, bytes] of Object.entries(files)) {
      for (let n = 1; n < magicLength[name as keyof typeof magicLength]; n++) {
        expect(await refused(bytes.subarray(0, n))).toBe(`truncated ${name} header (${n} bytes)`);
      }
    }
  });
});
