import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_IMAGE_PIXELS, readImageHeader } from "../../src/vision/image-header.ts";

const root = join(import.meta.dir, "..", "..");
const bytes = (...parts: (number[] | string)[]): Uint8Array =>
  new Uint8Array(parts.flatMap((p) => (typeof p === "string" ? [...p].map((c) => c.charCodeAt(0)) : p)));
const le16 = (n: number) => [n & 0xff, n >> 8];
const be16 = (n: number) => [n >> 8, n & 0xff];
const le24 = (n: number) => [n & 0xff, (n >> 8) & 0xff, n >> 16];

/** A JPEG header: SOI, an APP0 segment, a DQT segment, a fill byte, then SOF0 (or another frame marker). */
const jpeg = (width: number, height: number, sof = 0xc0) => bytes(
  [0xff, 0xd8], [0xff, 0xe0], be16(16), "JFIF", [0, 1, 1, 0, 0, 1, 0, 1, 0, 0],
  [0xff, 0xdb], be16(4), [0, 0], [0xff], [0xff, sof], be16(17), [8], be16(height), be16(width), [3],
);

describe("image headers: format and size before decoding", () => {
  test("a real PNG (swagger-ui's favicon, a project dependency)", () => {
    const png = new Uint8Array(readFileSync(join(root, "node_modules/swagger-ui-dist/favicon-32x32.png")));
    expect(readImageHeader(png)).toEqual({ ok: true, value: { format: "png", width: 32, height: 32 } });
  });

  test("JPEG: segments are skipped to the start-of-frame, fill bytes allowed, progressive SOF2 too", () => {
    expect(readImageHeader(jpeg(640, 480))).toEqual({ ok: true, value: { format: "jpeg", width: 640, height: 480 } });
    expect(readImageHeader(jpeg(33, 4000, 0xc2))).toEqual({ ok: true, value: { format: "jpeg", width: 33, height: 4000 } });
  });

  test("GIF87a / GIF89a logical screen size", () => {
    expect(readImageHeader(bytes("GIF89a", le16(300), le16(200), [0, 0, 0]))).toEqual({ ok: true, value: { format: "gif", width: 300, height: 200 } });
    expect(readImageHeader(bytes("GIF87a", le16(1), le16(2), [0, 0, 0]))).toEqual({ ok: true, value: { format: "gif", width: 1, height: 2 } });
  });

  test("WebP: lossy VP8, lossless VP8L and extended VP8X", () => {
    const riff = (chunk: string, payload: number[]) => bytes("RIFF", [0, 0, 0, 0], "WEBP", chunk, [0, 0, 0, 0], payload, new Array(16).fill(0));
    expect(readImageHeader(riff("VP8 ", [0, 0, 0, 0x9d, 0x01, 0x2a, ...le16(1024), ...le16(768)]))).toEqual({ ok: true, value: { format: "webp", width: 1024, height: 768 } });
    const bits = (800 - 1) | ((600 - 1) << 14);
    expect(readImageHeader(riff("VP8L", [0x2f, bits & 0xff, (bits >> 8) & 0xff, (bits >> 16) & 0xff, (bits >>> 24) & 0xff]))).toEqual({ ok: true, value: { format: "webp", width: 800, height: 600 } });
    expect(readImageHeader(riff("VP8X", [0, 0, 0, 0, ...le24(4095), ...le24(1)]))).toEqual({ ok: true, value: { format: "webp", width: 4096, height: 2 } });
  });

  const refusals: [string, Uint8Array, string | RegExp][] = [
    ["an unknown format (BMP)", bytes("BM", new Array(40).fill(0)), "unsupported image format (supported: PNG, JPEG, GIF, WEBP)"],
    ["empty bytes", new Uint8Array(0), /unsupported image format/],
    ["a PNG cut before IHDR", bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], [0, 0, 0, 13]), "truncated PNG header (no IHDR)"],
    ["a JPEG with scan data before any frame header", bytes([0xff, 0xd8, 0xff, 0xda], be16(8), new Array(8).fill(0)), "corrupt JPEG: no frame header before the image data"],
    ["a JPEG cut in a segment", bytes([0xff, 0xd8, 0xff, 0xe0], be16(200), [1, 2, 3]), "truncated JPEG header (no frame header)"],
    ["a JPEG of garbage after SOI", bytes([0xff, 0xd8, 0xff, 0xe0], be16(4), [0, 0], [0x12, 0x34, 0, 0]), "corrupt JPEG: no marker at byte 8"],
    ["a 0 x 5 GIF", bytes("GIF89a", le16(0), le16(5)), "GIF image of 0x5 pixels is empty"],
    ["a WebP of an unknown chunk", bytes("RIFF", [0, 0, 0, 0], "WEBP", "ABCD", new Array(20).fill(0)), 'unsupported WebP chunk "ABCD"'],
    ["a decompression bomb (65535 x 65535 PNG)", bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], [0, 0, 0, 13], "IHDR", [0, 0, 0xff, 0xff, 0, 0, 0xff, 0xff]),
      `image of 65535x65535 = 4294836225 pixels is larger than the limit of ${MAX_IMAGE_PIXELS} pixels`],
  ];
  for (const [what, input, message] of refusals) {
    test(`refuses ${what} with one line`, () => {
      const r = readImageHeader(input);
      expect(r.ok).toBe(false);
      if (!r.ok) {
        if (typeof message === "string") expect(r.error).toBe(message);
        else expect(r.error).toMatch(message);
        expect(r.error).not.toContain("\n");
      }
    });
  }

  test("fuzz: 3000 random and mutated headers give a header or an error, never a throw or a bad size", () => {
    let s = 12345;
    const rand = () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s >>> 8; };
    const seeds = [jpeg(64, 48), bytes("GIF89a", le16(3), le16(3)), bytes("RIFF", [0, 0, 0, 0], "WEBP", "VP8L", new Array(20).fill(0x2f))];
    for (let i = 0; i < 3000; i++) {
      const base = seeds[i % seeds.length]!;
      const b = i % 4 === 0 ? new Uint8Array(rand() % 64).map(() => rand() & 0xff) : base.slice(0, rand() % (base.length + 1));
      for (let k = 0; k < 3 && b.length > 0; k++) b[rand() % b.length] = rand() & 0xff;
      const r = readImageHeader(b);
      if (r.ok) {
        expect(Number.isInteger(r.value.width) && r.value.width > 0).toBe(true);
        expect(r.value.width * r.value.height).toBeLessThanOrEqual(MAX_IMAGE_PIXELS);
      } else expect(r.error.length).toBeGreaterThan(0);
    }
  });
});
