/**
 * GGUF v3 writer: metadata with exact value types, tensor infos, data aligned to general.alignment (default 32) and
 * each tensor padded to it, as gguf.cpp writes. Tensor data can be produced lazily, one tensor at a time, so a
 * multi-GB model never has to sit in memory whole.
 */
import { closeSync, openSync, writeSync } from "node:fs";
import { byteSize, ggmlTypeName, weightType, type GgmlType } from "../tensor/dtypes.ts";
import { GgufValueType, type GgufArray, type GgufMetadataEntry, type GgufScalar } from "./gguf-file.ts";
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC } from "./reader.ts";

export interface GgufTensorToWrite {
  readonly name: string;
  /** ne0 (row length) first */
  readonly shape: readonly number[];
  readonly type: GgmlType;
  /** the tensor's bytes (byteSize(type, elements) long), or a function producing them when it is written */
  readonly data: Uint8Array | (() => Uint8Array);
}

export interface GgufToWrite {
  /** in file order; general.alignment, if present, must be a u32 power of two */
  readonly metadata: ReadonlyMap<string, GgufMetadataEntry>;
  readonly tensors: readonly GgufTensorToWrite[];
}

/** A growable little-endian byte buffer for the header. */
/** (reserve() may reallocate, so every write takes its offset first, then the view.) */
class ByteSink {
  private bytes = new Uint8Array(1 << 16);
  private view = new DataView(this.bytes.buffer);
  length = 0;
  private readonly encoder = new TextEncoder();

  private reserve(count: number): number {
    if (this.length + count > this.bytes.length) {
      const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.length + count));
      grown.set(this.bytes.subarray(0, this.length));
      this.bytes = grown;
      this.view = new DataView(grown.buffer);
    }
    const at = this.length;
    this.length += count;
    return at;
  }
  u8(v: number): void { const at = this.reserve(1); this.view.setUint8(at, v); }
  i8(v: number): void { const at = this.reserve(1); this.view.setInt8(at, v); }
  u16(v: number): void { const at = this.reserve(2); this.view.setUint16(at, v, true); }
  i16(v: number): void { const at = this.reserve(2); this.view.setInt16(at, v, true); }
  u32(v: number): void { const at = this.reserve(4); this.view.setUint32(at, v, true); }
  i32(v: number): void { const at = this.reserve(4); this.view.setInt32(at, v, true); }
  f32(v: number): void { const at = this.reserve(4); this.view.setFloat32(at, v, true); }
  f64(v: number): void { const at = this.reserve(8); this.view.setFloat64(at, v, true); }
  u64(v: number | bigint): void { const at = this.reserve(8); this.view.setBigUint64(at, BigInt(v), true); }
  i64(v: number | bigint): void { const at = this.reserve(8); this.view.setBigInt64(at, BigInt(v), true); }
  string(s: string): void {
    const encoded = this.encoder.encode(s);
    this.u64(encoded.length);
    const at = this.reserve(encoded.length);
    this.bytes.set(encoded, at);
  }
  zeros(count: number): void { const at = this.reserve(count); this.bytes.fill(0, at, this.length); }
  take(): Uint8Array { return this.bytes.subarray(0, this.length); }
}

function writeScalar(sink: ByteSink, type: GgufValueType, value: GgufScalar, key: string): void {
  const num = (): number => {
    if (typeof value !== "number") throw new Error(`gguf writer: "${key}" needs a number for ${GgufValueType[type]}, got ${typeof value}`);
    return value;
  };
  switch (type) {
    case GgufValueType.UINT8: return sink.u8(num());
    case GgufValueType.INT8: return sink.i8(num());
    case GgufValueType.UINT16: return sink.u16(num());
    case GgufValueType.INT16: return sink.i16(num());
    case GgufValueType.UINT32: return sink.u32(num());
    case GgufValueType.INT32: return sink.i32(num());
    case GgufValueType.FLOAT32: return sink.f32(num());
    case GgufValueType.FLOAT64: return sink.f64(num());
    case GgufValueType.BOOL: return sink.u8(value ? 1 : 0);
    case GgufValueType.STRING:
      if (typeof value !== "string") throw new Error(`gguf writer: "${key}" needs a string, got ${typeof value}`);
      return sink.string(value);
    case GgufValueType.UINT64: return sink.u64(typeof value === "bigint" ? value : num());
    case GgufValueType.INT64: return sink.i64(typeof value === "bigint" ? value : num());
    default: throw new Error(`gguf writer: "${key}" has unwritable value type ${type}`);
  }
}

