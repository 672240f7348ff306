/**
 * Load-time repacking of GGUF quant blocks into the kernels' layout (block-layouts.ts, kernels/block-layouts.ts):
 *   wq [rowGroups, numGroups, groupSize / 4, 4 rows, 4 quants]  quants of 4 rows interleaved 4 at a time ("K-quads";
 *                                                     4/5-bit: nibbles, low = the group's first half, high = the
 *                                                     second; then 5-bit: a 16-byte plane of high bits per chunk;
 *                                                     6-bit: 3 byte planes, chunk 3 in their top 2 bits;
 *                                                     8-bit: per chunk quants 0-1 of the 4 rows, then 2-3)
 *   per-group types: ws, wm [rowGroups, numGroups, 4 rows] f32   scale and offset: w = ws * q + wm
 *   MXFP4: the 4-bit codes as nibbles, ws [rowGroups, numGroups, 4 rows] u16 the upper half of each E8M0 scale's
 *          f32 (2^(e - 128): its lower half is zero for every byte e), 4.5 bits per weight
 *   K-quants: ws [rowGroups, numSuperblocks, 96 | 80 bytes]    ggml's factors per 256 weights: d and -dmin [4 rows]
 *                                                     f32, then per group sc (and m) [4 rows] as u8 (Q6_K: i8); the
 *                                                     kernels form d * sc and -dmin * m (exact in f32), so the
 *                                                     weights take 1.01-1.06x the GGUF bytes instead of 1.22-1.33x
 * Rows are padded to a multiple of 4 with zeros. One table row per ggml type says which kernel kind it becomes and
 * how to decode one block; the kinds keep unsigned quants below 128 so the relaxed i8 x i7 dot product applies.
 * Float types (F32, F16, BF16) are not repacked here: they become f32 rows (see wasm-backend.ts).
 * @example const spec = repackSpec(GgmlType.Q4_0); // { kind: KernelKind.U4, ... }
 */
import { GgmlType, weightType } from "../../tensor/dtypes.ts";
import { e8m0ToFp32Half } from "../../tensor/quant-mxfp4.ts";
import { BLOCK_LAYOUTS, KernelKind, pairByte, quantByte, type SuperblockFactorLayout } from "./block-layouts.ts";

/**
 * Decodes GGUF block `block` of a row: element values into q[e0 ..], and its group scales/offsets into s/m[g0 ..]
 * (f32 values, w = s * q + m). The K-quant decoders also give the superblock's factors (their types' kernels store
 * those instead): d, -dmin into k.d[block], k.negDmin[block] and the integer group scales and mins into
 * k.sc[g0 ..], k.mn[g0 ..] (Q6_K's int8 scales as their byte), with s = d * sc and m = -dmin * mn exactly.
 */
type BlockDecoder = (src: DataView, at: number, q: Uint8Array, e0: number, s: Float32Array, m: Float32Array, g0: number, k: SuperblockFactors, block: number) => void;

/** One row's K-quant factors: [blocksPerRow] d and -dmin, [numGroups] the integer scales and mins. */
interface SuperblockFactors {
  readonly d: Float32Array;
  readonly negDmin: Float32Array;
  readonly sc: Uint8Array;
  readonly mn: Uint8Array;
}

export interface RepackSpec {
  readonly kind: KernelKind;
  /** weights per GGUF block */
  readonly blockSize: number;
  readonly bytesPerBlock: number;
  /** weights per kernel group (one scale and one offset) */
  readonly groupSize: number;
  /** quant bytes per group and row in the repacked layout */
  readonly groupBytes: number;
  /** w = scale * (q - zeroPoint) with no offset array; 0: float offsets (wm) as decoded */
  readonly zeroPoint: number;
  readonly decode: BlockDecoder;
}

/** kernels/mxfp4.ts MXFP4_ZERO_POINT: its values are stored plus 12 (unsigned, for the i7 side of the dot product) */
const MXFP4_ZERO_POINT = 12;

