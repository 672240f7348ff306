/**
 * The weight-type table: every row round-trips through quantize -> dequantize within its format's error bound, and
 * hand-built blocks decode to the values ggml's layout documentation (ggml-common.h) says they hold.
 */
import { describe, expect, test } from "bun:test";
import { byteSize, GgmlType, ggmlTypeName, WEIGHT_TYPES, weightType, weightTypeByName, type WeightType } from "../../src/tensor/dtypes.ts";
import { rng } from "../helpers/prng.ts"; // mulberry32, seeded, so failures reproduce

const N = 1024; // 4 super-blocks, 32 small blocks

const INPUTS: Record<string, (i: number, r: () => number) => number> = {
  uniform: (_i, r) => 2 * r() - 1,
  normal: (_i, r) => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r()) * 0.02,
  positive: (_i, r) => 1 + r(),
  outliers: (i, r) => (i % 97 === 0 ? 40 : 1) * (2 * r() - 1),
  zeros: () => 0,
  constant: () => -0.75,
};

/**
 * Worst error allowed per element, as a fraction of the (super-)block's value range (max - min, or 2*amax for the
 * symmetric types). Each is the format's half step plus room for the f16 scale; the K types also quantize scales
 * to 6 or 8 bits.
 */
const MAX_ERROR_OF_RANGE: Readonly<Record<string, number>> = {
  f32: 0, f16: 0, bf16: 0, // checked relative to the value instead
  q8_0: 0.5 / 254 + 1e-3, q4_0: 1 / 16 + 1e-3, q4_1: 0.5 / 15 + 1e-3, q5_0: 1 / 32 + 1e-3, q5_1: 0.5 / 31 + 1e-3,
  q4_k: 0.06, q5_k: 0.03, q6_k: 0.02,
  // E2M1: the top octave's codes are 8 and 12 (x the scale), and values up to 16 clip to 12: a quarter of amax
  mxfp4: 0.25 + 1e-3,
};
const RELATIVE_ERROR: Readonly<Record<string, number>> = { f32: 0, f16: 2 ** -11, bf16: 2 ** -8 };

function roundTrip(w: WeightType, x: Float32Array): Float32Array {
  const bytes = new Uint8Array(byteSize(w, x.length));
  w.quantize(x, bytes, x.length);
  const y = new Float32Array(x.length);
  w.dequantize(bytes, y, x.length);
  return y;
}

describe("weight type table", () => {
  test("ids and names are unique and lookups find every row", () => {
    expect(new Set(WEIGHT_TYPES.map((w) => w.type)).size).toBe(WEIGHT_TYPES.length);
    expect(new Set(WEIGHT_TYPES.map((w) => w.name)).size).toBe(WEIGHT_TYPES.length);
    for (const w of WEIGHT_TYPES) {
      expect(weightType(w.type)).toBe(w);
      expect(weightTypeByName(w.name.toUpperCase())).toBe(w);
      expect(ggmlTypeName(w.type).toLowerCase()).toBe(w.name);
    }
    expect(weightType(10)).toBeUndefined(); // q2_K: not supported
    expect(ggmlTypeName(10)).toBe("q2_K");
  });

  test("block sizes match the ggml struct layouts", () => {
    // field sizes from ggml-common.h, summed here rather than copied
    const layout: Record<string, number[]> = {
      f32: [4], f16: [2], bf16: [2], q8_0: [2, 32], q4_0: [2, 16], q4_1: [2, 2, 16], q5_0: [2, 4, 16], q5_1: [2, 2, 4, 16],
      q4_k: [2, 2, 12, 128], q5_k: [2, 2, 12, 32, 128], q6_k: [128, 64, 16, 2], mxfp4: [1, 16],
    };
    for (const w of WEIGHT_TYPES) expect(w.bytesPerBlock).toBe(layout[w.name]!.reduce((a, b) => a + b, 0));
  });
});

