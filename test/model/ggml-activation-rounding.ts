/**
 * How ggml's CPU matmul rounds its input before the dot product: the activation row is converted to the weight
 * type's `vec_dot_type` (ggml-cpu.c type_traits_cpu) and the dot runs on integers (quantized) or halves (f16/bf16).
 * Rounding our oracle's inputs the same way (quantize, then dequantize) lets the llama.cpp cross-check demand the
 * same greedy tokens for every weight type instead of allowing numerical near-ties.
 */
import { GgmlType, weightType } from "../../src/tensor/dtypes.ts";
import { nearestInt } from "../../src/tensor/rounding.ts";

/** ggml's vec_dot_type for each weight type of the table (q8_1 dequantizes like q8_0: its extra sum only feeds the min term). */
const VEC_DOT_ROUNDING: Readonly<Record<number, "none" | "f16" | "bf16" | "q8_0" | "q8_K">> = {
  [GgmlType.F32]: "none",
  [GgmlType.F16]: "f16",
  [GgmlType.BF16]: "bf16",
  [GgmlType.Q8_0]: "q8_0",
  [GgmlType.Q4_0]: "q8_0",
  [GgmlType.Q4_1]: "q8_0",
  [GgmlType.Q5_0]: "q8_0",
  [GgmlType.Q5_1]: "q8_0",
  [GgmlType.Q4_K]: "q8_K",
  [GgmlType.Q5_K]: "q8_K",
  [GgmlType.Q6_K]: "q8_K",
  // ggml_vec_dot_mxfp4_q8_0
  [GgmlType.MXFP4]: "q8_0",
};

/** through a type of the table and back: quantize + dequantize */
function roundTrip(x: Float32Array, type: GgmlType): Float32Array {
  const wt = weightType(type)!;
  const bytes = new Uint8Array((x.length / wt.blockSize) * wt.bytesPerBlock);
  wt.quantize(x, bytes, x.length);
  const out = new Float32Array(x.length); // [cols]
  wt.dequantize(bytes, out, x.length);
  return out;
}

/** quantize_row_q8_K_ref: blocks of 256, scale -127 / (the signed value of largest magnitude), f32 scale, q <= 127 */
function roundQ8K(x: Float32Array): Float32Array {
  const out = new Float32Array(x.length); // [cols]
  for (let b = 0; b < x.length; b += 256) {
    let amax = 0;
    let max = 0;
    for (let j = 0; j < 256; j++) {
      const ax = Math.abs(x[b + j]!);
      if (ax > amax) {
        amax = ax;
        max = x[b + j]!;
      }
    }
    if (amax === 0) continue;
    const iscale = Math.fround(-127 / max);
    const d = Math.fround(1 / iscale);
    for (let j = 0; j < 256; j++) out[b + j] = Math.min(127, nearestInt(Math.fround(iscale * x[b + j]!))) * d;
  }
  return out;
}

/**
 * @example new ReferenceForward(config, weights, 64, { roundMatmulInput: roundLikeGgml })
 */
export function roundLikeGgml(x: Float32Array, weightType: GgmlType): Float32Array {
  const rounding = VEC_DOT_ROUNDING[weightType] ?? "none";
  switch (rounding) {
    case "none":
      return x;
    case "f16":
      return roundTrip(x, GgmlType.F16);
    case "bf16":
      return roundTrip(x, GgmlType.BF16);
    case "q8_0":
      return roundTrip(x, GgmlType.Q8_0);
    case "q8_K":
      return roundQ8K(x);
  }
}
