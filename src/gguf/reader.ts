/**
 * GGUF v2/v3 reader (ggml docs/gguf.md, ggml/src/gguf.cpp). Validates everything and returns one error string that
 * names the file and the problem, never throws on bad input. Tensor data is never copied: `bytes` is the mmapped
 * file (or the caller's buffer) and tensorData() returns subarrays of it. A loader that must not keep the file's
 * pages resident reads a mapped file's tensors with positioned reads instead (readTensorBytes).
 *
 * Layout: "GGUF" u32 version, u64 tensorCount, u64 kvCount, kvCount x (string key, u32 type, value),
 * tensorCount x (string name, u32 nDims, u64 ne[nDims] (ne0 first), u32 type, u64 offset), padding to
 * general.alignment (default 32), then the data section; tensor offsets are relative to it and aligned.
 * Strings are u64 length + UTF-8 bytes (no NUL). v1 (u32 counts) is not supported; v2 and v3 share this layout.
 */
import { closeSync, fstatSync, openSync, readFileSync, readSync, statSync, type Stats } from "node:fs";
import { byteSize, ggmlTypeName, WEIGHT_TYPES, weightType } from "../tensor/dtypes.ts";
import { err, ok, type Result } from "../util/result.ts";
import {
  GgufValueType, type GgufArray, type GgufFile, type GgufFileIdentity, type GgufFileRange, type GgufMetadataEntry, type GgufScalar, type GgufTensorInfo,
} from "./gguf-file.ts";
import { errorMessage } from "../util/error-message.ts";

export const GGUF_MAGIC = "GGUF";
export const GGUF_DEFAULT_ALIGNMENT = 32;
const SUPPORTED_VERSIONS = [2, 3];
/** GGML_MAX_DIMS */
const MAX_DIMS = 4;

/** Bytes of each fixed-size metadata value type (strings and arrays are variable). */
const GGUF_VALUE_SIZES: Readonly<Partial<Record<GgufValueType, number>>> = {
  [GgufValueType.UINT8]: 1, [GgufValueType.INT8]: 1, [GgufValueType.UINT16]: 2, [GgufValueType.INT16]: 2,
  [GgufValueType.UINT32]: 4, [GgufValueType.INT32]: 4, [GgufValueType.FLOAT32]: 4, [GgufValueType.BOOL]: 1,
  [GgufValueType.UINT64]: 8, [GgufValueType.INT64]: 8, [GgufValueType.FLOAT64]: 8,
};

/** Thrown only inside this file and turned into an error Result by parseGguf. */
class ParseError extends Error {}

/** A bounds-checked little-endian cursor over the file. */
class Cursor {
  pos = 0;
  private readonly view: DataView;
  /** the same bytes as a Buffer: its UTF-8 slicing is ~5x faster than TextDecoder for short strings and keeps a BOM */
  private readonly buffer: Buffer;

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  need(count: number, what: string): void {
    if (this.pos + count > this.bytes.length) {
      throw new ParseError(`file is truncated: needs ${count} more bytes at offset ${this.pos} for ${what}, but is ${this.bytes.length} bytes long`);
    }
  }
  u8(what: string): number { this.need(1, what); return this.view.getUint8(this.pos++); }
  i8(what: string): number { this.need(1, what); return this.view.getInt8(this.pos++); }
  u16(what: string): number { this.need(2, what); const v = this.view.getUint16(this.pos, true); this.pos += 2; return v; }
  i16(what: string): number { this.need(2, what); const v = this.view.getInt16(this.pos, true); this.pos += 2; return v; }
  u32(what: string): number { this.need(4, what); const v = this.view.getUint32(this.pos, true); this.pos += 4; return v; }
  i32(what: string): number { this.need(4, what); const v = this.view.getInt32(this.pos, true); this.pos += 4; return v; }
  f32(what: string): number { this.need(4, what); const v = this.view.getFloat32(this.pos, true); this.pos += 4; return v; }
  f64(what: string): number { this.need(8, what); const v = this.view.getFloat64(this.pos, true); this.pos += 8; return v; }
  u64(what: string): bigint { this.need(8, what); const v = this.view.getBigUint64(this.pos, true); this.pos += 8; return v; }
  i64(what: string): bigint { this.need(8, what); const v = this.view.getBigInt64(this.pos, true); this.pos += 8; return v; }