describe.each(WEIGHT_TYPES.map((w) => [w.name, w] as const))("%s", (_name, w) => {
  test.each(Object.keys(INPUTS))("round trip of %s input stays within the bound", (input) => {
    const r = rng(1234);
    const x = new Float32Array(N);
    for (let i = 0; i < N; i++) x[i] = INPUTS[input]!(i, r);
    const y = roundTrip(w, x);
    const group = Math.max(w.blockSize, 32);
    for (let start = 0; start < N; start += group) {
      let min = 0, max = 0;
      for (let i = start; i < start + group; i++) { min = Math.min(min, x[i]!); max = Math.max(max, x[i]!); }
      const range = Math.max(max - min, 2 * Math.max(Math.abs(min), Math.abs(max)) * (w.name.endsWith("_0") ? 1 : 0));
      for (let i = start; i < start + group; i++) {
        const bound = w.blockSize === 1 ? Math.abs(x[i]!) * RELATIVE_ERROR[w.name]! : range * MAX_ERROR_OF_RANGE[w.name]!;
        if (!(Math.abs(y[i]! - x[i]!) <= bound)) {
          throw new Error(`${w.name} ${input}: element ${i}: ${x[i]} -> ${y[i]} (bound ${bound})`);
        }
      }
    }
  });

  test("quantize is deterministic and dequantize reads only its own blocks", () => {
    const r = rng(99);
    const x = new Float32Array(N).map(() => r() - 0.5);
    const a = new Uint8Array(byteSize(w, N) + 7).fill(0xa5);
    const b = new Uint8Array(byteSize(w, N));
    w.quantize(x, a, N);
    w.quantize(x, b, N);
    expect(a.subarray(0, b.length)).toEqual(b);
    expect(Array.from(a.subarray(b.length))).toEqual(new Array(7).fill(0xa5)); // wrote nothing past its blocks
    // an odd byte offset must decode the same (tensor data is not always aligned in memory)
    const shifted = new Uint8Array(b.length + 1).subarray(1);
    shifted.set(b);
    const y1 = new Float32Array(N), y2 = new Float32Array(N);
    w.dequantize(b, y1, N);
    w.dequantize(shifted, y2, N);
    expect(y2).toEqual(y1);
  });
});

/** A DataView over a fresh block of `type`, for the hand-built blocks below. */
function block(type: GgmlType): [Uint8Array, DataView] {
  const bytes = new Uint8Array(weightType(type)!.bytesPerBlock);
  return [bytes, new DataView(bytes.buffer)];
}
function decode(type: GgmlType, bytes: Uint8Array): number[] {
  const w = weightType(type)!;
  const out = new Float32Array(w.blockSize * (bytes.length / w.bytesPerBlock));
  w.dequantize(bytes, out, out.length);
  return Array.from(out);
}

