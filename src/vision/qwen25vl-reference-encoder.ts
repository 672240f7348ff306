/**
 * The plain reference Qwen2.5-VL vision encoder, the oracle for faster paths, in the order of llama.cpp's
 * tools/mtmd/models/qwen2vl.cpp (clip_graph_qwen2vl::build) with the inputs clip.cpp sets for PROJECTOR_TYPE_QWEN25VL
 * (clip_image_batch_encode: positions, window_idx, window_mask), as plainly as llama2.c, f32 arrays, f64 sums:
 *   patches: both halves of the temporal kernel applied to the still image and summed (two conv2d, no bias), the
 *     patches ordered 2 x 2 block by block (merge order: block row, block col, dy, dx);
 *   per layer: x += Wo.attn(rope(q), rope(k), v) of RMSNorm(x), attending within the patch's window (windowTokens x
 *     windowTokens merged tokens) except on every windowPattern-th layer (full); x += down(silu(gate) * up) of
 *     RMSNorm(x), every projection with its bias;
 *   2-D rope (GGML_ROPE_TYPE_VISION, sections of headDim / 4 pairs whose positions are y, x, y, x): the headDim / 2
 *     pairs (i, i + headDim / 2) are the first two sections, so pair k of the first quarter turns by y * 10000^(-k /
 *     (headDim / 4)), of the second by x (the last two sections lie past the rotated pairs);
 *   RMSNorm (the merger's ln_q), each 2 x 2 block's 4 patches concatenated, mm.2(gelu(mm.0 x)): one embedding per
 *   merged token, row-major over the (height / 28) x (width / 28) grid.
 * The window permutation llama.cpp uses to make windows contiguous is a reordering: here each patch simply attends to
 * the patches of its own window.
 */
import type { PixelTile } from "./preprocess.ts";
import type { Qwen25vlConfig, Qwen25vlLayerWeights, Qwen25vlWeights } from "./qwen25vl-mmproj.ts";
import { linear } from "./reference-encoder.ts";

/** clip_graph_qwen2vl::build's rope base (ggml_rope_multi freq_base 10000) */
const VISION_ROPE_BASE = 10000;

/** ggml_rms_norm then * w, per row */
function rmsNorm(x: Float32Array, n: number, dim: number, w: Float32Array, eps: number): Float32Array {
  const out = new Float32Array(n * dim); // [n][dim]
  for (let t = 0; t < n; t++) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[t * dim + i]! ** 2;
    const scale = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) out[t * dim + i] = x[t * dim + i]! * scale * w[i]!;
  }
  return out;
}

/** ggml_gelu: the tanh approximation */
function gelu(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
}

function silu(x: number): number {
  return x / (1 + Math.exp(-x));
}

/** The patch grid of a tile, in merge order: patch p sits at (ys[p], xs[p]); block p >> 2 is merged token p >> 2. */
export interface PatchGrid {
  /** patches per column and row */
  readonly rows: number;
  readonly cols: number;
  readonly ys: Int32Array;
  readonly xs: Int32Array;
  /** [numPatches] the window each patch attends within */
  readonly window: Int32Array;
}

/** The merge-order patch grid of a rows x cols patch tile with windows of `windowTokens` merged tokens a side. */
export function patchGrid(rows: number, cols: number, windowTokens: number): PatchGrid {
  const n = rows * cols;
  const ys = new Int32Array(n), xs = new Int32Array(n), window = new Int32Array(n);
  const windowCols = Math.ceil(cols / 2 / windowTokens);
  let p = 0;
  for (let by = 0; by < rows / 2; by++) {
    for (let bx = 0; bx < cols / 2; bx++) {
      for (let dy = 0; dy < 2; dy++) {
        for (let dx = 0; dx < 2; dx++) {
          ys[p] = 2 * by + dy;
          xs[p] = 2 * bx + dx;
          window[p] = Math.floor(by / windowTokens) * windowCols + Math.floor(bx / windowTokens);
          p++;
        }
      }
    }
  }
  return { rows, cols, ys, xs, window };
}

