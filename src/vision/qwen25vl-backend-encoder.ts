/**
 * The Qwen2.5-VL vision encoder on the kernels, in the order of the plain reference (qwen25vl-reference-encoder.ts,
 * the oracle) with every matmul, bias, SwiGLU, rope, attention and GELU on a Backend (the WASM kernels); the RMSNorms
 * and residual adds run on the host between them. As llama.cpp's graph does (clip_graph_qwen2vl::build with
 * inv_window_idx / window_idx), the patches are first put in window order, each window's merged tokens contiguous, so a
 * window layer's attention is one bidirectional sequence per window (its own KV blocks) and a full layer's one sequence
 * of all patches; the merger's tokens are put back in row-major order at the end. The two patch-embedding halves are
 * summed into one weight (a still image is both frames), and the 2-D rope is two rope calls, y on the first quarter of
 * the pairs and x on the second (a zero angle leaves a pair as it is). Weights in f16, as the projector stores them.
 */
import type { Backend, DeviceBuffer, RopeAngles, Weight, WeightSource } from "../backend/backend.ts";
import { GgmlType, weightType } from "../tensor/dtypes.ts";
import type { PixelTile } from "./preprocess.ts";
import type { Qwen25vlConfig, Qwen25vlLayerTensor, Qwen25vlWeights } from "./qwen25vl-mmproj.ts";
import { qwen25vlWindowedLayer, tileGrid } from "./qwen25vl-reference-encoder.ts";

const KV_BLOCK = 16;
/** clip_graph_qwen2vl::build's rope base */
const VISION_ROPE_BASE = 10000;

/** An f32 array as an f16 [rows][cols] weight (exact: the projector's matrices are f16). */
function f16Source(name: string, data: Float32Array, rows: number, cols: number): WeightSource {
  const w = weightType(GgmlType.F16)!;
  const out = new Uint8Array(rows * cols * 2);
  w.quantize(data, out, rows * cols);
  return { name, type: GgmlType.F16, rows, cols, data: out };
}

/** An f32 vector as a [1][n] weight (biases). */
const f32Source = (name: string, data: Float32Array): WeightSource =>
  ({ name, type: GgmlType.F32, rows: 1, cols: data.length, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) });

/** x [n][dim] times 1 / rms per row, times w, in place (ggml_rms_norm then mul). */
function rmsNormRows(x: Float32Array, n: number, dim: number, w: Float32Array, eps: number): void {
  for (let t = 0; t < n; t++) {
    const o = t * dim;
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[o + i]! ** 2;
    const scale = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) x[o + i] = x[o + i]! * scale * w[i]!;
  }
}

interface LayerHandles {
  readonly w: Readonly<Record<Exclude<Qwen25vlLayerTensor, "ln1" | "ln2">, Weight>>;
  readonly b: Readonly<Record<Exclude<Qwen25vlLayerTensor, "ln1" | "ln2">, Weight>>;
  readonly ln1: Float32Array;
  readonly ln2: Float32Array;
}

const MATRICES = ["attnQ", "attnK", "attnV", "attnOut", "ffnGate", "ffnUp", "ffnDown"] as const;

/** The window order of a grid's merged tokens: order[k] = the merge-order token at window-order place k. */
function windowOrder(window: Int32Array): Int32Array {
  const tokens = window.length / 4;
  const ids = Array.from({ length: tokens }, (_, t) => t);
  // stable: within a window the tokens keep their row-major order, as clip.cpp's window_idx loop lays them out
  ids.sort((a, b) => window[a * 4]! - window[b * 4]! || a - b);
  return Int32Array.from(ids);
}

export class Qwen25vlBackendEncoder {
  private readonly patch: Weight;
  private readonly layers: LayerHandles[];
  private readonly merger: readonly [Weight, Weight, Weight, Weight];
  private readonly postNorm: Float32Array;
  /** the rope's angle tables: pairs of the first quarter (turned by y), of the second (turned by x) */
  private readonly ropeY: RopeAngles;
  private readonly ropeX: RopeAngles;

