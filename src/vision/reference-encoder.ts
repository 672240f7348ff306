/**
 * The plain reference vision encoder, the oracle for faster paths: SigLIP's ViT and the Gemma 3 projector in the
 * order of llama.cpp's tools/mtmd/models/siglip.cpp (clip_graph::build_inp, build_vit, then the GEMMA3 branch), as
 * plainly as llama2.c, in f32 arrays with f64 sums. One tile in, one [tokens][projectionDim] block of embeddings out.
 * The IDEFICS3 branch (SmolVLM) ends in a pixel shuffle and mm.model.fc instead.
 */
import type { VisionConfig, VisionLayerWeights, VisionWeights } from "./mmproj.ts";
import type { PixelTile } from "./preprocess.ts";
import type { ProjectorType } from "./clip-names.ts";
import { pixelShuffle } from "./idefics3-projector.ts";

/** out[n][o] = b[o] + sum_i x[n][i] * w[o][i] (ggml_mul_mat with a [out][in] weight, then the bias) */
export function linear(x: Float32Array, n: number, inDim: number, w: Float32Array, b: Float32Array | null | undefined, outDim: number): Float32Array {
  const out = new Float32Array(n * outDim); // [n][outDim]
  for (let t = 0; t < n; t++) {
    const xo = t * inDim;
    for (let o = 0; o < outDim; o++) {
      const wo = o * inDim;
      let sum = 0;
      for (let i = 0; i < inDim; i++) sum += x[xo + i]! * w[wo + i]!;
      out[t * outDim + o] = sum + (b === null || b === undefined ? 0 : b[o]!);
    }
  }
  return out;
}

/** ggml_norm then * w + b: per row, subtract the mean, divide by sqrt(variance + eps). */
function layerNorm(x: Float32Array, n: number, dim: number, w: Float32Array, b: Float32Array, eps: number): Float32Array {
  const out = new Float32Array(n * dim); // [n][dim]
  for (let t = 0; t < n; t++) {
    const row = x.subarray(t * dim, (t + 1) * dim);
    let mean = 0;
    for (let i = 0; i < dim; i++) mean += row[i]!;
    mean /= dim;
    let variance = 0;
    for (let i = 0; i < dim; i++) variance += (row[i]! - mean) ** 2;
    const scale = 1 / Math.sqrt(variance / dim + eps);
    for (let i = 0; i < dim; i++) out[t * dim + i] = (row[i]! - mean) * scale * w[i]! + b[i]!;
  }
  return out;
}

/** ggml_gelu: the tanh approximation */
function gelu(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
}

/** Patch embedding (a stride-patch conv2d with bias) plus the learned position embedding: [numPatches][dim]. */
function embedPatches(tile: PixelTile, c: VisionConfig, w: VisionWeights): Float32Array {
  const { patchSize: p, patchesPerSide: g, dim } = c;
  const x = new Float32Array(g * g * dim); // [numPatches][dim], patch n = py * g + px
  for (let py = 0; py < g; py++) {
    for (let px = 0; px < g; px++) {
      const n = py * g + px;
      for (let d = 0; d < dim; d++) {
        let sum = 0;
        for (let ch = 0; ch < 3; ch++) {
          for (let ky = 0; ky < p; ky++) {
            const wRow = ((d * 3 + ch) * p + ky) * p; // patchEmbd [dim][3][p][p]
            const pRow = (ch * tile.height + py * p + ky) * tile.width + px * p; // pixels [3][h][w]
            for (let kx = 0; kx < p; kx++) sum += w.patchEmbd[wRow + kx]! * tile.pixels[pRow + kx]!;
          }
        }
        x[n * dim + d] = sum + w.patchBias[d]! + w.positionEmbd[n * dim + d]!;
      }
    }
  }
  return x;
}

/** Bidirectional multi-head attention over all n positions (no mask: every patch sees every patch). */
function attention(q: Float32Array, k: Float32Array, v: Float32Array, n: number, c: VisionConfig): Float32Array {
  const { dim, numHeads, headDim } = c;
  const out = new Float32Array(n * dim); // [n][heads * headDim]
  const scores = new Float64Array(n); // [n]
  const scale = 1 / Math.sqrt(headDim);
  for (let h = 0; h < numHeads; h++) {
    for (let i = 0; i < n; i++) {
      const qo = i * dim + h * headDim;
      let max = -Infinity;
      for (let j = 0; j < n; j++) {
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
        for (let j = 0; j < n; j++) sum += scores[j]! * v[j * dim + h * headDim + e]!;
        out[qo + e] = sum / total;
      }
    }
  }
  return out;
}