const f16 = (v: DataView, at: number): number => v.getFloat16(at, true);

/** ggml get_scale_min_k4 over the 12 scale bytes at `at`: the scale of sub-block j. (Two functions, not one returning
 * a pair: a pair per sub-block was gigabytes of garbage while an 8B model loads.) */
function scaleK4(j: number, v: DataView, at: number): number {
  return j < 4 ? v.getUint8(at + j) & 63 : (v.getUint8(at + j + 4) & 0xf) | ((v.getUint8(at + j - 4) >> 6) << 4);
}

/** ggml get_scale_min_k4: the min of sub-block j. */
function minK4(j: number, v: DataView, at: number): number {
  return j < 4 ? v.getUint8(at + j + 4) & 63 : (v.getUint8(at + j + 4) >> 4) | ((v.getUint8(at + j) >> 6) << 4);
}

const decodeQ8_0: BlockDecoder = (v, at, q, e0, s, _m, g0) => {
  s[g0] = f16(v, at);
  for (let i = 0; i < 32; i++) q[e0 + i] = v.getUint8(at + 2 + i); // int8 bits kept as they are
};

// MXFP4 (tensor/quant-mxfp4.ts) keeps its 4-bit codes (the kernels look their values up: kernels/mxfp4.ts); its
// scale 2^(e - 128) goes to s[g0] as f32, stored as its upper half (repack)
const decodeMxfp4: BlockDecoder = (v, at, q, e0, s, _m, g0) => {
  s[g0] = e8m0ToFp32Half(v.getUint8(at));
  for (let j = 0; j < 16; j++) {
    const b = v.getUint8(at + 1 + j);
    q[e0 + j] = b & 15;
    q[e0 + j + 16] = b >> 4;
  }
};

function decodeNibbles(v: DataView, at: number, q: Uint8Array, e0: number): void {
  for (let j = 0; j < 16; j++) {
    const b = v.getUint8(at + j);
    q[e0 + j] = b & 15;
    q[e0 + j + 16] = b >> 4;
  }
}

const decodeQ4_0: BlockDecoder = (v, at, q, e0, s, m, g0) => {
  const d = f16(v, at);
  s[g0] = d;
  m[g0] = -8 * d;
  decodeNibbles(v, at + 2, q, e0);
};

const decodeQ4_1: BlockDecoder = (v, at, q, e0, s, m, g0) => {
  s[g0] = f16(v, at);
  m[g0] = f16(v, at + 2);
  decodeNibbles(v, at + 4, q, e0);
};

function decode5(v: DataView, qhAt: number, qsAt: number, q: Uint8Array, e0: number): void {
  const qh = v.getUint32(qhAt, true);
  for (let j = 0; j < 16; j++) {
    const b = v.getUint8(qsAt + j);
    q[e0 + j] = (b & 15) | (((qh >>> j) & 1) << 4);
    q[e0 + j + 16] = (b >> 4) | (((qh >>> (j + 16)) & 1) << 4);
  }
}

const decodeQ5_0: BlockDecoder = (v, at, q, e0, s, m, g0) => {
  const d = f16(v, at);
  s[g0] = d;
  m[g0] = -16 * d;
  decode5(v, at + 2, at + 6, q, e0);
};

const decodeQ5_1: BlockDecoder = (v, at, q, e0, s, m, g0) => {
  s[g0] = f16(v, at);
  m[g0] = f16(v, at + 2);
  decode5(v, at + 4, at + 8, q, e0);
};

/** A K-quant block's d and -dmin, and group j's 6-bit scale and min (ggml dequantize_row_q4_K / _q5_K). */
function kFactors(k: SuperblockFactors, block: number, d: number, dmin: number, g: number, sc: number, mn: number, s: Float32Array, m: Float32Array): void {
  k.d[block] = d;
  k.negDmin[block] = -dmin;
  k.sc[g] = sc;
  k.mn[g] = mn;
  s[g] = d * sc;
  m[g] = -dmin * mn;
}

