/**
 * How each weight type lives on the GPU: THE table the WebGPU backend reads. A row gives the repacking (GGUF bytes ->
 * 4-byte-aligned u32 words, since WGSL storage is read in u32 words and Q8_0 / Q4_0 / Q6_K blocks are not 4-byte
 * multiples) and the WGSL that decodes it. Types without a row are converted to F16 at load (one log line).
 *
 * WGSL contract of `wgsl`: reads `W: array<u32>` (the weight chunk) and `X: array<f32>`, and defines
 *   fn unit_dot(row: u32, u: u32, xb: u32) -> f32   dot of unit u of `row` with X[xb .. xb + UNIT)
 *   fn unit_get(row: u32, u: u32, l: u32) -> f32    element l of unit u of `row`
 * with `const UNIT: u32` elements per unit; the row stride in words comes from the shader's params (`p.rowWords`).
 * A "unit" is the parallel grain: 32 elements for block types (a K-quant sub-block), 1 or 2 for floats.
 */
import { GgmlType, weightType } from "../../tensor/dtypes.ts";
import { e8m0ToFp32Half } from "../../tensor/quant-mxfp4.ts";

export interface GpuWeightLayout {
  readonly type: GgmlType;
  /** elements per unit (the grain one thread works on) */
  readonly unitElems: number;
  /** elements per GGUF block */
  readonly blockElems: number;
  /** u32 words per repacked block */
  readonly blockWords: number;
  /** GGUF bytes per block (of blockElems elements) */
  readonly srcBlockBytes: number;
  /** GGUF block bytes -> blockWords words at dst[dstWord..] (dstF32 views the same memory, for widened scales) */
  repackBlock(src: DataView, srcByte: number, dst: Uint32Array, dstF32: Float32Array, dstWord: number): void;
  readonly wgsl: string;
}

/** copies nWords little-endian u32 words (src may be unaligned) */
function copyWords(src: DataView, srcByte: number, dst: Uint32Array, dstWord: number, nWords: number): void {
  for (let i = 0; i < nWords; i++) dst[dstWord + i] = src.getUint32(srcByte + 4 * i, true);
}

/** WGSL helpers every layout may use: byte b of a word array region, sign-extended int8. */
export const WGSL_BYTES = /* wgsl */ `
fn byte_at(base: u32, b: u32) -> u32 { return (W[base + (b >> 2u)] >> ((b & 3u) * 8u)) & 0xffu; }
fn i8_at(base: u32, b: u32) -> i32 { return (i32(byte_at(base, b)) << 24u) >> 24u; }
`;

/** get_scale_min_k4 of Q4_K / Q5_K: (d * scale, dmin * min) of sub-block s; block word 0 = d, dmin; words 1..3 = scales */
const K_SCALE_MIN = /* wgsl */ `
fn k_scale_min(base: u32, s: u32) -> vec2f {
  let dm = unpack2x16float(W[base]);
  let sb = base + 1u;
  var sc: u32; var m: u32;
  if (s < 4u) { sc = byte_at(sb, s) & 63u; m = byte_at(sb, s + 4u) & 63u; }
  else {
    sc = (byte_at(sb, s + 4u) & 15u) | ((byte_at(sb, s - 4u) >> 6u) << 4u);
    m = (byte_at(sb, s + 4u) >> 4u) | ((byte_at(sb, s) >> 6u) << 4u);
  }
  return vec2f(dm.x * f32(sc), dm.y * f32(m));
}`;

/** the 4 x values X[xb + 4i ..] */
const X4 = "vec4f(X[xb + 4u * i], X[xb + 4u * i + 1u], X[xb + 4u * i + 2u], X[xb + 4u * i + 3u])";

/** a quantized type's GGUF block (elements, bytes), read from the weight-type table instead of restated */
function ggufBlock(type: GgmlType): { blockElems: number; srcBlockBytes: number } {
  const wt = weightType(type)!;
  return { blockElems: wt.blockSize, srcBlockBytes: wt.bytesPerBlock };
}