  constructor(private readonly c: Qwen25vlConfig, weights: Qwen25vlWeights, private readonly backend: Backend) {
    const { dim, ffnDim, patchSize: p } = c;
    const b = backend;
    const both = Float32Array.from(weights.patchEmbd0, (v, i) => v + weights.patchEmbd1[i]!);
    this.patch = b.loadWeight(f16Source("v.patch_embd", both, dim, 3 * p * p));
    const shape = (key: (typeof MATRICES)[number]): [number, number] =>
      key === "ffnGate" || key === "ffnUp" ? [ffnDim, dim] : key === "ffnDown" ? [dim, ffnDim] : [dim, dim];
    this.layers = weights.layers.map((layer, l) => {
      const w: Partial<Record<(typeof MATRICES)[number], Weight>> = {};
      const bias: Partial<Record<(typeof MATRICES)[number], Weight>> = {};
      for (const key of MATRICES) {
        const [rows, cols] = shape(key);
        w[key] = b.loadWeight(f16Source(`v.blk.${l}.${key}`, layer.weights[key], rows, cols));
        bias[key] = b.loadWeight(f32Source(`v.blk.${l}.${key}.bias`, layer.biases[key]!));
      }
      return { w: w as LayerHandles["w"], b: bias as LayerHandles["b"], ln1: layer.weights.ln1, ln2: layer.weights.ln2 };
    });
    const merged = 4 * dim;
    this.merger = [
      b.loadWeight(f16Source("mm.0", weights.merger0, merged, merged)), b.loadWeight(f32Source("mm.0.bias", weights.merger0Bias)),
      b.loadWeight(f16Source("mm.2", weights.merger2, c.projectionDim, merged)), b.loadWeight(f32Source("mm.2.bias", weights.merger2Bias)),
    ];
    this.postNorm = weights.postNorm;
    const half = c.headDim / 2, quarter = c.headDim / 4;
    const theta = (k: number) => Math.pow(VISION_ROPE_BASE, -k / quarter);
    this.ropeY = { ropeDim: c.headDim, mscale: 1, thetas: Float64Array.from({ length: half }, (_, i) => (i < quarter ? theta(i) : 0)) };
    this.ropeX = { ropeDim: c.headDim, mscale: 1, thetas: Float64Array.from({ length: half }, (_, i) => (i < quarter ? 0 : theta(i - quarter))) };
  }