/** Both patch embeddings of every patch, summed: [numPatches][dim] in merge order. */
function embedPatches(tile: PixelTile, grid: PatchGrid, c: Qwen25vlConfig, w: Qwen25vlWeights): Float32Array {
  const { patchSize: ps, dim } = c;
  const n = grid.ys.length;
  const x = new Float32Array(n * dim);
  for (let p = 0; p < n; p++) {
    for (let d = 0; d < dim; d++) {
      let sum0 = 0, sum1 = 0;
      for (let ch = 0; ch < 3; ch++) {
        for (let ky = 0; ky < ps; ky++) {
          const wRow = ((d * 3 + ch) * ps + ky) * ps; // [dim][3][p][p]
          const pRow = (ch * tile.height + grid.ys[p]! * ps + ky) * tile.width + grid.xs[p]! * ps; // [3][h][w]
          for (let kx = 0; kx < ps; kx++) {
            sum0 += w.patchEmbd0[wRow + kx]! * tile.pixels[pRow + kx]!;
            sum1 += w.patchEmbd1[wRow + kx]! * tile.pixels[pRow + kx]!;
          }
        }
      }
      x[p * dim + d] = Math.fround(sum0) + Math.fround(sum1);
    }
  }
  return x;
}

/** In place: each head's pair (k + s * q, k + s * q + headDim / 2), s = 0 (y) or 1 (x), q = headDim / 4, turns by pos_s * base^(-k / q). */
function visionRope(v: Float32Array, grid: PatchGrid, c: Qwen25vlConfig): void {
  const { headDim, numHeads, dim } = c;
  const half = headDim / 2;
  const quarter = headDim / 4;
  for (let p = 0; p < grid.ys.length; p++) {
    const streams = [grid.ys[p]!, grid.xs[p]!];
    for (let h = 0; h < numHeads; h++) {
      const base = p * dim + h * headDim;
      for (let i = 0; i < half; i++) {
        const s = Math.floor(i / quarter);
        const k = i - s * quarter;
        const theta = streams[s]! * Math.pow(VISION_ROPE_BASE, -k / quarter);
        const cos = Math.cos(theta), sin = Math.sin(theta);
        const x0 = v[base + i]!, x1 = v[base + i + half]!;
        v[base + i] = x0 * cos - x1 * sin;
        v[base + i + half] = x0 * sin + x1 * cos;
      }
    }
  }
}

/** Multi-head attention of every patch over the patches of its window (`windowed`) or all of them. */
function attention(q: Float32Array, k: Float32Array, v: Float32Array, grid: PatchGrid, windowed: boolean, c: Qwen25vlConfig): Float32Array {
  const { dim, numHeads, headDim } = c;
  const n = grid.ys.length;
  const out = new Float32Array(n * dim);
  const scores = new Float64Array(n);
  const scale = 1 / Math.sqrt(headDim);
  for (let h = 0; h < numHeads; h++) {
    for (let i = 0; i < n; i++) {
      const qo = i * dim + h * headDim;
      let max = -Infinity;
      for (let j = 0; j < n; j++) {
        if (windowed && grid.window[j] !== grid.window[i]) { scores[j] = -Infinity; continue; }
        const ko = j * dim + h * headDim;
        let dot = 0;
        for (let e = 0; e < headDim; e++) dot += q[qo + e]! * k[ko + e]!;
        scores[j] = dot * scale;
        if (scores[j]! > max) max = scores[j]!;
      }
      let total = 0;
      for (let j = 0; j < n; j++) { scores[j] = Math.exp(scores[j]! - max); total += scores[j]!; }
      for (let e = 0; e < headDim; e++) {
        let sum = 0;
        for (let j = 0; j < n; j++) if (scores[j]! !== 0) sum += scores[j]! * v[j * dim + h * headDim + e]!;
        out[qo + e] = sum / total;
      }
    }
  }
  return out;
}

