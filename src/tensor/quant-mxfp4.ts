/**
 * MXFP4 (ggml GGML_TYPE_MXFP4 = 39, ggml-common.h block_mxfp4): 32 four-bit E2M1 values sharing one E8M0 exponent,
 * 17 bytes per block: [e u8][qs 16]. Element j (0..15) is the low nibble of qs[j], element j + 16 its high nibble.
 * w = kvalues_mxfp4[code] * 2^(e - 128): the table holds E2M1 values doubled, so the scale is half of E8M0's
 * 2^(e - 127) (ggml-impl.h ggml_e8m0_to_fp32_half, whose e = 0 and e = 1 are the denormals 2^-128 and 2^-127).
 * Dequantizer: ggml-quants.c dequantize_row_mxfp4; quantizer: quantize_row_mxfp4_ref.
 */

const QK = 32;
const BLOCK_BYTES = 17;

/** ggml-common.h kvalues_mxfp4 (= kvalues_fp4): E2M1 x 2, index = the 4-bit code, bit 3 the sign */
export const KVALUES_MXFP4: Int8Array = Int8Array.from([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]);

/** ggml_e8m0_to_fp32_half: 2^(e - 128) as an f32 (exact for every byte: 2^-128 is an f32 denormal) */
export function e8m0ToFp32Half(e: number): number {
  return Math.pow(2, e - 128);
}

export function dequantizeMxfp4(src: Uint8Array, dst: Float32Array, n: number): void {
  for (let b = 0; b < n / QK; b++) {
    const at = b * BLOCK_BYTES;
    const d = e8m0ToFp32Half(src[at]!);
    for (let j = 0; j < QK / 2; j++) {
      const q = src[at + 1 + j]!;
      dst[b * QK + j] = KVALUES_MXFP4[q & 15]! * d;
      dst[b * QK + j + QK / 2] = KVALUES_MXFP4[q >> 4]! * d;
    }
  }
}

/**
 * best_index_mxfp4 in a block of finite values: the code whose value kvalues_mxfp4[code] * d is nearest x, the first
 * on ties. ggml compares f32 errors |value - x|; near a midpoint they are exact (x's ulp is at least theirs, and at
 * most d / 2^20 when d fits the block's largest value), so this is the scan over the 16 codes: the nearest magnitude,
 * a tie to the smaller, the sign's code for x < 0 (0, never 8 = -0, for zero).
 */
function nearestCode(x: number, d: number): number {
  const t = Math.abs(x) / d; // exact: d is a power of two
  // the magnitudes 0 1 2 3 4 6 8 12 (E2M1 x 2) by their midpoints in units of d; at a midpoint the smaller
  const m = t <= 3.5 ? (t <= 0.5 ? 0 : t <= 1.5 ? 1 : t <= 2.5 ? 2 : 3) : t <= 5 ? 4 : t <= 7 ? 5 : t <= 10 ? 6 : 7;
  return x < 0 && m > 0 ? 8 + m : m;
}

/** best_index_mxfp4 as ggml runs it, every code's f32 error in order (vals: the block's values): for blocks holding
 * NaN or an infinity, whose scale does not fit them. */
function scanCode(x: number, vals: Float32Array): number {
  let best = 0;
  let bestErr = Math.fround(Math.abs(vals[0]! - x));
  for (let i = 1; i < 16; i++) {
    const e = Math.fround(Math.abs(vals[i]! - x));
    if (e < bestErr) {
      best = i;
      bestErr = e;
    }
  }
  return best;
}

export function quantizeMxfp4(src: Float32Array, dst: Uint8Array, n: number): void {
  const vals = new Float32Array(16); // [16] a block's kvalues_mxfp4[code] * d
  for (let b = 0; b < n / QK; b++) {
    let amax = 0;
    for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(src[b * QK + j]!));
    // e = floor(log2(amax)) - 2 + 127: the largest value lands in the table's top octave (8 or 12)
    const e = amax > 0 ? Math.max(0, Math.min(255, Math.floor(Math.log2(amax)) - 2 + 127)) : 0;
    const d = e8m0ToFp32Half(e);
    const at = b * BLOCK_BYTES;
    dst[at] = e;
    if (Number.isFinite(amax)) {
      for (let j = 0; j < QK / 2; j++) dst[at + 1 + j] = nearestCode(src[b * QK + j]!, d) | (nearestCode(src[b * QK + j + QK / 2]!, d) << 4);
      continue;
    }
    for (let i = 0; i < 16; i++) vals[i] = KVALUES_MXFP4[i]! * d;
    for (let j = 0; j < QK / 2; j++) dst[at + 1 + j] = scanCode(src[b * QK + j]!, vals) | (scanCode(src[b * QK + j + QK / 2]!, vals) << 4);
  }
}
