/**
 * MXFP4 blocks built by hand decode to the values ggml's definitions give (ggml-common.h block_mxfp4, kvalues_mxfp4;
 * ggml-impl.h ggml_e8m0_to_fp32_half), and the reference quantizer picks ggml's exponent. The comparison with
 * llama.cpp's own dequantizer is test/tensor/llama-cpp-dequantize.test.ts (it walks every row of the table).
 */
import { describe, expect, test } from "bun:test";
import { GgmlType, weightType } from "../../src/tensor/dtypes.ts";
import { e8m0ToFp32Half } from "../../src/tensor/quant-mxfp4.ts";

const mxfp4 = weightType(GgmlType.MXFP4)!;

describe("mxfp4", () => {
  test("E8M0 half scale: 2^(e - 128), the denormal bit patterns of ggml for e = 0 and 1", () => {
    const bits = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0]!;
    expect(bits(e8m0ToFp32Half(0))).toBe(0x00200000);
    expect(bits(e8m0ToFp32Half(1))).toBe(0x00400000);
    expect(bits(e8m0ToFp32Half(128))).toBe(bits(1));
    expect(bits(e8m0ToFp32Half(130))).toBe(bits(4));
    expect(bits(e8m0ToFp32Half(255))).toBe(254 << 23);
  });

  test("a block decodes code j of qs[j] low nibble to element j and the high nibble to element j + 16", () => {
    const block = new Uint8Array(17);
    block[0] = 127; // d = 0.5
    for (let j = 0; j < 16; j++) block[1 + j] = j | ((15 - j) << 4);
    const out = new Float32Array(32);
    mxfp4.dequantize(block, out, 32);
    const table = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];
    for (let j = 0; j < 16; j++) {
      expect(out[j]).toBe(table[j]! * 0.5);
      expect(out[j + 16]).toBe(table[15 - j]! * 0.5);
    }
  });

  test("quantize: e = floor(log2(amax)) - 2 + 127, each value to its nearest code, values on the grid exactly", () => {
    const x = new Float32Array(32);
    const grid = [0, 0.25, 0.5, 0.75, 1, 1.5, 2, 3];
    for (let j = 0; j < 32; j++) x[j] = (j % 2 === 0 ? 1 : -1) * grid[j % 8]!;
    const bytes = new Uint8Array(17);
    mxfp4.quantize(x, bytes, 32);
    expect(bytes[0]).toBe(Math.floor(Math.log2(3)) - 2 + 127);
    const back = new Float32Array(32);
    mxfp4.dequantize(bytes, back, 32);
    expect(Array.from(back)).toEqual(Array.from(x));
    // an all-zero block has e = 0
    mxfp4.quantize(new Float32Array(32), bytes, 32);
    expect(bytes[0]).toBe(0);
  });
});
