/**
 * A weight's GGUF rows a chunk at a time through one reused, bounded buffer, read from the model file
 * (WeightSource.readBytes), so that loading a model keeps neither the file's pages nor a copy of each tensor resident:
 * the WASM backend repacks a chunk into its heap and the next chunk overwrites it (llama.cpp llama-model-loader.cpp
 * load_all_data reads into its own read_buf when mmap is off). A source without readBytes (bytes in memory) is handed
 * over whole, as a view. Either way the bytes are those of `data`.
 * @example forEachRowChunk(source, 4, (firstRow, numRows, bytes) => repack(spec, bytes, numRows, cols, wq, ws, wm, firstRow));
 */
import { weightType } from "../tensor/dtypes.ts";
import type { WeightSource } from "./backend.ts";

/** bytes of the reused buffer (more when `rowAlign` rows take more): 8 MiB is one read of ~600 for an 8B model */
const CHUNK_BYTES = 8 * 2 ** 20;

/** one per thread (a Worker has its own module instance); weights load one at a time */
let buffer: Uint8Array | null = null;

/** `fn(firstRow, numRows, bytes)` over rows [0, rows) in chunks of whole multiples of `rowAlign` rows (the last may be shorter). */
export function forEachRowChunk(source: WeightSource, rowAlign: number, fn: (firstRow: number, numRows: number, bytes: Uint8Array) => void): void {
  const wt = weightType(source.type);
  if (wt === undefined) throw new Error(`weight ${source.name}: unsupported type ${source.type}`);
  const rowBytes = (source.cols / wt.blockSize) * wt.bytesPerBlock;
  const read = source.readBytes;
  if (read === undefined) {
    fn(0, source.rows, source.data.subarray(0, source.rows * rowBytes));
    return;
  }
  const rowsPerChunk = Math.max(1, Math.floor(CHUNK_BYTES / (rowBytes * rowAlign))) * rowAlign;
  const chunkBytes = Math.min(rowsPerChunk, source.rows) * rowBytes;
  if (buffer === null || buffer.length < chunkBytes) buffer = new Uint8Array(Math.max(chunkBytes, CHUNK_BYTES));
  for (let first = 0; first < source.rows; first += rowsPerChunk) {
    const numRows = Math.min(rowsPerChunk, source.rows - first);
    const bytes = buffer.subarray(0, numRows * rowBytes);
    read(first * rowBytes, bytes);
    fn(first, numRows, bytes);
  }
}