const decodeQ4_K: BlockDecoder = (v, at, q, e0, s, m, g0, k, block) => {
  const d = f16(v, at);
  const dmin = f16(v, at + 2);
  for (let j = 0; j < 8; j++) {
    kFactors(k, block, d, dmin, g0 + j, scaleK4(j, v, at + 4), minK4(j, v, at + 4), s, m);
    const qs = at + 16 + (j >> 1) * 32;
    const shift = (j & 1) * 4;
    for (let l = 0; l < 32; l++) q[e0 + j * 32 + l] = (v.getUint8(qs + l) >> shift) & 15;
  }
};

const decodeQ5_K: BlockDecoder = (v, at, q, e0, s, m, g0, k, block) => {
  const d = f16(v, at);
  const dmin = f16(v, at + 2);
  const qhAt = at + 16;
  const qsAt = at + 48;
  for (let j = 0; j < 8; j++) {
    kFactors(k, block, d, dmin, g0 + j, scaleK4(j, v, at + 4), minK4(j, v, at + 4), s, m);
    const qs = qsAt + (j >> 1) * 32;
    const shift = (j & 1) * 4;
    for (let l = 0; l < 32; l++) {
      const hi = (v.getUint8(qhAt + l) >> j) & 1;
      q[e0 + j * 32 + l] = ((v.getUint8(qs + l) >> shift) & 15) | (hi << 4);
    }
  }
};

// ggml dequantize_row_q6_K: y = d * scales[g] * (q - 32), 16 int8 scales per block
const decodeQ6_K: BlockDecoder = (v, at, q, e0, s, m, g0, k, block) => {
  const d = f16(v, at + 208);
  k.d[block] = d;
  for (let g = 0; g < 16; g++) {
    const sc = d * v.getInt8(at + 192 + g);
    s[g0 + g] = sc;
    m[g0 + g] = -32 * sc;
    k.sc[g0 + g] = v.getUint8(at + 192 + g); // the int8's byte, read back as i8 by the kernels
  }
  for (let half = 0; half < 2; half++) {
    const ql = at + half * 64;
    const qh = at + 128 + half * 32;
    const e = e0 + half * 128;
    for (let l = 0; l < 32; l++) {
      const h = v.getUint8(qh + l);
      const lo = v.getUint8(ql + l);
      const lo2 = v.getUint8(ql + l + 32);
      q[e + l] = (lo & 15) | ((h & 3) << 4);
      q[e + l + 32] = (lo2 & 15) | (((h >> 2) & 3) << 4);
      q[e + l + 64] = (lo >> 4) | (((h >> 4) & 3) << 4);
      q[e + l + 96] = (lo2 >> 4) | (((h >> 6) & 3) << 4);
    }
  }
};

/** block size and bytes per block come from the weight-type table (tensor/dtypes.ts), not restated here */
const spec = (type: GgmlType, kind: KernelKind, decode: BlockDecoder, zeroPoint = 0): RepackSpec => {
  const { blockSize, bytesPerBlock } = weightType(type)!;
  const { groupSize, groupBytes } = BLOCK_LAYOUTS[kind];
  return { kind, blockSize, bytesPerBlock, decode, zeroPoint, groupSize, groupBytes };
};

/**
 * THE table: ggml type -> kernel kind, block decoder, zero point (Q5_K's qh bit j belongs to sub-block j). The decoders
 * always fill the offsets; with a zero point they equal -zeroPoint * scale and are not stored.
 */
