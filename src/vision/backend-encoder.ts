/**
 * The vision encoder on the kernels: SigLIP's ViT and the Gemma 3 projector in the order of the reference encoder
 * (reference-encoder.ts, the oracle), with every matmul, bias, GELU and the bidirectional attention on a Backend (the
 * WASM kernels): the patch embedding as one matmul over flattened patches, q/k/v/out and the FFN per layer, attention
 * through a one-sequence KV cache of one layer (rewritten by each layer) with every patch seeing every patch. The
 * LayerNorms, the average pool and the soft-embedding RMSNorm run on the host between them. Idefics3 (SmolVLM): the
 * pixel shuffle on the host, then mm.model.fc on the backend.
 */
import type { Backend, DeviceBuffer, Weight, WeightSource } from "../backend/backend.ts";
import { GgmlType } from "../tensor/dtypes.ts";
import type { ClipLayerTensor } from "./clip-names.ts";
import type { VisionConfig, VisionWeights } from "./mmproj.ts";
import type { PixelTile } from "./preprocess.ts";
import { pixelShuffle } from "./idefics3-projector.ts";

const KV_BLOCK = 16;

/** An f32 array as a [rows][cols] weight (no copy on this side). */
const f32Source = (name: string, data: Float32Array, rows: number, cols: number): WeightSource =>
  ({ name, type: GgmlType.F32, rows, cols, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) });

/** x [n][dim] normalised per row (ggml_norm), then * w + b, in place. */
function layerNormRows(x: Float32Array, n: number, dim: number, w: Float32Array, b: Float32Array, eps: number): void {
  for (let t = 0; t < n; t++) {
    const o = t * dim;
    let mean = 0;
    for (let i = 0; i < dim; i++) mean += x[o + i]!;
    mean /= dim;
    let variance = 0;
    for (let i = 0; i < dim; i++) variance += (x[o + i]! - mean) ** 2;
    const scale = 1 / Math.sqrt(variance / dim + eps);
    for (let i = 0; i < dim; i++) x[o + i] = (x[o + i]! - mean) * scale * w[i]! + b[i]!;
  }
}

interface LayerHandles {
  readonly w: Readonly<Record<ClipLayerTensor, Weight>>;
  readonly b: Readonly<Record<ClipLayerTensor, Weight>>;
  readonly ln1: readonly [Float32Array, Float32Array];
  readonly ln2: readonly [Float32Array, Float32Array];
}

export class BackendVisionEncoder {
  private readonly patch: Weight;
  private readonly patchBias: Weight;
  private readonly layers: LayerHandles[];
  private readonly projection: Weight;
  private readonly n: number;
  /** the host side's weights: small vectors and the position embedding; the matrices live only on the backend */
  private readonly host: Pick<VisionWeights, "positionEmbd" | "postLnWeight" | "postLnBias" | "softEmbNorm">;
  private readonly buf: Record<"x" | "h" | "q" | "k" | "v" | "attn" | "o" | "up" | "ones" | "act" | "pooled" | "out", DeviceBuffer>;

  constructor(private readonly c: VisionConfig, weights: VisionWeights, private readonly backend: Backend) {
    const { dim, ffnDim, patchSize: p, projectionDim } = c;
    const b = backend;
    this.n = c.patchesPerSide * c.patchesPerSide;
    this.host = { positionEmbd: weights.positionEmbd, postLnWeight: weights.postLnWeight, postLnBias: weights.postLnBias, softEmbNorm: weights.softEmbNorm };
    this.patch = b.loadWeight(f32Source("v.patch_embd", weights.patchEmbd, dim, 3 * p * p));
    this.patchBias = b.loadWeight(f32Source("v.patch_embd.bias", weights.patchBias, 1, dim));
    const shape = (key: ClipLayerTensor): [number, number] => (key === "ffnUp" ? [ffnDim, dim] : key === "ffnDown" ? [dim, ffnDim] : [dim, dim]);
    this.layers = weights.layers.map((layer, l) => {
      const w: Partial<Record<ClipLayerTensor, Weight>> = {};
      const bias: Partial<Record<ClipLayerTensor, Weight>> = {};
      for (const key of ["attnQ", "attnK", "attnV", "attnOut", "ffnUp", "ffnDown"] as const) {
        const [rows, cols] = shape(key);
        w[key] = b.loadWeight(f32Source(`v.blk.${l}.${key}`, layer.weights[key], rows, cols));
        bias[key] = b.loadWeight(f32Source(`v.blk.${l}.${key}.bias`, layer.biases[key], 1, rows));
      }
      return { w: w as LayerHandles["w"], b: bias as LayerHandles["b"], ln1: [layer.weights.ln1, layer.biases.ln1], ln2: [layer.weights.ln2, layer.biases.ln2] };
    });
    // the projector's input width: Gemma 3 pools (dim), Idefics3's pixel shuffle stacks nMerge^2 patches (dim * s^2)
    const projIn = c.projector === "idefics3" ? dim * c.nMerge * c.nMerge : dim;
    if (c.projector === "idefics3") {
      // mm.model.fc is a [projectionDim][dim * s^2] Linear already
      if (weights.fc === undefined) throw new Error("vision encoder: an idefics3 projector without mm.model.fc");
      this.projection = b.loadWeight(f32Source("mm.model.fc", weights.fc, projectionDim, projIn));
    } else {
      // mm.input_projection is stored [dim][projectionDim] (x @ W): transposed once into a [projectionDim][dim] weight
      const t = new Float32Array(projectionDim * dim);
      for (let d = 0; d < dim; d++) for (let o = 0; o < projectionDim; o++) t[o * dim + d] = weights.inputProjection[d * projectionDim + o]!;
      this.projection = b.loadWeight(f32Source("mm.input_projection", t, projectionDim, dim));
    }
    const n = this.n;
    const tokens = c.tokensPerImage;
    this.buf = {
      x: b.alloc(n * 3 * p * p), h: b.alloc(n * dim), q: b.alloc(n * dim), k: b.alloc(n * dim), v: b.alloc(n * dim),
      attn: b.alloc(n * dim), o: b.alloc(n * dim), up: b.alloc(n * ffnDim), ones: b.alloc(n * ffnDim), act: b.alloc(n * ffnDim),
      pooled: b.alloc(tokens * projIn), out: b.alloc(tokens * projectionDim),
    };
    b.write(this.buf.ones, new Float32Array(n * ffnDim).fill(1));
    b.allocKvCache({ numLayers: 1, numBlocks: Math.ceil(n / KV_BLOCK), blockSize: KV_BLOCK, numKvHeads: c.numHeads, headDim: c.headDim });
  }