export const GPU_WEIGHT_LAYOUTS: readonly GpuWeightLayout[] = [
  {
    type: GgmlType.F32, unitElems: 1, blockElems: 1, blockWords: 1, srcBlockBytes: 4,
    repackBlock: (s, b, d, _f, w) => { d[w] = s.getUint32(b, true); },
    wgsl: /* wgsl */ `
const UNIT: u32 = 1u;
fn unit_get(row: u32, u: u32, l: u32) -> f32 { return bitcast<f32>(W[row * p.rowWords + u]); }
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 { return bitcast<f32>(W[row * p.rowWords + u]) * X[xb]; }`,
  },
  {
    // rows of odd length are stored as F32 instead (see layoutFor)
    type: GgmlType.F16, unitElems: 2, blockElems: 2, blockWords: 1, srcBlockBytes: 4,
    repackBlock: (s, b, d, _f, w) => { d[w] = s.getUint32(b, true); },
    wgsl: /* wgsl */ `
const UNIT: u32 = 2u;
fn unit_get(row: u32, u: u32, l: u32) -> f32 { return unpack2x16float(W[row * p.rowWords + u])[l]; }
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
  let w = unpack2x16float(W[row * p.rowWords + u]);
  return w.x * X[xb] + w.y * X[xb + 1u];
}`,
  },
  {
    // [d as f32][32 x int8 in 8 words]
    type: GgmlType.Q8_0, unitElems: 32, blockWords: 9, ...ggufBlock(GgmlType.Q8_0),
    repackBlock: (s, b, d, f, w) => { f[w] = s.getFloat16(b, true); copyWords(s, b + 2, d, w + 1, 8); },
    wgsl: /* wgsl */ `
const UNIT: u32 = 32u;
fn unit_get(row: u32, u: u32, l: u32) -> f32 {
  let base = row * p.rowWords + u * 9u;
  return bitcast<f32>(W[base]) * f32(i8_at(base + 1u, l));
}
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
  let base = row * p.rowWords + u * 9u;
  var acc = 0.0;
  for (var i = 0u; i < 8u; i++) {
    let q = W[base + 1u + i];
    let v = vec4f(f32((i32(q) << 24u) >> 24u), f32((i32(q) << 16u) >> 24u), f32((i32(q) << 8u) >> 24u), f32(i32(q) >> 24u));
    acc += dot(v, vec4f(X[xb + 4u * i], X[xb + 4u * i + 1u], X[xb + 4u * i + 2u], X[xb + 4u * i + 3u]));
  }
  return acc * bitcast<f32>(W[base]);
}`,
  },
  {
    // [d as f32][16 bytes of nibbles in 4 words]: element j < 16 is the low nibble of byte j, j + 16 the high one
    type: GgmlType.Q4_0, unitElems: 32, blockWords: 5, ...ggufBlock(GgmlType.Q4_0),
    repackBlock: (s, b, d, f, w) => { f[w] = s.getFloat16(b, true); copyWords(s, b + 2, d, w + 1, 4); },
    wgsl: /* wgsl */ `
const UNIT: u32 = 32u;
fn unit_get(row: u32, u: u32, l: u32) -> f32 {
  let base = row * p.rowWords + u * 5u;
  let q = byte_at(base + 1u, l & 15u);
  return bitcast<f32>(W[base]) * (f32(select(q & 15u, q >> 4u, l >= 16u)) - 8.0);
}
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
  let base = row * p.rowWords + u * 5u;
  var acc = 0.0;
  for (var i = 0u; i < 4u; i++) {
    let q = W[base + 1u + i];
    let lo = vec4f(f32(q & 15u), f32((q >> 8u) & 15u), f32((q >> 16u) & 15u), f32((q >> 24u) & 15u)) - 8.0;
    let hi = vec4f(f32((q >> 4u) & 15u), f32((q >> 12u) & 15u), f32((q >> 20u) & 15u), f32(q >> 28u)) - 8.0;
    let j = xb + 4u * i;
    acc += dot(lo, vec4f(X[j], X[j + 1u], X[j + 2u], X[j + 3u]));
    acc += dot(hi, vec4f(X[j + 16u], X[j + 17u], X[j + 18u], X[j + 19u]));
  }
  return acc * bitcast<f32>(W[base]);
}`,
  },
  {
    // MXFP4 (ggml block_mxfp4): [d = 2^(e - 128) as f32][16 bytes of nibbles in 4 words], the nibble order of Q4_0;
    // each nibble indexes kvalues_mxfp4 (E2M1 doubled, tensor/quant-mxfp4.ts)
    type: GgmlType.MXFP4, unitElems: 32, blockWords: 5, ...ggufBlock(GgmlType.MXFP4),
    repackBlock: (s, b, d, f, w) => { f[w] = e8m0ToFp32Half(s.getUint8(b)); copyWords(s, b + 1, d, w + 1, 4); },
    wgsl: /* wgsl */ `
const UNIT: u32 = 32u;
const KVALUES = array<f32, 16>(0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);
fn unit_get(row: u32, u: u32, l: u32) -> f32 {
  let base = row * p.rowWords + u * 5u;
  let q = byte_at(base + 1u, l & 15u);
  return bitcast<f32>(W[base]) * KVALUES[select(q & 15u, q >> 4u, l >= 16u)];
}
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
  let base = row * p.rowWords + u * 5u;
  var acc = 0.0;
  for (var i = 0u; i < 4u; i++) {
    let q = W[base + 1u + i];
    let lo = vec4f(KVALUES[q & 15u], KVALUES[(q >> 8u) & 15u], KVALUES[(q >> 16u) & 15u], KVALUES[(q >> 24u) & 15u]);
    let hi = vec4f(KVALUES[(q >> 4u) & 15u], KVALUES[(q >> 12u) & 15u], KVALUES[(q >> 20u) & 15u], KVALUES[q >> 28u]);
    let j = xb + 4u * i;
    acc += dot(lo, vec4f(X[j], X[j + 1u], X[j + 2u], X[j + 3u]));
    acc += dot(hi, vec4f(X[j + 16u], X[j + 17u], X[j + 18u], X[j + 19u]));
  }
  return acc * bitcast<f32>(W[base]);
}`,
  },
  {
    // GGUF bytes as they are (144 = 36 words): [d, dmin as f16x2][scales 12 bytes][qs 128 bytes]; unit = sub-block s
    // of 32 elements: nibbles (s odd: high) of qs[(s / 2) * 32 ..], scale and min from get_scale_min_k4(s)
    type: GgmlType.Q4_K, unitElems: 32, blockWords: 36, ...ggufBlock(GgmlType.Q4_K),
    repackBlock: (s, b, d, _f, w) => copyWords(s, b, d, w, 36),
    wgsl: /* wgsl */ `
const UNIT: u32 = 32u;
${K_SCALE_MIN}
fn unit_get(row: u32, u: u32, l: u32) -> f32 {
  let base = row * p.rowWords + (u >> 3u) * 36u;
  let s = u & 7u;
  let sm = k_scale_min(base, s);
  let q = byte_at(base + 4u, (s >> 1u) * 32u + l);
  return sm.x * f32(select(q & 15u, q >> 4u, (s & 1u) == 1u)) - sm.y;
}
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
  let base = row * p.rowWords + (u >> 3u) * 36u;
  let s = u & 7u;
  let sm = k_scale_min(base, s);
  let qw = base + 4u + (s >> 1u) * 8u;
  let shift = (s & 1u) * 4u;
  var acc = 0.0; var xsum = 0.0;
  for (var i = 0u; i < 8u; i++) {
    let q = W[qw + i] >> shift;
    let v = vec4f(f32(q & 15u), f32((q >> 8u) & 15u), f32((q >> 16u) & 15u), f32((q >> 24u) & 15u));
    let x = vec4f(X[xb + 4u * i], X[xb + 4u * i + 1u], X[xb + 4u * i + 2u], X[xb + 4u * i + 3u]);
    acc += dot(v, x);
    xsum += x.x + x.y + x.z + x.w;
  }
  return sm.x * acc - sm.y * xsum;
}`,
  },
  {
    // repacked to 53 words: [ql 128 bytes][qh 64 bytes][scales 16 x int8][d as f32]. Element e of the block:
    // half h = e / 128, k = (e % 128) / 32, l = e % 32; ql byte h*64 + (k & 1)*32 + l (k >= 2: high nibble),
    // qh byte h*32 + l >> 2k, scale e / 16. Unit = (h, k): 32 elements.
    type: GgmlType.Q6_K, unitElems: 32, blockWords: 53, ...ggufBlock(GgmlType.Q6_K),
    repackBlock: (s, b, d, f, w) => { copyWords(s, b, d, w, 52); f[w + 52] = s.getFloat16(b + 208, true); },
    wgsl: /* wgsl */ `
const UNIT: u32 = 32u;
fn q6k_q(base: u32, h: u32, k: u32, l: u32) -> f32 {
  let ql = byte_at(base, h * 64u + (k & 1u) * 32u + l);
  let qh = byte_at(base + 32u, h * 32u + l);
  let lo = select(ql & 15u, ql >> 4u, k >= 2u);
  return f32(i32(lo | (((qh >> (2u * k)) & 3u) << 4u)) - 32);
}
fn unit_get(row: u32, u: u32, l: u32) -> f32 {
  let base = row * p.rowWords + (u >> 3u) * 53u;
  let hk = u & 7u;
  let e = hk * 32u + l;
  return bitcast<f32>(W[base + 52u]) * f32(i8_at(base + 48u, e >> 4u)) * q6k_q(base, hk >> 2u, hk & 3u, l);
}
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
  let base = row * p.rowWords + (u >> 3u) * 53u;
  let hk = u & 7u;
  let h = hk >> 2u; let k = hk & 3u;
  // word i holds elements 4i .. 4i + 3: ql nibbles (high ones for k >= 2) and qh 2-bit fields (bits 2k)
  let qlw = base + h * 16u + (k & 1u) * 8u;
  let qhw = base + 32u + h * 8u;
  let s4 = select(0u, 4u, k >= 2u);
  let s2 = 2u * k;
  var acc0 = 0.0; var acc1 = 0.0;
  for (var i = 0u; i < 8u; i++) {
    let ql = W[qlw + i] >> s4;
    let qh = W[qhw + i] >> s2;
    let q = vec4u(ql & 15u, (ql >> 8u) & 15u, (ql >> 16u) & 15u, (ql >> 24u) & 15u)
      | (vec4u(qh & 3u, (qh >> 8u) & 3u, (qh >> 16u) & 3u, (qh >> 24u) & 3u) << vec4u(4u));
    let d = dot(vec4f(q) - 32.0, ${X4});
    if (i < 4u) { acc0 += d; } else { acc1 += d; }
  }
  let sc = base + 48u;
  return bitcast<f32>(W[base + 52u]) * (f32(i8_at(sc, hk * 2u)) * acc0 + f32(i8_at(sc, hk * 2u + 1u)) * acc1);
}`,
  },
  {
    // rows of odd length are converted to F32 instead
    type: GgmlType.BF16, unitElems: 2, blockElems: 2, blockWords: 1, srcBlockBytes: 4,
    repackBlock: (s, b, d, _f, w) => { d[w] = s.getUint32(b, true); },
    wgsl: /* wgsl */ `
const UNIT: u32 = 2u;
fn bf16x2(w: u32) -> vec2f { return vec2f(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u)); }
fn unit_get(row: u32, u: u32, l: u32) -> f32 { return bf16x2(W[row * p.rowWords + u])[l]; }
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
  let w = bf16x2(W[row * p.rowWords + u]);
  return w.x * X[xb] + w.y * X[xb + 1u];
}`,
  },
  {
    // [d as f32][m as f32][16 bytes of nibbles]: x = d * q + m
    type: GgmlType.Q4_1, unitElems: 32, blockWords: 6, ...ggufBlock(GgmlType.Q4_1),
    repackBlock: (s, b, d, f, w) => { f[w] = s.getFloat16(b, true); f[w + 1] = s.getFloat16(b + 2, true); copyWords(s, b + 4, d, w + 2, 4); },
    wgsl: /* wgsl */ `
const UNIT: u32 = 32u;
fn unit_get(row: u32, u: u32, l: u32) -> f32 {
  let base = row * p.rowWords + u * 6u;
  let q = byte_at(base + 2u, l & 15u);
  return bitcast<f32>(W[base]) * f32(select(q & 15u, q >> 4u, l >= 16u)) + bitcast<f32>(W[base + 1u]);
}
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
  let base = row * p.rowWords + u * 6u;
  var acc = 0.0; var xsum = 0.0;
  for (var i = 0u; i < 4u; i++) {
    let q = W[base + 2u + i];
    let lo = vec4f(f32(q & 15u), f32((q >> 8u) & 15u), f32((q >> 16u) & 15u), f32((q >> 24u) & 15u));
    let hi = vec4f(f32((q >> 4u) & 15u), f32((q >> 12u) & 15u), f32((q >> 20u) & 15u), f32(q >> 28u));
    let x0 = ${X4};
    let j = xb + 4u * i + 16u;
    let x1 = vec4f(X[j], X[j + 1u], X[j + 2u], X[j + 3u]);
    acc += dot(lo, x0) + dot(hi, x1);
    xsum += dot(x0, vec4f(1.0)) + dot(x1, vec4f(1.0));
  }
  return bitcast<f32>(W[base]) * acc + bitcast<f32>(W[base + 1u]) * xsum;
}`,
  },
  {
    // [d as f32][qh: bit j = 5th bit of element j][16 bytes of nibbles]: x = d * (q - 16)
    type: GgmlType.Q5_0, unitElems: 32, blockWords: 6, ...ggufBlock(GgmlType.Q5_0),
    repackBlock: (s, b, d, f, w) => { f[w] = s.getFloat16(b, true); copyWords(s, b + 2, d, w + 1, 5); },
    wgsl: /* wgsl */ `
const UNIT: u32 = 32u;
fn q5_q(base: u32, l: u32) -> u32 {
  let q = byte_at(base + 2u, l & 15u);
  return select(q & 15u, q >> 4u, l >= 16u) | (((W[base + 1u] >> l) & 1u) << 4u);
}
fn unit_get(row: u32, u: u32, l: u32) -> f32 {
  let base = row * p.rowWords + u * 6u;
  return bitcast<f32>(W[base]) * (f32(q5_q(base, l)) - 16.0);
}
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
  let base = row * p.rowWords + u * 6u;
  var acc = 0.0;
  for (var l = 0u; l < 32u; l++) { acc += (f32(q5_q(base, l)) - 16.0) * X[xb + l]; }
  return bitcast<f32>(W[base]) * acc;
}`,
  },
  {
    // [d as f32][m as f32][qh][16 bytes of nibbles]: x = d * q + m
    type: GgmlType.Q5_1, unitElems: 32, blockWords: 7, ...ggufBlock(GgmlType.Q5_1),
    repackBlock: (s, b, d, f, w) => { f[w] = s.getFloat16(b, true); f[w + 1] = s.getFloat16(b + 2, true); copyWords(s, b + 4, d, w + 2, 5); },
    wgsl: /* wgsl */ `
const UNIT: u32 = 32u;
fn q5_q(base: u32, l: u32) -> u32 {
  let q = byte_at(base + 3u, l & 15u);
  return select(q & 15u, q >> 4u, l >= 16u) | (((W[base + 2u] >> l) & 1u) << 4u);
}
fn unit_get(row: u32, u: u32, l: u32) -> f32 {
  let base = row * p.rowWords + u * 7u;
  return bitcast<f32>(W[base]) * f32(q5_q(base, l)) + bitcast<f32>(W[base + 1u]);
}
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
  let base = row * p.rowWords + u * 7u;
  var acc = 0.0; var xsum = 0.0;
  for (var l = 0u; l < 32u; l++) { let x = X[xb + l]; acc += f32(q5_q(base, l)) * x; xsum += x; }
  return bitcast<f32>(W[base]) * acc + bitcast<f32>(W[base + 1u]) * xsum;
}`,
  },
  {
    // GGUF bytes as they are (176 = 44 words): [d, dmin][scales 12][qh 32][qs 128]; sub-block s, element l:
    // nibble of qs[(s / 2) * 32 + l] (s odd: high) + 16 * bit s of qh[l]; scale and min as Q4_K
    type: GgmlType.Q5_K, unitElems: 32, blockWords: 44, ...ggufBlock(GgmlType.Q5_K),
    repackBlock: (s, b, d, _f, w) => copyWords(s, b, d, w, 44),
    wgsl: /* wgsl */ `
const UNIT: u32 = 32u;
${K_SCALE_MIN}
fn q5k_q(base: u32, s: u32, l: u32) -> u32 {
  let q = byte_at(base + 12u, (s >> 1u) * 32u + l);
  return select(q & 15u, q >> 4u, (s & 1u) == 1u) | (((byte_at(base + 4u, l) >> s) & 1u) << 4u);
}
fn unit_get(row: u32, u: u32, l: u32) -> f32 {
  let base = row * p.rowWords + (u >> 3u) * 44u;
  let sm = k_scale_min(base, u & 7u);
  return sm.x * f32(q5k_q(base, u & 7u, l)) - sm.y;
}
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
  let base = row * p.rowWords + (u >> 3u) * 44u;
  let s = u & 7u;
  let sm = k_scale_min(base, s);
  var acc = 0.0; var xsum = 0.0;
  for (var l = 0u; l < 32u; l++) { let x = X[xb + l]; acc += f32(q5k_q(base, s, l)) * x; xsum += x; }
  return sm.x * acc - sm.y * xsum;
}`,
  },
];