const REPACK: ReadonlyMap<GgmlType, RepackSpec> = new Map([
  [GgmlType.Q8_0, spec(GgmlType.Q8_0, KernelKind.I8, decodeQ8_0)],
  [GgmlType.Q4_0, spec(GgmlType.Q4_0, KernelKind.U4, decodeQ4_0, 8)],
  [GgmlType.Q4_1, spec(GgmlType.Q4_1, KernelKind.U4, decodeQ4_1)],
  [GgmlType.Q5_0, spec(GgmlType.Q5_0, KernelKind.U5, decodeQ5_0, 16)],
  [GgmlType.Q5_1, spec(GgmlType.Q5_1, KernelKind.U5, decodeQ5_1)],
  [GgmlType.Q4_K, spec(GgmlType.Q4_K, KernelKind.U4K, decodeQ4_K)],
  [GgmlType.Q5_K, spec(GgmlType.Q5_K, KernelKind.U5K, decodeQ5_K)],
  [GgmlType.Q6_K, spec(GgmlType.Q6_K, KernelKind.U6G16, decodeQ6_K, 32)],
  [GgmlType.MXFP4, spec(GgmlType.MXFP4, KernelKind.MXFP4, decodeMxfp4, MXFP4_ZERO_POINT)],
]);

/** The repack rule of a quantized type, or undefined for float types (F32/F16/BF16). */
export function repackSpec(type: GgmlType): RepackSpec | undefined {
  return REPACK.get(type);
}

/** Byte sizes of the repacked arrays of a [rows, cols] weight: quants (wq), scales (ws), offsets (wm; 0 when the
 * kernels read none: KIND_I8, a zero point, or the K-quants, whose mins ride in ws). */
export function repackedSizes(s: RepackSpec, rows: number, cols: number): { quantBytes: number; scaleBytes: number; offsetBytes: number } {
  const rowGroups = Math.ceil(rows / 4);
  const numGroups = cols / s.groupSize;
  const quantBytes = rowGroups * numGroups * 4 * s.groupBytes;
  const superblock = BLOCK_LAYOUTS[s.kind].superblock;
  if (superblock !== null) return { quantBytes, scaleBytes: rowGroups * (cols / 256) * superblock.bytes, offsetBytes: 0 };
  const scaleBytes = rowGroups * numGroups * 4 * (BLOCK_LAYOUTS[s.kind].scaleBytes ?? 4);
  return { quantBytes, scaleBytes, offsetBytes: s.kind === KernelKind.I8 || s.zeroPoint !== 0 ? 0 : scaleBytes };
}

/** Row `lane` of row group rg's K-quant factors into ws (bytes; the layout of BLOCK_LAYOUTS[kind].superblock). */
function writeSuperblockFactors(s: RepackSpec, f: SuperblockFactorLayout, k: SuperblockFactors, ws: Uint8Array, wsF32: Float32Array, rg: number, lane: number, cols: number): void {
  const numBlocks = cols / 256;
  const groupsPerBlock = 256 / s.groupSize;
  for (let b = 0; b < numBlocks; b++) {
    const at = (rg * numBlocks + b) * f.bytes;
    wsF32[(at + f.dAt) / 4 + lane] = k.d[b]!;
    if (f.negDminAt >= 0) wsF32[(at + f.negDminAt) / 4 + lane] = k.negDmin[b]!;
    for (let j = 0; j < groupsPerBlock; j++) {
      const g = b * groupsPerBlock + j;
      ws[at + f.scAt + j * f.groupStride + lane] = k.sc[g]!;
      if (f.minAt >= 0) ws[at + f.minAt + j * f.groupStride + lane] = k.mn[g]!;
    }
  }
}

/**
 * Repacks `data` (GGUF [rows, cols]) into wq / ws / wm (byte views of the sizes from repackedSizes of the whole
 * weight, wm null when offsetBytes is 0; zero-filled by the caller so padded rows stay zero). `data` may hold only
 * rows [firstRow, firstRow + rows) of the weight (firstRow a multiple of 4): a chunk read from the file, each row
 * written where it goes in the whole weight (rows are independent, so the bits are those of one call).
 */
