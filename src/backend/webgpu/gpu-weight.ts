/// <reference types="@webgpu/types" />
/**
 * Weights on the GPU: GGUF bytes repacked into the u32 layouts of weight-layouts.ts, split by rows into buffers that
 * fit the adapter's storage-binding limit. A type without a shader (or left out of `nativeTypes`) is dequantized and
 * stored as F16 (F32 for odd-length rows); 1-D tensors (norms, biases) are stored as F32 for the elementwise shaders.
 * @example const w = uploadWeight(device, source, settings); // then matmul / embed read w.chunks
 */
import { dequantizeTensor, GgmlType, weightType } from "../../tensor/dtypes.ts";
import type { Weight, WeightSource } from "../backend.ts";
import type { BufferRange } from "./step-encoder.ts";
import { layoutFor, repackRows, rowWords, type GpuWeightLayout } from "./weight-layouts.ts";

export interface WeightChunk { readonly buffer: GPUBuffer; readonly rowStart: number; readonly numRows: number }

export class GpuWeight implements Weight {
  constructor(
    readonly rows: number,
    readonly cols: number,
    readonly type: GgmlType,
    /** the type the GPU holds (F16 / F32 for converted types) */
    readonly storedType: GgmlType,
    readonly layout: GpuWeightLayout,
    /** row-ranges, each within the adapter's storage-binding limit */
    readonly chunks: readonly WeightChunk[],
  ) {}
}

export interface UploadSettings {
  /** types kept as they are; the others are converted */
  readonly nativeTypes: readonly GgmlType[];
  readonly maxChunkBytes: number;
  /** a storage buffer of at least sizeBytes (throws a one-line error over the limit) */
  createBuffer(sizeBytes: number, what: string): GPUBuffer;
  /** called for each converted weight; the backend logs once per type */
  onConvert(typeName: string, type: GgmlType): void;
}

/** writeBuffer's typing wants views over plain ArrayBuffers; Dawn copies shared ones (WASM memory) just as well */
export function uploadable(view: ArrayBufferView): ArrayBufferView<ArrayBuffer> {
  return view as ArrayBufferView<ArrayBuffer>;
}

/** Validates, repacks (or converts) and uploads one tensor. */
export function uploadWeight(device: GPUDevice, source: WeightSource, settings: UploadSettings): GpuWeight {
  const wt = weightType(source.type);
  if (wt === undefined) throw new Error(`weight ${source.name}: unsupported type ${source.type}`);
  const { rows, cols } = source;
  let layout = settings.nativeTypes.includes(source.type) ? layoutFor(source.type, cols) : undefined;
  let data = source.data;
  // 1-D tensors (norms, biases) feed elementwise shaders that read f32
  const wantF32 = rows === 1;
  if (layout === undefined || (wantF32 && layout.type !== GgmlType.F32)) {
    const f32 = dequantizeTensor(source); // [rows, cols]; validates sizes with a one-line error
    if (!wantF32 && cols % 2 === 0) {
      if (layout === undefined) settings.onConvert(wt.name, source.type);
      const f16 = new Uint8Array(f32.length * 2); // [rows, cols] binary16
      const view = new DataView(f16.buffer);
      for (let i = 0; i < f32.length; i++) view.setFloat16(2 * i, f32[i]!, true);
      data = f16;
      layout = layoutFor(GgmlType.F16, cols)!;
    } else {
      data = new Uint8Array(f32.buffer);
      layout = layoutFor(GgmlType.F32, cols)!;
    }
  } else {
    const needBytes = (rows * cols / layout.blockElems) * layout.srcBlockBytes;
    if (data.length < needBytes) {
      throw new Error(`weight ${source.name}: ${data.length} bytes, ${wt.name} [${rows}, ${cols}] needs ${needBytes}`);
    }
  }
  const bytesPerRow = rowWords(layout, cols) * 4;
  const rowsPerChunk = Math.max(1, Math.floor(settings.maxChunkBytes / bytesPerRow));
  const chunks: WeightChunk[] = [];
  for (let rowStart = 0; rowStart < rows; rowStart += rowsPerChunk) {
    const numRows = Math.min(rowsPerChunk, rows - rowStart);
    const words = repackRows(layout, data, cols, rowStart, numRows); // [numRows, rowWords]
    const buffer = settings.createBuffer(words.byteLength, `weight ${source.name}`);
    device.queue.writeBuffer(buffer, 0, uploadable(words));
    chunks.push({ buffer, rowStart, numRows });
  }
  return new GpuWeight(rows, cols, source.type, layout.type, layout, chunks);
}

export function gpuWeight(w: Weight): GpuWeight {
  if (!(w instanceof GpuWeight)) throw new Error("webgpu backend: weight from another backend");
  return w;
}

/** A 1-D weight the elementwise shaders read as f32 (uploadWeight stores every 1-row tensor so). */
export function f32Weight(w: Weight, length: number, op: string): BufferRange {
  const gw = gpuWeight(w);
  if (gw.storedType !== GgmlType.F32 || gw.chunks.length !== 1 || gw.rows * gw.cols < length) {
    throw new Error(`${op}: weight must be a 1-D tensor of at least ${length} values`);
  }
  return { buffer: gw.chunks[0]!.buffer };
}
