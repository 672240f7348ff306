import { describe, expect, test } from "bun:test";
import { readVisionConfig } from "../../src/vision/mmproj.ts";
import { normalizeToPlanar, preprocessImage } from "../../src/vision/preprocess.ts";
import { smallMmproj } from "./small-mmproj.ts";

describe("image preprocessing (mtmd image preprocessors)", () => {
  test("x / 255 then (x - mean) / std per channel, channel-planar", () => {
    const img = { width: 2, height: 1, data: new Uint8Array([255, 0, 51, 0, 255, 102]) };
    const t = normalizeToPlanar(img, [0.5, 0.4, 0.3], [0.25, 0.5, 0.75]);
    const f = Math.fround;
    const expected = [
      (1 - 0.5) / 0.25, (0 - 0.5) / 0.25, // R of pixel 0, 1
      (0 - f(0.4)) / 0.5, (1 - f(0.4)) / 0.5, // G
      (f(0.2) - f(0.3)) / 0.75, (f(0.4) - f(0.3)) / 0.75, // B
    ];
    [...t.pixels].forEach((x, i) => expect(x).toBeCloseTo(expected[i]!, 6));
  });

  test("Gemma 3: any image becomes one image_size square, letterboxed on black (normalised black = -mean/std)", () => {
    const c = readVisionConfig(smallMmproj());
    if (!c.ok) throw new Error(c.error);
    const wide = { width: 112, height: 28, data: new Uint8Array(112 * 28 * 3).fill(255) };
    const [tile, ...rest] = preprocessImage(wide, c.value);
    expect(rest).toHaveLength(0);
    expect([tile!.width, tile!.height]).toEqual([56, 56]);
    // 112x28 scaled by 1/2 to 56x14, rows 21..34 white, the rest black
    const red = (x: number, y: number) => tile!.pixels[y * 56 + x]!;
    expect(red(10, 20)).toBeCloseTo(-0.5 / 0.25, 6);
    expect(red(10, 21)).toBeCloseTo(0.5 / 0.25, 6);
    expect(red(55, 34)).toBeCloseTo(0.5 / 0.25, 6);
    expect(red(0, 35)).toBeCloseTo(-0.5 / 0.25, 6);
  });

  test("a buffer that is not width x height x 3 bytes is refused", () => {
    const c = readVisionConfig(smallMmproj());
    if (!c.ok) throw new Error(c.error);
    expect(() => preprocessImage({ width: 4, height: 4, data: new Uint8Array(47) }, c.value)).toThrow("image of 4x4 pixels with 47 bytes is not RGB");
  });
});