  /** A u64 that must fit a JS number (counts, lengths, dims, offsets). */
  count(what: string): number {
    const v = this.u64(what);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new ParseError(`${what} is ${v}, too large`);
    return Number(v);
  }

  string(what: string): string {
    const length = this.count(`the length of ${what}`);
    this.need(length, what);
    const start = this.pos;
    this.pos += length;
    return this.buffer.toString("utf8", start, start + length);
  }
}

function readScalar(c: Cursor, type: GgufValueType, what: string): GgufScalar {
  switch (type) {
    case GgufValueType.UINT8: return c.u8(what);
    case GgufValueType.INT8: return c.i8(what);
    case GgufValueType.UINT16: return c.u16(what);
    case GgufValueType.INT16: return c.i16(what);
    case GgufValueType.UINT32: return c.u32(what);
    case GgufValueType.INT32: return c.i32(what);
    case GgufValueType.FLOAT32: return c.f32(what);
    case GgufValueType.BOOL: {
      return c.u8(what) !== 0;
    }
    case GgufValueType.STRING: return c.string(what);
    case GgufValueType.UINT64: return c.u64(what);
    case GgufValueType.INT64: return c.i64(what);
    case GgufValueType.FLOAT64: return c.f64(what);
    default: throw new ParseError(`${what} has unknown value type ${type}`);
  }
}

function readValue(c: Cursor, type: number, key: string): GgufScalar | GgufArray {
  if (type !== GgufValueType.ARRAY) return readScalar(c, type, `metadata key "${key}"`);
  const elementType = c.u32(`the element type of array "${key}"`);
  if (elementType === GgufValueType.ARRAY) throw new ParseError(`metadata key "${key}" is a nested array, which GGUF readers do not support`);
  if (!(elementType in GgufValueType)) throw new ParseError(`metadata key "${key}" is an array of unknown value type ${elementType}`);
  const length = c.count(`the length of array "${key}"`);
  // every element takes at least one byte (strings at least 8): reject absurd lengths before looping
  const minBytes = elementType === GgufValueType.STRING ? 8 : GGUF_VALUE_SIZES[elementType as GgufValueType]!;
  c.need(length * minBytes, `the ${length} elements of array "${key}"`);
  const values: GgufScalar[] = new Array(length);
  for (let i = 0; i < length; i++) values[i] = readScalar(c, elementType, `element ${i} of array "${key}"`);
  return { elementType, values };
}

function readTensorInfo(c: Cursor, index: number): Omit<GgufTensorInfo, "offset"> & { relativeOffset: number } {
  const name = c.string(`the name of tensor ${index}`);
  const nDims = c.u32(`the dimension count of tensor "${name}"`);
  if (nDims < 1 || nDims > MAX_DIMS) throw new ParseError(`tensor "${name}" has ${nDims} dimensions (must be 1..${MAX_DIMS})`);
  const shape: number[] = [];
  for (let d = 0; d < nDims; d++) shape.push(c.count(`dimension ${d} of tensor "${name}"`));
  const type = c.u32(`the type of tensor "${name}"`);
  const relativeOffset = c.count(`the data offset of tensor "${name}"`);
  const w = weightType(type);
  if (w === undefined) {
    const supported = WEIGHT_TYPES.map((t) => t.name).join(", ");
    throw new ParseError(`tensor "${name}" has type ${ggmlTypeName(type)} (${type}), which fennec does not support (supported: ${supported})`);
  }
  const numElements = shape.reduce((a, b) => a * b, 1);
  if (!Number.isSafeInteger(numElements)) throw new ParseError(`tensor "${name}" has too many elements (${shape.join(" x ")})`);
  if (shape[0]! % w.blockSize !== 0) {
    throw new ParseError(`tensor "${name}" of type ${w.name} has row length ${shape[0]}, not a multiple of its block size ${w.blockSize}`);
  }
  return { name, shape, type, sizeBytes: byteSize(w, numElements), relativeOffset };
}