export function repack(s: RepackSpec, data: Uint8Array, rows: number, cols: number, wq: Uint8Array, ws: Uint8Array, wm: Uint8Array | null, firstRow = 0): void {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const blocksPerRow = cols / s.blockSize;
  const groupsPerBlock = s.blockSize / s.groupSize;
  const numGroups = cols / s.groupSize;
  const { superblock, highBitsAt, scaleBytes } = BLOCK_LAYOUTS[s.kind];
  // MXFP4: the upper half of each scale's f32 (exact: 2^(e - 128) has a zero lower half for every E8M0 byte), so the
  // kernels widen it with one shuffle where converting the byte took a tenth of a decode matvec
  const upperHalf = scaleBytes === 2;
  const wsU16 = upperHalf ? new Uint16Array(ws.buffer, ws.byteOffset, ws.byteLength >> 1) : null;
  const superblocks = superblock !== null;
  const wsF32 = new Float32Array(ws.buffer, ws.byteOffset, ws.byteLength / 4);
  const wmF32 = wm === null ? null : new Float32Array(wm.buffer, wm.byteOffset, wm.byteLength / 4);
  const q = new Uint8Array(cols); // [cols] element values of one row
  const sc = new Float32Array(numGroups); // [numGroups]
  const scBits = new Uint32Array(sc.buffer); // sc's f32 bits
  const mn = new Float32Array(numGroups); // [numGroups]
  const factors: SuperblockFactors = { // one row's K-quant factors
    d: new Float32Array(blocksPerRow), // [blocksPerRow]
    negDmin: new Float32Array(blocksPerRow), // [blocksPerRow]
    sc: new Uint8Array(numGroups), // [numGroups]
    mn: new Uint8Array(numGroups), // [numGroups]
  };
  for (let r = 0; r < rows; r++) {
    const rowAt = r * blocksPerRow * s.bytesPerBlock;
    for (let b = 0; b < blocksPerRow; b++) {
      s.decode(view, rowAt + b * s.bytesPerBlock, q, b * s.blockSize, sc, mn, b * groupsPerBlock, factors, b);
    }
    const rg = (firstRow + r) >> 2;
    const lane = (firstRow + r) & 3;
    if (superblock !== null) writeSuperblockFactors(s, superblock, factors, ws, wsF32, rg, lane, cols);
    for (let g = 0; g < numGroups; g++) {
      const idx = (rg * numGroups + g) * 4 + lane;
      if (wsU16 !== null) wsU16[idx] = scBits[g]! >>> 16;
      else if (!superblocks) {
        wsF32[idx] = sc[g]!;
        if (wmF32 !== null) wmF32[idx] = mn[g]!;
      }
      const base = (rg * numGroups + g) * 4 * s.groupBytes;
      const e = g * s.groupSize;
      if (s.kind === KernelKind.I8) {
        // per chunk: quants 0-1 of the 4 rows, then quants 2-3 (kernels/matmul-tile8.ts: one i16 dot product per half)
        for (let i = 0; i < s.groupSize; i++) wq[pairByte(base, lane, i)] = q[e + i]!;
      } else if (s.kind === KernelKind.U6G16) {
        // 3 byte planes: chunk k's quants (k < 3) with bits 2k, 2k + 1 of chunk 3's quant above them
        for (let i = 0; i < 12; i++) wq[quantByte(base, lane, i)] = q[e + i]! | (((q[e + 12 + (i & 3)]! >> (2 * (i >> 2))) & 3) << 6);
      } else {
        // nibbles: quant i and quant i + groupSize / 2 share a byte
        const half = s.groupSize / 2;
        for (let i = 0; i < half; i++) wq[quantByte(base, lane, i)] = (q[e + i]! & 15) | ((q[e + i + half]! & 15) << 4);
        // 5-bit: high bits after the nibbles, 16 bytes laid out like a chunk: quant i's (chunk c = i >> 2) is bit
        // 4 + c (c < 4) or 7 - c of byte 4 * lane + (i & 3)
        if (highBitsAt >= 0) {
          for (let i = 0; i < s.groupSize; i++) {
            const atHigh = base + highBitsAt + lane * 4 + (i & 3); // after the 4 rows' nibbles
            const c = i >> 2;
            wq[atHigh] = wq[atHigh]! | ((q[e + i]! >> 4) << (c < 4 ? 4 + c : 7 - c));
          }
        }
      }
    }
  }
}
