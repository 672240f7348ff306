/**
 * Media items (encoded images) in an engine request: the checks admission makes, and the rows of a scheduled chunk
 * their embeddings cover (vLLM's MultiModalFeatureSpec placeholders, gpu_model_runner._gather_mm_embeddings).
 * @example const rows = chunkEmbeddings(request.multimodal, startPos, endPos, dim);
 */
import type { ChunkEmbeddings } from "../model/model-batch.ts";
import { mropeSlotPositions } from "../model/mrope.ts";
import type { EngineRequest, MultimodalInput } from "./protocol.ts";

/** Media items must lie inside the prompt, not overlap, and carry [length][dim] embeddings (else engine-core's RequestErrorInfo). */
export function checkMultimodal(request: EngineRequest, dim: number, mrope = false): { readonly code: string; readonly message: string } | null {
  const items = [...(request.multimodal ?? [])].sort((a, b) => a.offset - b.offset);
  let end = 0;
  for (const item of items) {
    if (!Number.isInteger(item.offset) || item.offset < end || item.length < 1 || item.offset + item.length > request.promptTokenIds.length) {
      return { code: "invalid_multimodal", message: `media item ${item.identifier} at prompt positions [${item.offset}, ${item.offset + item.length}) does not fit the ${request.promptTokenIds.length}-token prompt or overlaps another` };
    }
    if (item.embeddings.length !== item.length * dim) {
      return { code: "invalid_multimodal", message: `media item ${item.identifier} has ${item.embeddings.length} embedding floats; ${item.length} positions of the model's width ${dim} need ${item.length * dim}` };
    }
    if (request.pooling) return { code: "invalid_multimodal", message: "media inputs are not supported on pooling requests" };
    // an M-RoPE model places an image by its grid (llama.cpp mtmd: qwen2vl's images take 2-D positions), others by row
    const grid = item.mropeGrid;
    if (grid !== undefined && (!mrope || !Number.isInteger(grid.cols) || !Number.isInteger(grid.rows) || grid.cols < 1 || grid.rows < 1 || grid.cols * grid.rows !== item.length)) {
      return { code: "invalid_multimodal", message: mrope ? `media item ${item.identifier}: a ${grid.cols} x ${grid.rows} grid does not cover its ${item.length} positions` : `media item ${item.identifier} has an M-RoPE grid, which this model (no rope sections) cannot place` };
    }
    if (grid === undefined && mrope) return { code: "invalid_multimodal", message: `media item ${item.identifier} has no M-RoPE grid; this model places images by (row, col)` };
    end = item.offset + item.length;
  }
  return null;
}

/** The parts of the media items' embeddings that fall in positions [start, end), as rows of the chunk. */
export function chunkEmbeddings(items: readonly MultimodalInput[], start: number, end: number, dim: number): ChunkEmbeddings[] {
  const out: ChunkEmbeddings[] = [];
  for (const item of items) {
    const from = Math.max(start, item.offset);
    const to = Math.min(end, item.offset + item.length);
    if (from >= to) continue;
    const skip = from - item.offset;
    out.push({ row: from - start, numRows: to - from, data: item.embeddings.subarray(skip * dim, (skip + to - from) * dim), attendAhead: item.attendAhead });
  }
  return out;
}

/** M-RoPE models: `{ ropePositions }`, the chunk [start, end)'s [4][end - start] rope streams (ModelBatch.ropePositions); {} for others. */
export function chunkRopePositions(items: readonly MultimodalInput[], start: number, end: number): { ropePositions?: Int32Array } {
  const images = items.flatMap((item) => (item.mropeGrid === undefined ? [] : [{ offset: item.offset, ...item.mropeGrid }]));
  return images.length === 0 ? {} : { ropePositions: mropeSlotPositions(images, start, end) };
}