function alignmentOf(metadata: ReadonlyMap<string, GgufMetadataEntry>): number {
  const entry = metadata.get("general.alignment");
  if (entry === undefined) return GGUF_DEFAULT_ALIGNMENT;
  const a = entry.value;
  if (entry.type !== GgufValueType.UINT32 || typeof a !== "number" || a === 0 || (a & (a - 1)) !== 0) {
    throw new Error("gguf writer: general.alignment must be a u32 power of two");
  }
  return a;
}

const padTo = (n: number, alignment: number): number => Math.ceil(n / alignment) * alignment;

interface Layout {
  /** header + tensor infos + padding to the data section */
  readonly header: Uint8Array;
  readonly alignment: number;
  /** per tensor: its byte size (unpadded) */
  readonly sizesBytes: readonly number[];
  readonly totalBytes: number;
}

/** Serializes everything but the tensor data and computes where each tensor goes. Throws on programmer errors. */
function layout(gguf: GgufToWrite): Layout {
  const alignment = alignmentOf(gguf.metadata);
  const sink = new ByteSink();
  for (const ch of GGUF_MAGIC) sink.u8(ch.charCodeAt(0));
  sink.u32(3);
  sink.u64(gguf.tensors.length);
  sink.u64(gguf.metadata.size);
  for (const [key, entry] of gguf.metadata) {
    sink.string(key);
    sink.u32(entry.type);
    if (entry.type === GgufValueType.ARRAY) {
      const array = entry.value as GgufArray;
      sink.u32(array.elementType);
      sink.u64(array.values.length);
      for (const v of array.values) writeScalar(sink, array.elementType, v, key);
    } else {
      writeScalar(sink, entry.type, entry.value as GgufScalar, key);
    }
  }
  const sizesBytes: number[] = [];
  let offset = 0;
  for (const t of gguf.tensors) {
    const w = weightType(t.type);
    if (w === undefined) throw new Error(`gguf writer: tensor "${t.name}" has unsupported type ${ggmlTypeName(t.type)}`);
    if (t.shape[0]! % w.blockSize !== 0) throw new Error(`gguf writer: tensor "${t.name}" row length ${t.shape[0]} is not a multiple of ${w.blockSize} (${w.name})`);
    const size = byteSize(w, t.shape.reduce((a, b) => a * b, 1));
    sink.string(t.name);
    sink.u32(t.shape.length);
    for (const d of t.shape) sink.u64(d);
    sink.u32(t.type);
    sink.u64(offset);
    sizesBytes.push(size);
    offset += padTo(size, alignment);
  }
  // the data section starts aligned; a file without tensors (a vocab-only GGUF) has none and ends here
  if (gguf.tensors.length > 0) sink.zeros(padTo(sink.length, alignment) - sink.length);
  const header = sink.take();
  return { header, alignment, sizesBytes, totalBytes: header.length + offset };
}

function dataOf(t: GgufTensorToWrite, sizeBytes: number): Uint8Array {
  const data = typeof t.data === "function" ? t.data() : t.data;
  if (data.length !== sizeBytes) throw new Error(`gguf writer: tensor "${t.name}" has ${data.length} bytes of data, expected ${sizeBytes}`);
  return data;
}

/**
 * The whole file in memory (small models, tests).
 * @example const bytes = serializeGguf({ metadata, tensors }); parseGguf(bytes, "test")
 */
export function serializeGguf(gguf: GgufToWrite): Uint8Array {
  const { header, alignment, sizesBytes, totalBytes } = layout(gguf);
  const out = new Uint8Array(totalBytes);
  out.set(header);
  let at = header.length;
  gguf.tensors.forEach((t, i) => {
    out.set(dataOf(t, sizesBytes[i]!), at);
    at += padTo(sizesBytes[i]!, alignment);
  });
  return out;
}

/**
 * Streams the file to `path`, producing one tensor's data at a time; `onTensor` reports progress (bytes written).
 * @example writeGgufFile("out.gguf", { metadata, tensors }, (done, total) => bar.update(done, total))
 */
export function writeGgufFile(path: string, gguf: GgufToWrite, onTensor?: (bytesDone: number, bytesTotal: number) => void): number {
  const { header, alignment, sizesBytes, totalBytes } = layout(gguf);
  const fd = openSync(path, "w");
  try {
    const writeAll = (data: Uint8Array) => {
      for (let at = 0; at < data.length; ) at += writeSync(fd, data, at, data.length - at);
    };
    writeAll(header);
    let written = header.length;
    const padding = new Uint8Array(alignment);
    gguf.tensors.forEach((t, i) => {
      const data = dataOf(t, sizesBytes[i]!);
      writeAll(data);
      const pad = padTo(data.length, alignment) - data.length;
      if (pad > 0) writeAll(padding.subarray(0, pad));
      written += data.length + pad;
      onTensor?.(written, totalBytes);
    });
    return written;
  } finally {
    closeSync(fd);
  }
}
