/**
 * Multimodal RoPE (M-RoPE) of the qwen2vl language model (llama.cpp src/models/qwen2vl.cpp, ggml_rope_multi in NEOX
 * pairing; ggml-cpu ops.cpp ggml_mrope_cache_init): every token has 4 position streams [t, y, x, e], and rope pair i
 * (of ropeDim / 2) turns by the stream of its section times the usual base^(-2i / ropeDim): sector = i % sum(sections),
 * sector < s0: t; < s0 + s1: y; < s0 + s1 + s2: x; else e. Text tokens have the same position in all four streams (then
 * M-RoPE is plain NEOX rope); an image's rows get t = p0, y = p0 + row, x = p0 + col, e = 0, and the image advances the
 * position counter by max(rows, cols) (tools/mtmd/mtmd.cpp mtmd_image_tokens_get_decoder_pos, _get_n_pos).
 */
import type { RopeAngles } from "../backend/backend.ts";

/** A token's 4 rope positions [t, y, x, e] (llama.cpp's ubatch pos streams 0..3). */
export type MropePosition = readonly [number, number, number, number];

/** A text token at position p: every stream p (llama-batch.cpp broadcasts a token's position to all sections). */
export function textMropePosition(p: number): MropePosition {
  return [p, p, p, p];
}

/**
 * The rope positions of an image's cols x rows embedding rows (row-major) placed at position p0, and the position the
 * next token takes.
 * @example imageMropePositions(10, 3, 2) // { positions: [[10,10,10,0], [10,10,11,0], ...], next: 13 }
 */
export function imageMropePositions(p0: number, cols: number, rows: number): { positions: MropePosition[]; next: number } {
  const positions: MropePosition[] = [];
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) positions.push([p0, p0 + r, p0 + c, 0]);
  return { positions, next: p0 + Math.max(rows, cols) };
}

/**
 * Which stream (0..3) each rope pair reads: [ropeDim / 2].
 * @example mropePairStreams([16, 24, 24, 0], 128)[20] // 1 (y)
 */
export function mropePairStreams(sections: readonly number[], ropeDim: number): Uint8Array {
  const total = sections[0]! + sections[1]! + sections[2]! + sections[3]!;
  const out = new Uint8Array(ropeDim / 2);
  for (let i = 0; i < out.length; i++) {
    const sector = i % total;
    out[i] = sector < sections[0]! ? 0 : sector < sections[0]! + sections[1]! ? 1 : sector < sections[0]! + sections[1]! + sections[2]! ? 2 : 3;
  }
  return out;
}

/**
 * One token's M-RoPE angles [ropeDim / 2]: pair i takes the angle a plain rope would give at its stream's position.
 * `anglesAt(p)` is the plain angle table of position p (so the llama.cpp cross-check's ggml recurrence applies as is).
 */
export function mropeThetas(pos: MropePosition, streams: Uint8Array, anglesAt: (p: number) => ArrayLike<number>): Float64Array {
  const tables = new Map<number, ArrayLike<number>>();
  const out = new Float64Array(streams.length);
  for (let i = 0; i < streams.length; i++) {
    const p = pos[streams[i]!]!;
    let table = tables.get(p);
    if (table === undefined) tables.set(p, (table = anglesAt(p)));
    out[i] = table[i]!;
  }
  return out;
}

/**
 * A plain angle table split by stream for a backend's rope: entry s turns only the pairs stream s reads (the other
 * pairs get angle 0, which leaves them as they are), so rope(x, streamPositions[s], tables[s]) for each s is M-RoPE.
 * Streams no pair reads are left out. Needs mscale 1 (a zero-angle pair would still be scaled).
 * @example for (const { stream, angles } of mropeStreamAngles(a, [16, 24, 24, 0])) backend.rope(q, pos[stream], ..., angles, true);
 */
export function mropeStreamAngles(angles: RopeAngles, sections: readonly number[]): { stream: number; angles: RopeAngles }[] {
  if (angles.mscale !== 1) throw new Error(`M-RoPE with a rope attention factor of ${angles.mscale} is not supported`);
  const streams = mropePairStreams(sections, angles.ropeDim);
  const out: { stream: number; angles: RopeAngles }[] = [];
  for (let s = 0; s < 4; s++) {
    if (!streams.includes(s)) continue;
    out.push({ stream: s, angles: { ...angles, thetas: Float64Array.from(angles.thetas, (t, i) => (streams[i] === s ? t : 0)) } });
  }
  return out;
}

/** An image's rows in a sequence: slots [offset, offset + cols * rows), row-major over its cols x rows token grid. */
export interface MropeImage {
  readonly offset: number;
  readonly cols: number;
  readonly rows: number;
}

/**
 * The [4][end - start] rope streams (t, y, x, e) of sequence slots [start, end) given the sequence's images: the
 * engine's ModelBatch.ropePositions for a chunk. Each image before a slot moves the text after it by
 * max(cols, rows) - cols * rows (mtmd_image_tokens_get_n_pos); a slot inside an image takes its imageMropePositions.
 * @example mropeSlotPositions([{ offset: 3, cols: 3, rows: 2 }], 0, 11) // text 0..2, the image at p0 = 3, then 6, 7
 */
export function mropeSlotPositions(images: readonly MropeImage[], start: number, end: number): Int32Array {
  const sorted = [...images].sort((a, b) => a.offset - b.offset);
  const n = end - start;
  const out = new Int32Array(4 * n);
  for (let s = start; s < end; s++) {
    let shift = 0;
    let pos: MropePosition | null = null;
    for (const img of sorted) {
      const length = img.cols * img.rows;
      if (s >= img.offset + length) { shift += Math.max(img.cols, img.rows) - length; continue; }
      if (s >= img.offset) {
        const p0 = img.offset + shift;
        const i = s - img.offset;
        pos = [p0, p0 + Math.floor(i / img.cols), p0 + (i % img.cols), 0];
      }
      break;
    }
    pos ??= textMropePosition(s + shift);
    for (let k = 0; k < 4; k++) out[k * n + s - start] = pos[k]!;
  }
  return out;
}