function alignmentOf(metadata: ReadonlyMap<string, GgufMetadataEntry>): number {
  const entry = metadata.get("general.alignment");
  if (entry === undefined) return GGUF_DEFAULT_ALIGNMENT;
  if (entry.type !== GgufValueType.UINT32) throw new ParseError(`general.alignment must be a u32 (has value type ${GgufValueType[entry.type] ?? entry.type})`);
  const a = entry.value as number;
  if (a === 0 || (a & (a - 1)) !== 0) throw new ParseError(`general.alignment is ${a}, not a power of two`);
  return a;
}

/** `fileBytes`: the file's length when `bytes` maps only its head (mapInWindows) */
function parse(bytes: Uint8Array, fileBytes = bytes.length): Omit<GgufFile, "source"> {
  const c = new Cursor(bytes);
  c.need(4, "the magic");
  const magic = String.fromCharCode(...bytes.subarray(0, 4));
  c.pos = 4;
  if (magic !== GGUF_MAGIC) throw new ParseError(`not a GGUF file (magic is ${JSON.stringify(magic)}, expected "GGUF")`);
  const version = c.u32("the version");
  if (!SUPPORTED_VERSIONS.includes(version)) {
    const hint = version === 1 ? " (GGUF v1 is obsolete: re-convert the model)" : version > 0xffff ? " (a big-endian file?)" : "";
    throw new ParseError(`unsupported GGUF version ${version}${hint}; fennec reads versions ${SUPPORTED_VERSIONS.join(" and ")}`);
  }
  const tensorCount = c.count("the tensor count");
  const kvCount = c.count("the metadata count");
  // each metadata entry takes at least 13 bytes and each tensor info at least 28: reject garbage counts early
  c.need(kvCount * 13 + tensorCount * 28, `${kvCount} metadata entries and ${tensorCount} tensor infos`);

  const metadata = new Map<string, GgufMetadataEntry>();
  for (let i = 0; i < kvCount; i++) {
    const key = c.string(`metadata key ${i}`);
    const type = c.u32(`the value type of metadata key "${key}"`);
    if (!(type in GgufValueType)) throw new ParseError(`metadata key "${key}" has unknown value type ${type}`);
    const value = readValue(c, type, key);
    if (metadata.has(key)) throw new ParseError(`duplicate metadata key "${key}"`);
    metadata.set(key, { type, value });
  }
  const alignment = alignmentOf(metadata);

  const infos = [];
  const names = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const info = readTensorInfo(c, i);
    if (names.has(info.name)) throw new ParseError(`duplicate tensor name "${info.name}"`);
    names.add(info.name);
    infos.push(info);
  }

  const dataStart = Math.ceil(c.pos / alignment) * alignment;
  const tensors: GgufTensorInfo[] = infos.map(({ relativeOffset, ...info }) => {
    if (relativeOffset % alignment !== 0) {
      throw new ParseError(`tensor "${info.name}" has data offset ${relativeOffset}, not a multiple of the alignment ${alignment}`);
    }
    const offset = dataStart + relativeOffset;
    if (offset + info.sizeBytes > fileBytes) {
      throw new ParseError(`tensor "${info.name}" (${info.sizeBytes} bytes at offset ${offset}) runs past the end of the file (${fileBytes} bytes): truncated?`);
    }
    return { ...info, offset };
  });
  return { version, alignment, metadata, tensors, bytes };
}

/**
 * Parses GGUF bytes already in memory (e.g. the embedded default model). `source` labels every error message.
 * @example const file = parseGguf(bytes, "<embedded default model>"); if (!file.ok) throw new CliError(file.error);
 */
