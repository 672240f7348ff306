/**
 * What a parsed GGUF file is (reader.ts produces it, writer.ts consumes a similar shape).
 * Tensor shapes are ggml order: ne0 (the row length, innermost) first.
 */
import type { GgmlType } from "../tensor/dtypes.ts";

export enum GgufValueType {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7, STRING = 8,
  ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
}

/** A metadata value; 64-bit integers are bigint, arrays keep their element type so a writer can copy them exactly. */
export type GgufScalar = number | bigint | boolean | string;
export interface GgufArray { readonly elementType: GgufValueType; readonly values: GgufScalar[] }
export interface GgufMetadataEntry { readonly type: GgufValueType; readonly value: GgufScalar | GgufArray }

export interface GgufTensorInfo {
  readonly name: string;
  /** ne0 first */
  readonly shape: readonly number[];
  readonly type: GgmlType;
  /** absolute byte offset of the tensor data in the file */
  readonly offset: number;
  readonly sizeBytes: number;
  /** which of GgufFile.parts holds the data (split models); absent: `bytes` */
  readonly part?: number;
}

export interface GgufFile {
  /** path or a label such as "<embedded default model>", used in every error message */
  readonly source: string;
  readonly version: number;
  readonly alignment: number;
  readonly metadata: ReadonlyMap<string, GgufMetadataEntry>;
  /** in file order */
  readonly tensors: readonly GgufTensorInfo[];
  /** the whole file (zero-copy where possible); the first part of a split model */
  readonly bytes: Uint8Array;
  /** every part of a split model, the first being `bytes` (split-gguf.ts); absent for one file */
  readonly parts?: readonly Uint8Array[];
  /**
   * Where the tensor bytes lie on disk, for positioned reads (reader.ts readTensorBytes): [0] for `bytes`, else one
   * per part, each the file and the file offset of its byte 0. Absent: the bytes are only in memory (the embedded
   * default model, parseGguf's buffers, a file read instead of mapped).
   */
  readonly files?: readonly GgufFileRange[];
}

/** A mapped range of a file: its path, the file offset its byte 0 maps, and the file as it was when mapped. */
export interface GgufFileRange {
  readonly path: string;
  readonly offset: number;
  /** inode, size and mtime at mapping time: a read from a file replaced or rewritten since is refused */
  readonly identity: GgufFileIdentity;
}

export interface GgufFileIdentity {
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
}