  /**
   * One preprocessed image's language-model embeddings, [tokens][projectionDim] row-major over the token grid.
   * @example const emb = await encoder.embed(preprocessQwen25vl(img, config));
   */
  async embed(tile: PixelTile): Promise<Float32Array> {
    const { c, backend: b } = this;
    const { dim, ffnDim, patchSize: p, numHeads, projectionDim } = c;
    const grid = tileGrid(tile, c);
    const n = grid.ys.length;
    const tokens = n / 4;
    const order = windowOrder(grid.window);
    // patch r of the window order is merge-order patch src[r]
    const src = Int32Array.from({ length: n }, (_, r) => order[r >> 2]! * 4 + (r & 3));
    const patches = new Float32Array(n * 3 * p * p); // [n][3 * p * p] in the conv weight's (channel, ky, kx) order
    for (let r = 0; r < n; r++) {
      const [py, px] = [grid.ys[src[r]!]!, grid.xs[src[r]!]!];
      for (let ch = 0; ch < 3; ch++) for (let ky = 0; ky < p; ky++) {
        const from = (ch * tile.height + py * p + ky) * tile.width + px * p;
        patches.set(tile.pixels.subarray(from, from + p), r * 3 * p * p + (ch * p + ky) * p);
      }
    }
    const ys = Int32Array.from(src, (s) => grid.ys[s]!);
    const xs = Int32Array.from(src, (s) => grid.xs[s]!);
    // attention: window layers store each window's keys from a fresh block (KV layer 0), full layers in row order (layer 1)
    const windows: { rowStart: number; numRows: number; firstBlock: number }[] = [];
    for (let r = 0, block = 0; r < n;) {
      let end = r;
      while (end < n && grid.window[src[end]!] === grid.window[src[r]!]) end++;
      windows.push({ rowStart: r, numRows: end - r, firstBlock: block });
      block += Math.ceil((end - r) / KV_BLOCK);
      r = end;
    }
    const windowBlocks = windows.reduce((s, w) => s + Math.ceil(w.numRows / KV_BLOCK), 0);
    const fullBlocks = Math.ceil(n / KV_BLOCK);
    b.allocKvCache({ numLayers: 2, numBlocks: Math.max(windowBlocks, fullBlocks), blockSize: KV_BLOCK, numKvHeads: numHeads, headDim: c.headDim });
    const windowSlots = new Int32Array(n);
    for (const w of windows) for (let i = 0; i < w.numRows; i++) windowSlots[w.rowStart + i] = w.firstBlock * KV_BLOCK + i;
    const windowSeqs = windows.map((w) => ({
      rowStart: w.rowStart, numRows: w.numRows, startPos: 0,
      blockTable: Int32Array.from({ length: Math.ceil(w.numRows / KV_BLOCK) }, (_, i) => w.firstBlock + i),
    }));
    const fullSlots = Int32Array.from({ length: n }, (_, i) => i);
    const fullSeqs = [{ rowStart: 0, numRows: n, startPos: 0, blockTable: Int32Array.from({ length: fullBlocks }, (_, i) => i) }];

    const buffers: DeviceBuffer[] = [];
    const alloc = (floats: number) => { const d = b.alloc(floats); buffers.push(d); return d; };
    try {
      const [h, q, k, v, attn, o] = [alloc(n * Math.max(dim, 3 * p * p)), alloc(n * dim), alloc(n * dim), alloc(n * dim), alloc(n * dim), alloc(n * dim)];
      const [gate, up, act] = [alloc(n * ffnDim), alloc(n * ffnDim), alloc(n * ffnDim)];
      b.write(h, patches);
      b.matmul(q, this.patch, h, n);
      const x = await b.read(q, n * dim); // [n][dim] the residual stream, on the host between the norms
      for (const [l, layer] of this.layers.entries()) {
        const windowed = qwen25vlWindowedLayer(c, l);
        const normed = x.slice();
        rmsNormRows(normed, n, dim, layer.ln1, c.eps);
        b.write(h, normed);
        for (const [out, key] of [[q, "attnQ"], [k, "attnK"], [v, "attnV"]] as const) {
          b.matmul(out, layer.w[key], h, n);
          b.addBias(out, layer.b[key], n);
        }
        for (const t of [q, k]) {
          b.rope(t, ys, numHeads, c.headDim, this.ropeY, true);
          b.rope(t, xs, numHeads, c.headDim, this.ropeX, true);
        }
        const kvLayer = windowed ? 0 : 1;
        b.kvStore(kvLayer, k, v, windowed ? windowSlots : fullSlots);
        b.attention(attn, q, kvLayer, numHeads, windowed ? windowSeqs : fullSeqs, 0, true);
        b.matmul(o, layer.w.attnOut, attn, n);
        b.addBias(o, layer.b.attnOut, n);
        const attnOut = await b.read(o, n * dim);
        for (let i = 0; i < n * dim; i++) x[i]! += attnOut[i]!;
        const normed2 = x.slice();
        rmsNormRows(normed2, n, dim, layer.ln2, c.eps);
        b.write(h, normed2);
        b.matmul(gate, layer.w.ffnGate, h, n);
        b.addBias(gate, layer.b.ffnGate, n);
        b.matmul(up, layer.w.ffnUp, h, n);
        b.addBias(up, layer.b.ffnUp, n);
        b.siluMul(act, gate, up, n * ffnDim);
        b.matmul(o, layer.w.ffnDown, act, n);
        b.addBias(o, layer.b.ffnDown, n);
        const ffn = await b.read(o, n * dim);
        for (let i = 0; i < n * dim; i++) x[i]! += ffn[i]!;
      }
      rmsNormRows(x, n, dim, this.postNorm, c.eps);
      // the merger: 4 consecutive patches are one token ([tokens][4 dim]), mm.2(gelu(mm.0 x))
      const [mIn, mHidden, ones, mAct, mOut] = [alloc(n * dim), alloc(n * dim), alloc(n * dim), alloc(n * dim), alloc(tokens * projectionDim)];
      b.write(mIn, x);
      b.write(ones, new Float32Array(n * dim).fill(1));
      b.matmul(mHidden, this.merger[0], mIn, tokens);
      b.addBias(mHidden, this.merger[1], tokens);
      b.geluMul(mAct, mHidden, ones, n * dim);
      b.matmul(mOut, this.merger[2], mAct, tokens);
      b.addBias(mOut, this.merger[3], tokens);
      const windowed = await b.read(mOut, tokens * projectionDim);
      // back to row-major: window-order token k is merge-order (row-major) token order[k]
      const out = new Float32Array(tokens * projectionDim);
      for (let kk = 0; kk < tokens; kk++) out.set(windowed.subarray(kk * projectionDim, (kk + 1) * projectionDim), order[kk]! * projectionDim);
      return out;
    } finally {
      for (const d of buffers) b.free(d);
    }
  }

  dispose(): void {
    this.backend.dispose();
  }
}