export function parseGguf(bytes: Uint8Array, source: string): Result<GgufFile> {
  try {
    return ok({ ...parse(bytes), source });
  } catch (e) {
    if (e instanceof ParseError) return err(`${source}: ${e.message}`);
    throw e;
  }
}

/**
 * The kernels hold a model in at most 8 wasm32 memories of 4 GiB (backend/wasm/pool-ops.ts MAX_MEMORIES; a range of
 * layers each), so a larger file can never load (nor is it mapped here). What fits the machine is checked at start-up
 * (engine/model-placement.ts).
 */
export const MAX_MODEL_FILE_BYTES = 8 * 4 * 2 ** 30;

/** What readTensorBytes checks a file against: the inode, size and mtime it had when it was mapped. */
const identityOf = (stat: Stats): GgufFileIdentity => ({ ino: stat.ino, size: stat.size, mtimeMs: stat.mtimeMs });

/** A file-system error in words: what it means for the user, not the bare errno. */
function fileErrorText(e: unknown): string {
  const code = typeof e === "object" && e !== null && "code" in e ? String((e as { code: unknown }).code) : "";
  switch (code) {
    case "ENOENT": return "file not found";
    case "ENOTDIR": return "file not found (a part of the path is not a directory)";
    case "EACCES":
    case "EPERM": return "permission denied: the file, or a directory on its path, cannot be read by this user (check its permissions)";
    case "ELOOP": return "too many symbolic links on the path";
    case "ENOMEM": return "not enough memory to map or read the file";
    default: return `cannot read the file (${errorMessage(e)})`;
  }
}

/**
 * Maps the file at `path` (Bun.mmap, zero copy; read instead where it cannot be mapped) and parses it.
 * @example const file = readGguf("model.gguf"); if (!file.ok) throw new CliError(file.error);
 */
export function readGguf(path: string): Result<GgufFile> {
  let size: number;
  let identity: GgufFileIdentity;
  try {
    const stat = statSync(path);
    if (!stat.isFile()) return err(`${path}: not a regular file`);
    size = stat.size;
    identity = identityOf(stat);
  } catch (e) {
    return err(`${path}: ${fileErrorText(e)}`);
  }
  if (size === 0) return err(`${path}: file is empty`);
  if (size > MAX_MODEL_FILE_BYTES) {
    return err(`${path}: the file is ${(size / 2 ** 30).toFixed(2)} GiB, over the 32 GiB limit: the kernels hold a model in at most 8 wasm32 memories of 4 GiB; use a smaller quantization (e.g. Q4_K_M) or a smaller model`);
  }
  if (size > MAX_MAPPED_BYTES) return mapInWindows(path, size);
  let bytes: Uint8Array;
  try {
    bytes = Bun.mmap(path, { shared: false });
  } catch {
    // files embedded in a compiled binary ($bunfs) cannot be mapped, but can be read (and are then in memory)
    try {
      bytes = new Uint8Array(readFileSync(path));
    } catch (e) {
      return err(`${path}: ${fileErrorText(e)}`);
    }
    return parseGguf(bytes, path);
  }
  const file = parseGguf(bytes, path);
  return file.ok ? ok({ ...file.value, files: [{ path, offset: 0, identity }] }) : file;
}

/** One typed array holds less than 4 GiB (JSC): larger files are mapped in windows of at most this many bytes. */
const MAX_MAPPED_BYTES = 2 ** 31;
/** the head mapped to parse the metadata and tensor infos of a large file */
const HEAD_BYTES = 2 ** 28;
const PAGE_BYTES = 4096;

/**
 * A file too large for one typed array (a 7-8B model): the head is mapped to parse it, then the tensor data in
 * page-aligned windows of up to 2 GiB that each hold whole tensors, as the parts of a split model do (`parts`, each
 * tensor's `part` and its offset in that part).
 */
