/**
 * Random test data for the conformance suite: seeded floats, and raw GGUF blocks of every weight type made of random
 * bytes (every bit pattern of the quants appears) with their f16 scale fields set to sane values.
 */
import { GgmlType, WEIGHT_TYPES, type WeightType } from "../../src/tensor/dtypes.ts";
import type { WeightSource } from "../../src/backend/backend.ts";
import { rng } from "../helpers/prng.ts";


export function randomFloats(n: number, random: () => number, scale = 1): Float32Array {
  const out = new Float32Array(n); // [n]
  for (let i = 0; i < n; i++) out[i] = (random() * 2 - 1) * scale;
  return out;
}

/** Byte offsets of the f16 scale fields inside one block, per quantized type (ggml-common.h). */
const F16_FIELDS: ReadonlyMap<GgmlType, readonly number[]> = new Map([
  [GgmlType.Q8_0, [0]],
  [GgmlType.Q4_0, [0]],
  [GgmlType.Q4_1, [0, 2]],
  [GgmlType.Q5_0, [0]],
  [GgmlType.Q5_1, [0, 2]],
  [GgmlType.Q4_K, [0, 2]],
  [GgmlType.Q5_K, [0, 2]],
  [GgmlType.Q6_K, [208]],
]);

const FLOAT_TYPES = new Set([GgmlType.F32, GgmlType.F16, GgmlType.BF16]);

/** A random [rows, cols] weight of `wt` as raw GGUF bytes. */
export function randomWeight(wt: WeightType, rows: number, cols: number, random: () => number, name = "w"): WeightSource {
  const n = rows * cols;
  const numBytes = (n / wt.blockSize) * wt.bytesPerBlock;
  const data = new Uint8Array(numBytes);
  if (FLOAT_TYPES.has(wt.type)) {
    wt.quantize(randomFloats(n, random), data, n);
  } else {
    for (let i = 0; i < numBytes; i++) data[i] = Math.floor(random() * 256);
    // MXFP4: an E8M0 exponent byte first (scale 2^(e - 128): 2^-10 .. 2^-5), no f16 field
    if (wt.type === GgmlType.MXFP4) {
      for (let b = 0; b < numBytes; b += wt.bytesPerBlock) data[b] = 118 + Math.floor(random() * 6);
      return { name, type: wt.type, rows, cols, data };
    }
    const view = new DataView(data.buffer);
    const fields = F16_FIELDS.get(wt.type)!;
    for (let b = 0; b < numBytes; b += wt.bytesPerBlock) {
      fields.forEach((f, i) => view.setFloat16(b + f, (0.002 + random() * 0.02) * (i === 0 && random() < 0.3 ? -1 : 1), true));
    }
  }
  return { name, type: wt.type, rows, cols, data };
}

export const WEIGHT_TYPE_NAMES = WEIGHT_TYPES.map((w) => w.name);