/** One layer in place. */
function vitLayer(x: Float32Array, grid: PatchGrid, windowed: boolean, c: Qwen25vlConfig, layer: Qwen25vlLayerWeights): void {
  const { weights: w, biases: b } = layer;
  const { dim, ffnDim } = c;
  const n = grid.ys.length;
  const h = rmsNorm(x, n, dim, w.ln1, c.eps);
  const q = linear(h, n, dim, w.attnQ, b.attnQ, dim);
  const k = linear(h, n, dim, w.attnK, b.attnK, dim);
  const v = linear(h, n, dim, w.attnV, b.attnV, dim);
  visionRope(q, grid, c);
  visionRope(k, grid, c);
  const attn = linear(attention(q, k, v, grid, windowed, c), n, dim, w.attnOut, b.attnOut, dim);
  for (let i = 0; i < n * dim; i++) x[i]! += attn[i]!;
  const h2 = rmsNorm(x, n, dim, w.ln2, c.eps);
  const gate = linear(h2, n, dim, w.ffnGate, b.ffnGate, ffnDim);
  const up = linear(h2, n, dim, w.ffnUp, b.ffnUp, ffnDim);
  for (let i = 0; i < gate.length; i++) gate[i] = silu(gate[i]!) * up[i]!;
  const down = linear(gate, n, ffnDim, w.ffnDown, b.ffnDown, dim);
  for (let i = 0; i < n * dim; i++) x[i]! += down[i]!;
}

/** Whether layer l attends within windows (clip_graph_qwen2vl: full when (l + 1) % n_wa_pattern == 0). */
export function qwen25vlWindowedLayer(c: Qwen25vlConfig, l: number): boolean {
  return c.windowPattern > 0 && (l + 1) % c.windowPattern !== 0;
}

/** The merge-order patch grid of a preprocessed tile (sides multiples of patch x merge). */
export function tileGrid(tile: PixelTile, c: Qwen25vlConfig): PatchGrid {
  const align = c.patchSize * c.merge;
  if (tile.width % align !== 0 || tile.height % align !== 0 || tile.pixels.length !== 3 * tile.width * tile.height) {
    throw new Error(`vision encoder: a ${tile.width}x${tile.height} tile, Qwen2.5-VL takes sides that are multiples of ${align}`);
  }
  return patchGrid(tile.height / c.patchSize, tile.width / c.patchSize, c.windowTokens);
}

/** The ViT's output for one tile after the merger's RMSNorm: [numPatches][dim] in merge order. */
export function encodeQwen25vlReference(tile: PixelTile, c: Qwen25vlConfig, w: Qwen25vlWeights): Float32Array {
  const grid = tileGrid(tile, c);
  const x = embedPatches(tile, grid, c, w);
  w.layers.forEach((layer, l) => vitLayer(x, grid, qwen25vlWindowedLayer(c, l), c, layer));
  return rmsNorm(x, grid.ys.length, c.dim, w.postNorm, c.eps);
}

/** The merger MLP over each block's 4 patches: [tokens][projectionDim] (tokens in row-major order of the block grid). */
export function qwen25vlMerger(normed: Float32Array, c: Qwen25vlConfig, w: Qwen25vlWeights): Float32Array {
  const merged = 4 * c.dim;
  const tokens = normed.length / merged; // merge order is block by block, so 4 consecutive patches are one token
  const hidden = linear(normed, tokens, merged, w.merger0, w.merger0Bias, merged);
  for (let i = 0; i < hidden.length; i++) hidden[i] = gelu(hidden[i]!);
  return linear(hidden, tokens, merged, w.merger2, w.merger2Bias, c.projectionDim);
}

/**
 * The language-model embeddings of one preprocessed image and its token grid (cols x rows, row-major).
 * @example const { embeddings, cols, rows } = embedQwen25vlReference(preprocessQwen25vl(img, c), c, w);
 */
export function embedQwen25vlReference(tile: PixelTile, c: Qwen25vlConfig, w: Qwen25vlWeights): { embeddings: Float32Array; cols: number; rows: number } {
  const embeddings = qwen25vlMerger(encodeQwen25vlReference(tile, c, w), c, w);
  const align = c.patchSize * c.merge;
  return { embeddings, cols: tile.width / align, rows: tile.height / align };
}