export function mapInWindows(path: string, size: number, windowBytes = MAX_MAPPED_BYTES): Result<GgufFile> {
  const map = (offset: number, length: number): Uint8Array => Bun.mmap(path, { shared: false, offset, size: length } as Parameters<typeof Bun.mmap>[1]);
  let head: Uint8Array;
  let identity: GgufFileIdentity;
  try {
    identity = identityOf(statSync(path));
    head = map(0, Math.min(size, HEAD_BYTES));
  } catch (e) {
    return err(`${path}: ${fileErrorText(e)}`);
  }
  let file: Omit<GgufFile, "source">;
  try {
    file = parse(head, size);
  } catch (e) {
    if (e instanceof ParseError) return err(`${path}: ${e.message}`);
    throw e;
  }
  const sorted = [...file.tensors].sort((a, b) => a.offset - b.offset);
  const windows: { start: number; end: number }[] = [];
  for (const t of sorted) {
    const last = windows.at(-1);
    if (t.sizeBytes > windowBytes - PAGE_BYTES) return err(`${path}: tensor ${t.name} holds ${t.sizeBytes} bytes, more than one mapping can (${windowBytes} bytes)`);
    if (last !== undefined && t.offset + t.sizeBytes - last.start <= windowBytes) last.end = Math.max(last.end, t.offset + t.sizeBytes);
    else windows.push({ start: Math.floor(t.offset / PAGE_BYTES) * PAGE_BYTES, end: t.offset + t.sizeBytes });
  }
  let parts: Uint8Array[];
  try {
    parts = windows.map((w) => map(w.start, w.end - w.start));
  } catch (e) {
    return err(`${path}: ${fileErrorText(e)}`);
  }
  const tensors = file.tensors.map((t) => {
    const part = windows.findIndex((w) => t.offset >= w.start && t.offset + t.sizeBytes <= w.end);
    return { ...t, part, offset: t.offset - windows[part]!.start };
  });
  return ok({ ...file, tensors, bytes: head, parts, files: windows.map((w) => ({ path, offset: w.start, identity })), source: path });
}

/**
 * The raw bytes of one tensor, a view into the file (no copy).
 * @example const q = tensorData(file, info); // Uint8Array of info.sizeBytes bytes
 */
export function tensorData(file: GgufFile, info: GgufTensorInfo): Uint8Array {
  const bytes = info.part === undefined ? file.bytes : file.parts![info.part]!;
  return bytes.subarray(info.offset, info.offset + info.sizeBytes);
}

/**
 * Where a tensor's bytes lie on disk (the file, and the file offset of its first byte), or null when the file's bytes
 * are only in memory (read tensorData then).
 * @example const range = tensorFileRange(file, info); if (range !== null) readTensorBytes(range, 0, buffer);
 */
export function tensorFileRange(file: GgufFile, info: GgufTensorInfo): GgufFileRange | null {
  const range = file.files?.[info.part ?? 0];
  return range === undefined ? null : { ...range, offset: range.offset + info.offset };
}

/**
 * Bytes [at, at + into.length) of a tensor read from its file into `into` with positioned reads, not through the
 * mapping: the page cache holds them, not this process, so a loader streaming a large model through one bounded
 * buffer keeps none of the file's pages resident (llama.cpp llama-model-loader.cpp load_all_data reads into its own
 * buffers when mmap is off). Throws on a read error or a file replaced or rewritten since it was mapped (its bytes
 * would no longer be the ones parsed).
 */
export function readTensorBytes(range: GgufFileRange, at: number, into: Uint8Array): void {
  const fd = openSync(range.path, "r");
  try {
    const now = identityOf(fstatSync(fd));
    const was = range.identity;
    if (now.ino !== was.ino || now.size !== was.size || now.mtimeMs !== was.mtimeMs) {
      throw new Error(`${range.path}: the file was replaced or rewritten while the model was loading; start again once it is complete`);
    }
    for (let done = 0; done < into.length;) {
      const n = readSync(fd, into, done, into.length - done, range.offset + at + done);
      if (n === 0) throw new Error(`${range.path}: the file ends at ${range.offset + at + done} bytes, inside a tensor: it was cut short while the model was loading`);
      done += n;
    }
  } finally {
    closeSync(fd);
  }
}
