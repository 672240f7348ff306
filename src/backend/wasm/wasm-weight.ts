/**
 * Weights and buffers in the WASM backend's heap: how a weight is laid out (repacked quantized blocks, repack.ts, or
 * f32 rows padded to 4 x 4), what it costs, and loading it from its file.
 * @example const w = loadWasmWeight(heap, source); weightHeapBytes(GgmlType.Q4_K, 4096, 4096);
 */
import { dequantizeTensor, type GgmlType, weightType } from "../../tensor/dtypes.ts";
import type { DeviceBuffer, Weight, WeightSource } from "../backend.ts";
import { forEachRowChunk } from "../weight-chunks.ts";
import type { KernelKind } from "./block-layouts.ts";
import { repack, repackedSizes, repackSpec, type RepackSpec } from "./repack.ts";
import { allocatedBytes, type WasmHeap } from "./wasm-memory.ts";

/** a buffer at byte offset `ptr` of the backend's memory (split-wasm-backend.ts copies between memories by it) */
export class WasmBuffer implements DeviceBuffer {
  constructor(readonly ptr: number, readonly length: number) {}
}

export interface QuantStorage {
  readonly kind: KernelKind;
  /** w = ws * (q - zeroPoint) when non-zero (wm unused), else w = ws * q + wm */
  readonly zeroPoint: number;
  /** [rowGroups, numGroups, 4, groupBytes] */
  readonly wq: number;
  /** [rowGroups, numGroups, 4] f32, or the K-quants' factors per superblock (repack.ts) */
  readonly ws: number;
  /** [rowGroups, numGroups, 4] f32, or ws where the kernels read no offsets */
  readonly wm: number;
}

/** A weight in the heap: repacked quantized blocks (quant) or f32 rows. */
export class WasmWeight implements Weight {
  constructor(
    readonly rows: number,
    readonly cols: number,
    readonly type: GgmlType,
    /** quantized storage, or null for f32 rows [rowsPadded4, colsPadded4] at f32Ptr */
    readonly quant: QuantStorage | null,
    readonly f32Ptr: number,
    /** (ptr, bytes) pairs to free */
    readonly allocations: readonly (readonly [number, number])[],
  ) {}

  get colsPadded(): number {
    return (this.cols + 3) & ~3;
  }
}

export function asWeight(w: Weight): WasmWeight {
  if (!(w instanceof WasmWeight)) throw new Error("wasm backend: weight from another backend");
  return w;
}

export function asBuffer(b: DeviceBuffer): WasmBuffer {
  if (!(b instanceof WasmBuffer)) throw new Error("wasm backend: buffer from another backend");
  return b;
}

type WeightLayout =
  | { readonly kind: "repacked"; readonly spec: RepackSpec; readonly quantBytes: number; readonly scaleBytes: number; readonly offsetBytes: number }
  | { readonly kind: "dense"; readonly rowsPadded: number; readonly colsPadded: number; readonly numBytes: number };

/**
 * How loadWeight lays a [rows, cols] weight out in the heap: repacked quantized blocks (2-D weights of a repackable
 * type), else f32 padded to 4 x 4.
 */
function weightLayout(type: GgmlType, rows: number, cols: number): WeightLayout {
  const spec = repackSpec(type);
  if (spec !== undefined && rows > 1 && cols % spec.blockSize === 0) {
    // no offset array for KIND_I8, an integer zero point or the K-quants (Q8_0: 36 bytes per 32 weights)
    return { kind: "repacked", spec, ...repackedSizes(spec, rows, cols) };
  }
  const rowsPadded = Math.ceil(rows / 4) * 4;
  const colsPadded = (cols + 3) & ~3;
  return { kind: "dense", rowsPadded, colsPadded, numBytes: rowsPadded * colsPadded * 4 };
}

/** Heap bytes loadWeight takes for one weight (what `fennec inspect` reports per tensor), alignment included. */
export function weightHeapBytes(type: GgmlType, rows: number, cols: number): number {
  const l = weightLayout(type, rows, cols);
  if (l.kind === "dense") return allocatedBytes(l.numBytes);
  return allocatedBytes(l.quantBytes) + allocatedBytes(l.scaleBytes) + (l.offsetBytes > 0 ? allocatedBytes(l.offsetBytes) : 0);
}

/** Lays a weight out in the heap (weightLayout): repacked from the file in row groups of 4, or f32 rows padded to 4 x 4. */
export function loadWasmWeight(heap: WasmHeap, source: WeightSource): WasmWeight {
  const { rows, cols, type } = source;
  const wt = weightType(type);
  if (wt === undefined) throw new Error(`weight ${source.name}: unsupported type ${type}`);
  const layout = weightLayout(type, rows, cols);
  if (layout.kind === "repacked") {
    const { spec, quantBytes, scaleBytes, offsetBytes } = layout;
    const need = (rows * cols / spec.blockSize) * spec.bytesPerBlock;
    if (source.data.length < need) throw new Error(`weight ${source.name}: ${source.data.length} bytes, ${wt.name} [${rows}, ${cols}] needs ${need}`);
    const wq = heap.alloc(quantBytes);
    const ws = heap.alloc(scaleBytes);
    const wm = offsetBytes > 0 ? heap.alloc(offsetBytes) : ws;
    const bytes = heap.bytes;
    bytes.fill(0, wq, wq + quantBytes);
    bytes.fill(0, ws, ws + scaleBytes);
    bytes.fill(0, wm, wm + offsetBytes);
    // row groups of 4 from the file through one bounded buffer, straight into the heap (weight-chunks.ts)
    const wqBytes = bytes.subarray(wq, wq + quantBytes);
    const wsBytes = bytes.subarray(ws, ws + scaleBytes);
    const wmBytes = offsetBytes > 0 ? bytes.subarray(wm, wm + offsetBytes) : null;
    forEachRowChunk(source, 4, (firstRow, numRows, data) => repack(spec, data, numRows, cols, wqBytes, wsBytes, wmBytes, firstRow));
    const allocations: (readonly [number, number])[] = [[wq, quantBytes], [ws, scaleBytes]];
    if (offsetBytes > 0) allocations.push([wm, offsetBytes]);
    return new WasmWeight(rows, cols, type, { kind: spec.kind, zeroPoint: spec.zeroPoint, wq, ws, wm }, 0, allocations);
  }
  const { rowsPadded, colsPadded, numBytes } = layout;
  const ptr = heap.alloc(numBytes);
  const floats = heap.floats;
  floats.fill(0, ptr / 4, ptr / 4 + rowsPadded * colsPadded);
  forEachRowChunk(source, 1, (firstRow, numRows, data) => {
    const values = dequantizeTensor({ name: source.name, type, rows: numRows, cols, data }); // [numRows, cols]
    for (let r = 0; r < numRows; r++) floats.set(values.subarray(r * cols, (r + 1) * cols), ptr / 4 + (firstRow + r) * colsPadded);
  });
  return new WasmWeight(rows, cols, type, null, ptr, [[ptr, numBytes]]);
}