  /** One tile's language-model embeddings: [tokensPerImage][projectionDim]. */
  async embedTile(tile: PixelTile): Promise<Float32Array> {
    const { c, backend: b, buf, n } = this;
    const { dim, ffnDim, patchSize: p, patchesPerSide: g } = c;
    if (tile.width !== c.imageSize || tile.height !== c.imageSize) throw new Error(`vision encoder: a ${tile.width}x${tile.height} tile, the encoder takes ${c.imageSize}x${c.imageSize}`);
    // patches flattened in the conv weight's (channel, ky, kx) order: [numPatches][3 * p * p]
    const patches = new Float32Array(n * 3 * p * p);
    for (let py = 0; py < g; py++) for (let px = 0; px < g; px++) {
      const base = (py * g + px) * 3 * p * p;
      for (let ch = 0; ch < 3; ch++) for (let ky = 0; ky < p; ky++) {
        const from = (ch * tile.height + py * p + ky) * tile.width + px * p;
        patches.set(tile.pixels.subarray(from, from + p), base + (ch * p + ky) * p);
      }
    }
    b.write(buf.x, patches);
    b.matmul(buf.q, this.patch, buf.x, n);
    b.addBias(buf.q, this.patchBias, n);
    const x = await b.read(buf.q, n * dim); // [n][dim], the residual stream on the host between the norms
    for (let i = 0; i < n * dim; i++) x[i]! += this.host.positionEmbd[i]!;
    const blockTable = Int32Array.from({ length: Math.ceil(n / KV_BLOCK) }, (_, i) => i);
    const slots = Int32Array.from({ length: n }, (_, i) => i);
    const seq = [{ rowStart: 0, numRows: n, startPos: 0, blockTable }];
    for (const layer of this.layers) {
      const h = x.slice();
      layerNormRows(h, n, dim, layer.ln1[0], layer.ln1[1], c.eps);
      b.write(buf.h, h);
      for (const [out, key] of [[buf.q, "attnQ"], [buf.k, "attnK"], [buf.v, "attnV"]] as const) {
        b.matmul(out, layer.w[key], buf.h, n);
        b.addBias(out, layer.b[key], n);
      }
      b.kvStore(0, buf.k, buf.v, slots);
      b.attention(buf.attn, buf.q, 0, c.numHeads, seq, 0, true);
      b.matmul(buf.o, layer.w.attnOut, buf.attn, n);
      b.addBias(buf.o, layer.b.attnOut, n);
      const attn = await b.read(buf.o, n * dim);
      for (let i = 0; i < n * dim; i++) x[i]! += attn[i]!;
      const h2 = x.slice();
      layerNormRows(h2, n, dim, layer.ln2[0], layer.ln2[1], c.eps);
      b.write(buf.h, h2);
      b.matmul(buf.up, layer.w.ffnUp, buf.h, n);
      b.addBias(buf.up, layer.b.ffnUp, n);
      b.geluMul(buf.act, buf.up, buf.ones, n * ffnDim);
      b.matmul(buf.o, layer.w.ffnDown, buf.act, n);
      b.addBias(buf.o, layer.b.ffnDown, n);
      const ffn = await b.read(buf.o, n * dim);
      for (let i = 0; i < n * dim; i++) x[i]! += ffn[i]!;
    }
    layerNormRows(x, n, dim, this.host.postLnWeight, this.host.postLnBias, c.eps);
    b.write(buf.pooled, c.projector === "idefics3" ? pixelShuffle(x, g, dim, c.nMerge) : this.poolAndNorm(x));
    b.matmul(buf.out, this.projection, buf.pooled, c.tokensPerImage);
    return b.read(buf.out, c.tokensPerImage * c.projectionDim);
  }

  /** Gemma 3: average pool nMerge x nMerge over the grid, then RMSNorm times soft_emb_norm: [tokens][dim]. */
  private poolAndNorm(x: Float32Array): Float32Array {
    const { dim, patchesPerSide: g, nMerge: m, eps } = this.c;
    const side = g / m;
    const out = new Float32Array(side * side * dim);
    for (let oy = 0; oy < side; oy++) for (let ox = 0; ox < side; ox++) {
      const t = oy * side + ox;
      for (let d = 0; d < dim; d++) {
        let sum = 0;
        for (let ky = 0; ky < m; ky++) for (let kx = 0; kx < m; kx++) sum += x[((oy * m + ky) * g + ox * m + kx) * dim + d]!;
        out[t * dim + d] = sum / (m * m);
      }
      let ss = 0;
      for (let d = 0; d < dim; d++) ss += out[t * dim + d]! ** 2;
      const scale = 1 / Math.sqrt(ss / dim + eps);
      for (let d = 0; d < dim; d++) out[t * dim + d] = out[t * dim + d]! * scale * this.host.softEmbNorm[d]!;
    }
    return out;
  }

  dispose(): void {
    this.backend.dispose();
  }
}
