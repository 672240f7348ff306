/**
 * Load-time repacking of GGUF quant blocks into the kernels' layout (kernels/matmul-quant.ts):
 *   wq [rowGroups, numGroups, groupSize / 4, 4 rows, 4 quants]  quants of 4 rows interleaved 4 at a time ("K-quads";
 *                                                     4/5/6-bit: nibbles, low = the group's first half, high = the
 *                                                     second; then 5/6-bit: a 16-byte plane of high bits per chunk)
 *   ws, wm [rowGroups, numGroups, 4 rows] f32       scale and offset: w = ws * q + wm
 * Rows are padded to a multiple of 4 with zeros. One table row per ggml type says which kernel kind it becomes and
 * how to decode one block; the kinds keep unsigned quants below 128 so the relaxed i8 x i7 dot product applies.
 * Float types (F32, F16, BF16) are not repacked here: they become f32 rows (see wasm-backend.ts).
 * @example const spec = repackSpec(GgmlType.Q4_0); // { kind: KernelKind.U4, ... }
 */
import { GgmlType, weightType } from "../../tensor/dtypes.ts";

/** The kernel kinds of kernels/matmul-quant.ts (same numbers). */
export enum KernelKind {
  I8 = 0,
  U5 = 1,
  U4 = 2,
  U6G16 = 3,
}

/** Decodes GGUF block `block` of a row: element values into q[e0 ..], group scales/offsets into s/m[g0 ..]. */
type BlockDecoder = (src: DataView, at: number, q: Uint8Array, e0: number, s: Float32Array, m: Float32Array, g0: number) => void;

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

const f16 = (v: DataView, at: number): number => v.getFloat16(at, true);

/** ggml get_scale_min_k4 over the 12 scale bytes at `at`. */
function scaleMinK4(j: number, v: DataView, at: number): [number, number] {
  if (j < 4) return [v.getUint8(at + j) & 63, v.getUint8(at + j + 4) & 63];
  const sc = (v.getUint8(at + j + 4) & 0xf) | ((v.getUint8(at + j - 4) >> 6) << 4);
  const mn = (v.getUint8(at + j + 4) >> 4) | ((v.getUint8(at + j) >> 6) << 4);
  return [sc, mn];
}