/** One pre-norm ViT layer in place: x += attn(LN1 x); x += FFN(LN2 x) with FFN = down(gelu(up x)). */
function vitLayer(x: Float32Array, n: number, c: VisionConfig, layer: VisionLayerWeights): void {
  const { weights: w, biases: b } = layer;
  const { dim, ffnDim } = c;
  const h = layerNorm(x, n, dim, w.ln1, b.ln1, c.eps); // [n][dim]
  const q = linear(h, n, dim, w.attnQ, b.attnQ, dim);
  const k = linear(h, n, dim, w.attnK, b.attnK, dim);
  const v = linear(h, n, dim, w.attnV, b.attnV, dim);
  const attn = linear(attention(q, k, v, n, c), n, dim, w.attnOut, b.attnOut, dim);
  for (let i = 0; i < n * dim; i++) x[i]! += attn[i]!;
  const h2 = layerNorm(x, n, dim, w.ln2, b.ln2, c.eps);
  const up = linear(h2, n, dim, w.ffnUp, b.ffnUp, ffnDim); // [n][ffnDim]
  for (let i = 0; i < up.length; i++) up[i] = gelu(up[i]!);
  const down = linear(up, n, ffnDim, w.ffnDown, b.ffnDown, dim);
  for (let i = 0; i < n * dim; i++) x[i]! += down[i]!;
}

/**
 * Gemma 3's projector: 2-D average pool (kernel = stride = nMerge) over the patch grid, RMSNorm (eps of the ViT) times
 * soft_emb_norm, then x @ input_projection: [tokensPerImage][projectionDim], token t = oy * side + ox.
 */
function gemma3Projector(x: Float32Array, c: VisionConfig, w: VisionWeights): Float32Array {
  const { dim, patchesPerSide: g, nMerge: m, projectionDim } = c;
  const side = g / m;
  const tokens = side * side;
  const pooled = new Float32Array(tokens * dim); // [tokens][dim]
  for (let oy = 0; oy < side; oy++) {
    for (let ox = 0; ox < side; ox++) {
      const t = oy * side + ox;
      for (let d = 0; d < dim; d++) {
        let sum = 0;
        for (let ky = 0; ky < m; ky++) for (let kx = 0; kx < m; kx++) sum += x[((oy * m + ky) * g + ox * m + kx) * dim + d]!;
        pooled[t * dim + d] = sum / (m * m);
      }
    }
  }
  const out = new Float32Array(tokens * projectionDim); // [tokens][projectionDim]
  const normed = new Float64Array(dim);
  for (let t = 0; t < tokens; t++) {
    let ss = 0;
    for (let d = 0; d < dim; d++) ss += pooled[t * dim + d]! ** 2;
    const scale = 1 / Math.sqrt(ss / dim + c.eps);
    for (let d = 0; d < dim; d++) normed[d] = pooled[t * dim + d]! * scale * w.softEmbNorm[d]!;
    for (let o = 0; o < projectionDim; o++) {
      let sum = 0;
      for (let d = 0; d < dim; d++) sum += normed[d]! * w.inputProjection[d * projectionDim + o]!; // [dim][projectionDim]
      out[t * projectionDim + o] = sum;
    }
  }
  return out;
}

/** Idefics3's projector: the pixel shuffle by nMerge, then mm.model.fc (no bias): [tokensPerImage][projectionDim]. */
function idefics3Projector(x: Float32Array, c: VisionConfig, w: VisionWeights): Float32Array {
  const merged = c.dim * c.nMerge * c.nMerge;
  if (w.fc === undefined) throw new Error("vision encoder: an idefics3 projector without mm.model.fc");
  return linear(pixelShuffle(x, c.patchesPerSide, c.dim, c.nMerge), c.tokensPerImage, merged, w.fc, null, c.projectionDim);
}

/** The projector after the ViT, per projector type (tools/mtmd/models/siglip.cpp's branches). */
const PROJECTORS: Readonly<Record<ProjectorType, (x: Float32Array, c: VisionConfig, w: VisionWeights) => Float32Array>> = {
  gemma3: gemma3Projector,
  idefics3: idefics3Projector,
};

/** The ViT's output for one tile, after the post-layernorm: [numPatches][dim]. */
export function encodeTileReference(tile: PixelTile, c: VisionConfig, w: VisionWeights): Float32Array {
  if (tile.width !== c.imageSize || tile.height !== c.imageSize || tile.pixels.length !== 3 * c.imageSize * c.imageSize) {
    throw new Error(`vision encoder: a ${tile.width}x${tile.height} tile, the encoder takes ${c.imageSize}x${c.imageSize}`);
  }
  const n = c.patchesPerSide * c.patchesPerSide;
  const x = embedPatches(tile, c, w);
  for (const layer of w.layers) vitLayer(x, n, c, layer);
  return layerNorm(x, n, c.dim, w.postLnWeight, w.postLnBias, c.eps);
}

/**
 * The language-model embeddings of each image's tiles (batched over images: one block per tile, in order),
 * each [tokensPerImage][projectionDim].
 * @example const [emb] = embedImagesReference([tile], config, weights); // 256 x n_embd for Gemma 3
 */
export function embedImagesReference(tiles: readonly PixelTile[], c: VisionConfig, w: VisionWeights): Float32Array[] {
  return tiles.map((tile) => PROJECTORS[c.projector](encodeTileReference(tile, c, w), c, w));
}