/** The layout a tensor is stored in as it is, or undefined: convert it (to F16, or F32 for odd-length rows). */
export function layoutFor(type: GgmlType, cols: number): GpuWeightLayout | undefined {
  const layout = GPU_WEIGHT_LAYOUTS.find((l) => l.type === type);
  return layout && cols % layout.blockElems === 0 ? layout : undefined;
}

/** Repacks numRows rows (from rowStart) of GGUF bytes into [numRows, rowWords] u32 words. */
export function repackRows(layout: GpuWeightLayout, data: Uint8Array, cols: number, rowStart: number, numRows: number): Uint32Array {
  const blocksPerRow = cols / layout.blockElems;
  const rowWords = blocksPerRow * layout.blockWords;
  const out = new Uint32Array(Math.max(1, numRows * rowWords)); // [numRows, rowWords]
  const outF32 = new Float32Array(out.buffer); // same memory as out
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (let r = 0; r < numRows; r++) {
    for (let blk = 0; blk < blocksPerRow; blk++) {
      const srcByte = ((rowStart + r) * blocksPerRow + blk) * layout.srcBlockBytes;
      layout.repackBlock(view, srcByte, out, outF32, r * rowWords + blk * layout.blockWords);
    }
  }
  return out;
}

/** u32 words of one repacked row. */
export function rowWords(layout: GpuWeightLayout, cols: number): number {
  return (cols / layout.blockElems) * layout.blockWords;
}