const decodeQ8_0: BlockDecoder = (v, at, q, e0, s, _m, g0) => {
  s[g0] = f16(v, at);
  for (let i = 0; i < 32; i++) q[e0 + i] = v.getUint8(at + 2 + i); // int8 bits kept as they are
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

const decodeQ4_K: BlockDecoder = (v, at, q, e0, s, m, g0) => {
  const d = f16(v, at);
  const dmin = f16(v, at + 2);
  for (let j = 0; j < 8; j++) {
    const [sc, mn] = scaleMinK4(j, v, at + 4);
    s[g0 + j] = d * sc;
    m[g0 + j] = -dmin * mn;
    const qs = at + 16 + (j >> 1) * 32;
    const shift = (j & 1) * 4;
    for (let l = 0; l < 32; l++) q[e0 + j * 32 + l] = (v.getUint8(qs + l) >> shift) & 15;
  }
};

const decodeQ5_K: BlockDecoder = (v, at, q, e0, s, m, g0) => {
  const d = f16(v, at);
  const dmin = f16(v, at + 2);
  const qhAt = at + 16;
  const qsAt = at + 48;
  for (let j = 0; j < 8; j++) {
    const [sc, mn] = scaleMinK4(j, v, at + 4);
    s[g0 + j] = d * sc;
    m[g0 + j] = -dmin * mn;
    const qs = qsAt + (j >> 1) * 32;
    const shift = (j & 1) * 4;
    for (let l = 0; l < 32; l++) {
      const hi = (v.getUint8(qhAt + l) >> j) & 1;
      q[e0 + j * 32 + l] = ((v.getUint8(qs + l) >> shift) & 15) | (hi << 4);
    }
  }
};

const decodeQ6_K: BlockDecoder = (v, at, q, e0, s, m, g0) => {
  const d = f16(v, at + 208);
  for (let g = 0; g < 16; g++) {
    const sc = d * v.getInt8(at + 192 + g);
    s[g0 + g] = sc;
    m[g0 + g] = -32 * sc;
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

/** quant bytes per group and row of each kind (kernels/matmul-quant.ts groupBytes) */
const GROUP_BYTES: Readonly<Record<KernelKind, number>> = { [KernelKind.I8]: 32, [KernelKind.U5]: 20, [KernelKind.U4]: 16, [KernelKind.U6G16]: 12 };

/** block size and bytes per block come from the weight-type table (tensor/dtypes.ts), not restated here */
const spec = (type: GgmlType, kind: KernelKind, decode: BlockDecoder, zeroPoint = 0): RepackSpec => {
  const { blockSize, bytesPerBlock } = weightType(type)!;
  return { kind, blockSize, bytesPerBlock, decode, zeroPoint, groupSize: kind === KernelKind.U6G16 ? 16 : 32, groupBytes: GROUP_BYTES[kind] };
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
  [GgmlType.Q4_K, spec(GgmlType.Q4_K, KernelKind.U4, decodeQ4_K)],
  [GgmlType.Q5_K, spec(GgmlType.Q5_K, KernelKind.U5, decodeQ5_K)],
  [GgmlType.Q6_K, spec(GgmlType.Q6_K, KernelKind.U6G16, decodeQ6_K, 32)],
]);

/** The repack rule of a quantized type, or undefined for float types (F32/F16/BF16). */
export function repackSpec(type: GgmlType): RepackSpec | undefined {
  return REPACK.get(type);
}

/** Byte sizes of the repacked arrays of a [rows, cols] weight. */
export function repackedSizes(s: RepackSpec, rows: number, cols: number): { quantBytes: number; scaleFloats: number } {
  const rowGroups = Math.ceil(rows / 4);
  const numGroups = cols / s.groupSize;
  return { quantBytes: rowGroups * numGroups * 4 * s.groupBytes, scaleFloats: rowGroups * numGroups * 4 };
}

/**
 * Repacks `data` (GGUF [rows, cols]) into wq / ws / wm (views of the sizes from repackedSizes; zero-filled by the
 * caller so padded rows stay zero).
 */
export function repack(s: RepackSpec, data: Uint8Array, rows: number, cols: number, wq: Uint8Array, ws: Float32Array, wm: Float32Array): void {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const blocksPerRow = cols / s.blockSize;
  const groupsPerBlock = s.blockSize / s.groupSize;
  const numGroups = cols / s.groupSize;
  const q = new Uint8Array(cols); // [cols] element values of one row
  const sc = new Float32Array(numGroups); // [numGroups]
  const mn = new Float32Array(numGroups); // [numGroups]
  for (let r = 0; r < rows; r++) {
    const rowAt = r * blocksPerRow * s.bytesPerBlock;
    for (let b = 0; b < blocksPerRow; b++) {
      s.decode(view, rowAt + b * s.bytesPerBlock, q, b * s.blockSize, sc, mn, b * groupsPerBlock);
    }
    const rg = r >> 2;
    const lane = r & 3;
    for (let g = 0; g < numGroups; g++) {
      const idx = (rg * numGroups + g) * 4 + lane;
      ws[idx] = sc[g]!;
      wm[idx] = mn[g]!;
      const base = (rg * numGroups + g) * 4 * s.groupBytes;
      const e = g * s.groupSize;
      const at = (i: number): number => base + (i >> 2) * 16 + lane * 4 + (i & 3); // quant i of this row's group
      if (s.kind === KernelKind.I8) {
        for (let i = 0; i < s.groupSize; i++) wq[at(i)] = q[e + i]!;
      } else {
        // nibbles: quant i and quant i + groupSize / 2 share a byte
        const half = s.groupSize / 2;
        for (let i = 0; i < half; i++) wq[at(i)] = (q[e + i]! & 15) | ((q[e + i + half]! & 15) << 4);
        // high bits after the nibbles, 16 bytes laid out like a chunk: quant i's are bit(s) of byte 4 * lane + (i & 3),
        // at bit i >> 2 (5-bit) or bits 2 (i >> 2) and 2 (i >> 2) + 1 (6-bit)
        const bitsPerQuant = s.kind === KernelKind.U5 ? 1 : s.kind === KernelKind.U6G16 ? 2 : 0;
        if (bitsPerQuant > 0) {
          for (let i = 0; i < s.groupSize; i++) {
            const atHigh = base + s.groupSize * 2 + lane * 4 + (i & 3); // after the 4 rows' nibbles
            wq[atHigh] = wq[atHigh]! | ((q[e + i]! >> 4) << (bitsPerQuant * (i >> 2)));
          }
        }
      }
    }
  }
}
