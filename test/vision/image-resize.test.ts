import { describe, expect, test } from "bun:test";
import { resizeRgb, resizeWithPad, type RgbImage } from "../../src/vision/image-resize.ts";

/** A gray image (R = G = B) from rows of values. */
function gray(rows: number[][]): RgbImage {
  const height = rows.length, width = rows[0]!.length;
  const data = new Uint8Array(width * height * 3);
  rows.flat().forEach((v, i) => data.fill(v, i * 3, i * 3 + 3));
  return { width, height, data };
}
const reds = (img: RgbImage): number[][] =>
  Array.from({ length: img.height }, (_, y) => Array.from({ length: img.width }, (_, x) => img.data[(y * img.width + x) * 3]!));

describe("Pillow-exact resampling (mtmd-image.cpp resize_pillow)", () => {
  test("bilinear 2 -> 4 upsampling: edge pixels kept, inner ones 3:1 blends (worked by hand from the filter)", () => {
    // output centres 0.25, 0.75, 1.25, 1.75: supports [0], [0,1] weights .75/.25, [0,1] .25/.75, [1]
    expect(reds(resizeRgb(gray([[0, 100]]), 4, 1, "bilinear"))).toEqual([[0, 25, 75, 100]]);
  });

  test("bilinear 4 -> 2 downsampling widens the filter to two input pixels each side", () => {
    // scale 2: output 0 centre 1.0 support 2 covers inputs 0..2 with weights .75, .75, .25 (of 1.75)
    const out = reds(resizeRgb(gray([[0, 70, 140, 210]]), 2, 1, "bilinear"));
    expect(out[0]![0]).toBe(Math.floor((0 * 0.75 + 70 * 0.75 + 140 * 0.25) / 1.75 + 0.5));
    expect(out[0]![1]).toBe(Math.floor((70 * 0.25 + 140 * 0.75 + 210 * 0.75) / 1.75 + 0.5));
  });

  test("a flat image stays flat in every size and algorithm; channels stay apart", () => {
    const img: RgbImage = { width: 7, height: 5, data: new Uint8Array(7 * 5 * 3).map((_, i) => [200, 13, 77][i % 3]!) };
    for (const algo of ["bilinear", "bicubic"] as const) {
      for (const [w, h] of [[3, 2], [20, 11], [7, 9]] as const) {
        const out = resizeRgb(img, w, h, algo);
        expect(out.data.length).toBe(w * h * 3);
        expect(new Set([...out.data].filter((_, i) => i % 3 === 0))).toEqual(new Set([200]));
        expect(new Set([...out.data].filter((_, i) => i % 3 === 1))).toEqual(new Set([13]));
      }
    }
  });

  test("the vertical pass runs on the horizontal pass's rounded bytes", () => {
    // 2x2 -> 4x4: rows are resampled to [0, 25, 75, 100] and [100, 100, 100, 100] first
    const out = reds(resizeRgb(gray([[0, 100], [100, 100]]), 4, 4, "bilinear"));
    expect(out[0]).toEqual([0, 25, 75, 100]);
    expect(out[1]).toEqual([25, 44, 81, 100]); // .75 * [0,25,75,100] + .25 * 100, rounded half up
    expect(out[3]).toEqual([100, 100, 100, 100]);
  });

  test("bicubic overshoot is clamped to 0..255", () => {
    const out = resizeRgb(gray([[0, 0, 255, 255]]), 16, 1, "bicubic");
    expect(Math.max(...out.data)).toBeLessThanOrEqual(255);
    expect(Math.min(...out.data)).toBe(0);
  });
});

describe("letterbox (img_tool::resize with PAD_CEIL)", () => {
  test("a wide image is scaled to fit the width and centred vertically on black", () => {
    const img = gray([[10, 20, 30, 40], [50, 60, 70, 80]]);
    const out = resizeWithPad(img, 4, 4, "bilinear");
    // scale min(4/4, 4/2) = 1: no resampling, rows 1..2 hold the image, offset (4 - 2) / 2 = 1
    expect(reds(out)).toEqual([[0, 0, 0, 0], [10, 20, 30, 40], [50, 60, 70, 80], [0, 0, 0, 0]]);
  });

  test("sides are rounded up and the offset floored: 3x1 into 2x2 makes a 2x1 band on row 0", () => {
    // scale min(2/3, 2/1) = 2/3: width ceil(2) = 2, height ceil(0.667) = 1; offset y floor(1/2) = 0
    const out = resizeWithPad(gray([[90, 90, 90]]), 2, 2, "bilinear", [1, 2, 3]);
    expect(reds(out)).toEqual([[90, 90], [1, 1]]);
    expect([...out.data.subarray(6, 9)]).toEqual([1, 2, 3]);
  });

  test("a tall image lands in the middle columns", () => {
    const out = resizeWithPad(gray([[200], [200], [200], [200]]), 4, 4, "bilinear");
    // scale min(4/1, 4/4) = 1: one column at offset floor(3 / 2) = 1
    expect(reds(out)).toEqual(Array.from({ length: 4 }, () => [0, 200, 0, 0]));
  });

  test("an image already the target size is copied unchanged", () => {
    const img = gray([[1, 2], [3, 4]]);
    const out = resizeWithPad(img, 2, 2, "bilinear");
    expect(out.data).toEqual(img.data);
    expect(out.data).not.toBe(img.data);
  });
});
