/**
 * THE table of weight types (ggml `type_traits`, gguf-py `GGML_QUANT_SIZES`). All row and offset math reads it,
 * and the tests walk it, so a new type is one row here plus kernels.
 *
 * OWNER: foundation helper (dequantize / quantize bodies). The exported shape below is a contract other code relies on.
 */
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

function notYet(): never {
  throw new Error("dtypes: not implemented yet");
}

const row = (type: GgmlType, name: string, blockSize: number, bytesPerBlock: number): WeightType => ({
  type, name, blockSize, bytesPerBlock, dequantize: notYet, quantize: notYet,
});

export const WEIGHT_TYPES: readonly WeightType[] = [
  row(GgmlType.F32, "f32", 1, 4),
  row(GgmlType.F16, "f16", 1, 2),
  row(GgmlType.BF16, "bf16", 1, 2),
  row(GgmlType.Q8_0, "q8_0", 32, 34),
  row(GgmlType.Q4_0, "q4_0", 32, 18),
  row(GgmlType.Q4_1, "q4_1", 32, 20),
  row(GgmlType.Q5_0, "q5_0", 32, 22),
  row(GgmlType.Q5_1, "q5_1", 32, 24),
  row(GgmlType.Q4_K, "q4_k", 256, 144),
  row(GgmlType.Q5_K, "q5_k", 256, 176),
  row(GgmlType.Q6_K, "q6_k", 256, 210),
];

/** The row for a type id, or undefined for a type fennec does not support. */
export function weightType(type: number): WeightType | undefined {
  return WEIGHT_TYPES.find((w) => w.type === type);
}

/** Bytes of `numElements` elements of `type` (numElements must be a multiple of the block size). */
export function byteSize(type: WeightType, numElements: number): number {
  return (numElements / type.blockSize) * type.bytesPerBlock;
}
