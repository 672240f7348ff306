/**
 * THE table of weight types (ggml `type_traits`, gguf-py `GGML_QUANT_SIZES`). All row and offset math reads it,
 * and the tests walk it, so a new type is one row here plus kernels.
 * The exported shape below is a contract other code relies on.
 */
import { dequantizeBf16, dequantizeF16, dequantizeF32, quantizeBf16, quantizeF16, quantizeF32 } from "./quant-float.ts";
import { dequantizeQ4_K, dequantizeQ5_K, dequantizeQ6_K, quantizeQ4_K, quantizeQ5_K, quantizeQ6_K } from "./quant-k.ts";
import {
  dequantizeQ4_0, dequantizeQ4_1, dequantizeQ5_0, dequantizeQ5_1, dequantizeQ8_0,
  quantizeQ4_0, quantizeQ4_1, quantizeQ5_0, quantizeQ5_1, quantizeQ8_0,
} from "./quant-legacy.ts";
import { dequantizeMxfp4, quantizeMxfp4 } from "./quant-mxfp4.ts";
export enum GgmlType {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
  MXFP4 = 39,
}

export interface WeightType {
  readonly type: GgmlType;
  /** lower-case name as used on the CLI and by llama.cpp file names: "f32", "q8_0", "q4_k" ... */
  readonly name: string;
  /** elements per block */
  readonly blockSize: number;
  /** bytes per block */
  readonly bytesPerBlock: number;
  /** dst[0..n) = dequantized src; n is a multiple of blockSize */
  dequantize(src: Uint8Array, dst: Float32Array, n: number): void;
  /** dst = quantized src[0..n) (round-to-nearest style is enough: used for random test models) */
  quantize(src: Float32Array, dst: Uint8Array, n: number): void;
}

type Dequantize = WeightType["dequantize"];
type Quantize = WeightType["quantize"];

const row = (
  type: GgmlType, name: string, blockSize: number, bytesPerBlock: number, dequantize: Dequantize, quantize: Quantize,
): WeightType => ({ type, name, blockSize, bytesPerBlock, dequantize, quantize });

// Layouts and formulas: see the header comments of quant-float.ts, quant-legacy.ts, quant-k.ts and quant-mxfp4.ts.
export const WEIGHT_TYPES: readonly WeightType[] = [
  row(GgmlType.F32, "f32", 1, 4, dequantizeF32, quantizeF32),
  row(GgmlType.F16, "f16", 1, 2, dequantizeF16, quantizeF16),
  row(GgmlType.BF16, "bf16", 1, 2, dequantizeBf16, quantizeBf16),
  row(GgmlType.Q8_0, "q8_0", 32, 34, dequantizeQ8_0, quantizeQ8_0),
  row(GgmlType.Q4_0, "q4_0", 32, 18, dequantizeQ4_0, quantizeQ4_0),
  row(GgmlType.Q4_1, "q4_1", 32, 20, dequantizeQ4_1, quantizeQ4_1),
  row(GgmlType.Q5_0, "q5_0", 32, 22, dequantizeQ5_0, quantizeQ5_0),
  row(GgmlType.Q5_1, "q5_1", 32, 24, dequantizeQ5_1, quantizeQ5_1),
  row(GgmlType.Q4_K, "q4_k", 256, 144, dequantizeQ4_K, quantizeQ4_K),
  row(GgmlType.Q5_K, "q5_k", 256, 176, dequantizeQ5_K, quantizeQ5_K),
  row(GgmlType.Q6_K, "q6_k", 256, 210, dequantizeQ6_K, quantizeQ6_K),
  row(GgmlType.MXFP4, "mxfp4", 32, 17, dequantizeMxfp4, quantizeMxfp4),
];

/** The row for a type id, or undefined for a type fennec does not support. */
export function weightType(type: number): WeightType | undefined {
  return WEIGHT_TYPES.find((w) => w.type === type);
}

/** Bytes of `numElements` elements of `type` (numElements must be a multiple of the block size). */
export function byteSize(type: WeightType, numElements: number): number {
  return (numElements / type.blockSize) * type.bytesPerBlock;
}

/** The row for a CLI/file-name type name such as "q4_k" (case-insensitive), or undefined. */
export function weightTypeByName(name: string): WeightType | undefined {
  const lower = name.toLowerCase();
  return WEIGHT_TYPES.find((w) => w.name === lower);
}

/**
 * ggml's names of every type id it defines (ggml.h `ggml_type`), so an error can name a type fennec does not support.
 * @example ggmlTypeName(10) // "q2_K"
 */
export function ggmlTypeName(type: number): string {
  return GGML_TYPE_NAMES[type] ?? `unknown type ${type}`;
}

const GGML_TYPE_NAMES: Readonly<Record<number, string>> = {
  0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 9: "q8_1", 10: "q2_K", 11: "q3_K",
  12: "q4_K", 13: "q5_K", 14: "q6_K", 15: "q8_K", 16: "iq2_xxs", 17: "iq2_xs", 18: "iq3_xxs", 19: "iq1_s", 20: "iq4_nl",
  21: "iq3_s", 22: "iq2_s", 23: "iq4_xs", 24: "i8", 25: "i16", 26: "i32", 27: "i64", 28: "f64", 29: "iq1_m", 30: "bf16",
  34: "tq1_0", 35: "tq2_0", 39: "mxfp4", 40: "nvfp4", 41: "q1_0", 42: "q2_0",
};

/** A tensor's raw GGUF bytes and shape (backend/backend.ts WeightSource has this shape). */
export interface TensorBytes {
  readonly name: string;
  readonly type: GgmlType;
  /** ne1 (rows = output features) */
  readonly rows: number;
  /** ne0 (the row length) */
  readonly cols: number;
  readonly data: Uint8Array;
}

/**
 * The one whole-tensor dequantizer (every backend and the reference forward use it): f32 [rows, cols] through the
 * table's dequantizer; throws a one-line error naming the tensor on an unknown type, a ragged row or short data.
 * @example const w = dequantizeTensor(weights.layers[0].wq); // [qDim * dim]
 */
export function dequantizeTensor(source: TensorBytes): Float32Array {
  const wt = weightType(source.type);
  if (wt === undefined) throw new Error(`weight ${source.name}: unsupported type ${source.type}`);
  if (source.cols % wt.blockSize !== 0) {
    throw new Error(`weight ${source.name}: row length ${source.cols} is not a multiple of the ${wt.name} block size ${wt.blockSize}`);
  }
  const n = source.rows * source.cols;
  const needBytes = (n / wt.blockSize) * wt.bytesPerBlock;
  if (source.data.length < needBytes) {
    throw new Error(`weight ${source.name}: ${source.data.length} bytes, ${wt.name} [${source.rows}, ${source.cols}] needs ${needBytes}`);
  }
  const out = new Float32Array(n); // [rows, cols]
  wt.dequantize(source.data.subarray(0, needBytes), out, n);
  return out;
}