describe("hand-built blocks decode as ggml documents them", () => {
  test("f32 / f16 / bf16", () => {
    expect(decode(GgmlType.F32, new Uint8Array(new Float32Array([1.5, -2]).buffer))).toEqual([1.5, -2]);
    expect(decode(GgmlType.F16, new Uint8Array([0x00, 0x3c, 0x66, 0x2e]))).toEqual([1, Math.fround(0.0999755859375)]);
    expect(decode(GgmlType.BF16, new Uint8Array([0xc0, 0x3f, 0x80, 0xbf]))).toEqual([1.5, -1]);
  });

  test("q8_0: d f16 then 32 int8", () => {
    const [b, v] = block(GgmlType.Q8_0);
    v.setFloat16(0, 0.25, true);
    for (let j = 0; j < 32; j++) v.setInt8(2 + j, j - 16);
    expect(decode(GgmlType.Q8_0, b)).toEqual(Array.from({ length: 32 }, (_, j) => (j - 16) * 0.25));
  });

  test("q4_0 / q4_1: byte j = weight j (low nibble) and weight j+16 (high nibble)", () => {
    const [b0, v0] = block(GgmlType.Q4_0);
    v0.setFloat16(0, 0.5, true);
    for (let j = 0; j < 16; j++) b0[2 + j] = j | ((15 - j) << 4);
    const want0 = Array.from({ length: 32 }, (_, i) => (i < 16 ? i - 8 : 15 - (i - 16) - 8) * 0.5);
    expect(decode(GgmlType.Q4_0, b0)).toEqual(want0);

    const [b1, v1] = block(GgmlType.Q4_1);
    v1.setFloat16(0, 2, true);
    v1.setFloat16(2, -1, true);
    for (let j = 0; j < 16; j++) b1[4 + j] = j | ((15 - j) << 4);
    expect(decode(GgmlType.Q4_1, b1)).toEqual(Array.from({ length: 32 }, (_, i) => (i < 16 ? i : 31 - i) * 2 - 1));
  });

  test("q5_0 / q5_1: qh bit i is weight i's fifth bit", () => {
    const q = Array.from({ length: 32 }, (_, i) => (i * 7 + 3) % 32); // every 5-bit value once
    const fill = (bytes: Uint8Array, view: DataView, qhAt: number) => {
      let qh = 0;
      for (let i = 0; i < 32; i++) if (q[i]! & 16) qh |= 1 << i;
      view.setUint32(qhAt, qh >>> 0, true);
      for (let j = 0; j < 16; j++) bytes[qhAt + 4 + j] = (q[j]! & 15) | ((q[j + 16]! & 15) << 4);
    };
    const [b0, v0] = block(GgmlType.Q5_0);
    v0.setFloat16(0, 0.125, true);
    fill(b0, v0, 2);
    expect(decode(GgmlType.Q5_0, b0)).toEqual(q.map((x) => (x - 16) * 0.125));
    const [b1, v1] = block(GgmlType.Q5_1);
    v1.setFloat16(0, 0.5, true);
    v1.setFloat16(2, 3, true);
    fill(b1, v1, 4);
    expect(decode(GgmlType.Q5_1, b1)).toEqual(q.map((x) => x * 0.5 + 3));
  });

  // Q4_K / Q5_K: sub-block j (32 weights) has a 6-bit scale and min; 64 weights share 32 bytes of nibbles.
  const scalesK = Array.from({ length: 8 }, (_, j) => 10 + 7 * j); // 10..59, some >= 16 to use the high bits
  const minsK = Array.from({ length: 8 }, (_, j) => 60 - 5 * j);
  function packScalesK(bytes: Uint8Array, at: number): void {
    for (let j = 0; j < 4; j++) {
      bytes[at + j] = (scalesK[j]! & 63) | ((scalesK[j + 4]! >> 4) << 6);
      bytes[at + j + 4] = (minsK[j]! & 63) | ((minsK[j + 4]! >> 4) << 6);
      bytes[at + j + 8] = (scalesK[j + 4]! & 15) | ((minsK[j + 4]! & 15) << 4);
    }
  }
  const levelK = (i: number, bits: number) => (i * 5 + (i >> 5)) % (1 << bits);

  test("q4_k", () => {
    const [b, v] = block(GgmlType.Q4_K);
    v.setFloat16(0, 0.01, true);
    v.setFloat16(2, 0.02, true);
    packScalesK(b, 4);
    for (let i = 0; i < 256; i++) {
      const group = i >> 6, inGroup = i & 63;
      const byte = 16 + group * 32 + (inGroup & 31);
      b[byte]! |= inGroup < 32 ? levelK(i, 4) : levelK(i, 4) << 4;
    }
    const d = v.getFloat16(0, true), dmin = v.getFloat16(2, true);
    const want = Array.from({ length: 256 }, (_, i) =>
      Math.fround(Math.fround(d * scalesK[i >> 5]!) * levelK(i, 4) - Math.fround(dmin * minsK[i >> 5]!)));
    expect(decode(GgmlType.Q4_K, b)).toEqual(want);
  });

  test("q5_k", () => {
    const [b, v] = block(GgmlType.Q5_K);
    v.setFloat16(0, 0.01, true);
    v.setFloat16(2, 0.02, true);
    packScalesK(b, 4);
    for (let i = 0; i < 256; i++) {
      const q = levelK(i, 5), group = i >> 6, inGroup = i & 63;
      b[48 + group * 32 + (inGroup & 31)]! |= inGroup < 32 ? q & 15 : (q & 15) << 4;
      if (q & 16) b[16 + (inGroup & 31)]! |= 1 << (2 * group + (inGroup < 32 ? 0 : 1)); // qh: bit = sub-block index
    }
    const d = v.getFloat16(0, true), dmin = v.getFloat16(2, true);
    const want = Array.from({ length: 256 }, (_, i) =>
      Math.fround(Math.fround(d * scalesK[i >> 5]!) * levelK(i, 5) - Math.fround(dmin * minsK[i >> 5]!)));
    expect(decode(GgmlType.Q5_K, b)).toEqual(want);
  });

  const q6 = (i: number) => (i * 13 + (i >> 5) * 7) % 64; // no period that a swapped quarter could hide behind
  test("q6_k: ql/qh split in halves of 128, int8 scale per 16, d last", () => {
    const [b, v] = block(GgmlType.Q6_K);
    v.setFloat16(208, 0.003, true);
    const sc = Array.from({ length: 16 }, (_, j) => (j % 2 ? -1 : 1) * (20 + 6 * j));
    sc.forEach((s, j) => v.setInt8(192 + j, s));
    for (let i = 0; i < 256; i++) {
      const q = q6(i);
      const half = i >> 7, k = i & 127, quarter = k >> 5, l = k & 31; // quarter 0..3 of this half
      const qlByte = half * 64 + l + (quarter & 1) * 32;
      b[qlByte]! |= quarter < 2 ? q & 15 : (q & 15) << 4;
      b[128 + half * 32 + l]! |= (q >> 4) << (2 * quarter);
    }
    const d = v.getFloat16(208, true);
    const want = Array.from({ length: 256 }, (_, i) => Math.fround(Math.fround(d * sc[i >> 4]!) * (q6(i) - 32)));
    expect(decode(GgmlType.Q6_K, b)).toEqual(want);
  });
});
