/**
 * The reference backend: plain TypeScript, straightforward loops, f32 everywhere. It is the oracle every other backend
 * is tested against (test/conformance), so clarity beats speed here.
 * Weights are dequantized to f32 at load with the table's dequantizers; the KV cache is f32.
 * @example const backend = new ReferenceBackend(); const w = backend.loadWeight(source);
 */
import { roundTripKvRowQ8 } from "../tensor/kv-q8.ts";
import { dequantizeTensor, type GgmlType } from "../tensor/dtypes.ts";
import type {
  AttentionSequence, Backend, DeviceBuffer, KvCacheShape, LoraPairBuffers, RopeAngles, Weight, WeightSource,
} from "./backend.ts";
import { attentionKeys } from "./backend.ts";

class RefWeight implements Weight {
  constructor(
    readonly rows: number,
    readonly cols: number,
    readonly type: GgmlType,
    /** [rows, cols] dequantized */
    readonly data: Float32Array,
  ) {}
}

class RefBuffer implements DeviceBuffer {
  constructor(readonly data: Float32Array) {}
  get length(): number { return this.data.length; }
}

interface RefKvCache {
  readonly shape: KvCacheShape;
  /** per layer: [numBlocks, blockSize, numKvHeads * headDim] */
  readonly k: Float32Array[];
  readonly v: Float32Array[];
}

function asWeight(w: Weight): RefWeight {
  if (!(w instanceof RefWeight)) throw new Error("reference backend: weight from another backend");
  return w;
}

function asBuffer(b: DeviceBuffer): Float32Array {
  if (!(b instanceof RefBuffer)) throw new Error("reference backend: buffer from another backend");
  return b.data;
}

export class ReferenceBackend implements Backend {
  readonly name = "reference";
  readonly attentionSinks = true;
  private kv: RefKvCache | null = null;

  loadWeight(source: WeightSource): Weight {
    return new RefWeight(source.rows, source.cols, source.type, dequantizeTensor(source));
  }

  alloc(numFloats: number): DeviceBuffer {
    return new RefBuffer(new Float32Array(numFloats));
  }

  free(_buffer: DeviceBuffer): void {}

  write(dst: DeviceBuffer, src: Float32Array, dstOffset = 0): void {
    asBuffer(dst).set(src, dstOffset);
  }

  read(src: DeviceBuffer, numFloats: number, srcOffset = 0): Promise<Float32Array> {
    return Promise.resolve(asBuffer(src).slice(srcOffset, srcOffset + numFloats));
  }

  allocKvCache(shape: KvCacheShape): void {
    const layerFloats = shape.numBlocks * shape.blockSize * shape.numKvHeads * shape.headDim;
    const k: Float32Array[] = [];
    const v: Float32Array[] = [];
    for (let l = 0; l < shape.numLayers; l++) {
      k.push(new Float32Array(layerFloats));
      v.push(new Float32Array(layerFloats));
    }
    this.kv = { shape, k, v };
  }

  private cache(): RefKvCache {
    if (this.kv === null) throw new Error("reference backend: allocKvCache was not called");
    return this.kv;
  }

  exportKvBlocks(blockIds: Int32Array): Uint8Array {
    const { shape, k, v } = this.cache();
    const blockFloats = shape.blockSize * shape.numKvHeads * shape.headDim;
    const out = new Float32Array(blockIds.length * shape.numLayers * 2 * blockFloats); // [ids, layer, K|V, blockSize, kvDim]
    let o = 0;
    for (const id of blockIds) {
      for (let l = 0; l < shape.numLayers; l++) {
        for (const part of [k[l]!, v[l]!]) {
          out.set(part.subarray(id * blockFloats, (id + 1) * blockFloats), o);
          o += blockFloats;
        }
      }
    }
    return new Uint8Array(out.buffer);
  }

  importKvBlocks(blockIds: Int32Array, data: Uint8Array): void {
    const { shape, k, v } = this.cache();
    const blockFloats = shape.blockSize * shape.numKvHeads * shape.headDim;
    const need = blockIds.length * shape.numLayers * 2 * blockFloats * 4;
    if (data.length !== need) throw new Error(`importKvBlocks: ${data.length} bytes, expected ${need}`);
    const src = new Float32Array(data.slice().buffer);
    let o = 0;
    for (const id of blockIds) {
      for (let l = 0; l < shape.numLayers; l++) {
        for (const part of [k[l]!, v[l]!]) {
          part.set(src.subarray(o, o + blockFloats), id * blockFloats);
          o += blockFloats;
        }
      }
    }
  }

  embed(out: DeviceBuffer, table: Weight, tokenIds: Int32Array): void {
    const t = asWeight(table);
    const o = asBuffer(out);
    for (let i = 0; i < tokenIds.length; i++) {
      const id = tokenIds[i]!;
      if (id < 0 || id >= t.rows) throw new Error(`embed: token id ${id} out of range [0, ${t.rows})`);
      o.set(t.data.subarray(id * t.cols, (id + 1) * t.cols), i * t.cols);
    }
  }

  rmsNorm(out: DeviceBuffer, x: DeviceBuffer, weight: Weight, numRows: number, dim: number, eps: number): void {
    const o = asBuffer(out);
    const xs = asBuffer(x);
    const w = asWeight(weight).data;
    for (let r = 0; r < numRows; r++) {
      const base = r * dim;
      let sumSq = 0;
      for (let i = 0; i < dim; i++) sumSq += xs[base + i]! * xs[base + i]!;
      const scale = 1 / Math.sqrt(sumSq / dim + eps);
      for (let i = 0; i < dim; i++) o[base + i] = xs[base + i]! * scale * w[i]!;
    }
  }

  matmul(out: DeviceBuffer, w: Weight, x: DeviceBuffer, numRows: number): void {
    const wt = asWeight(w);
    const o = asBuffer(out);
    const xs = asBuffer(x);
    const { rows, cols } = wt;
    for (let r = 0; r < numRows; r++) {
      for (let j = 0; j < rows; j++) {
        let acc = 0;
        const wBase = j * cols;
        const xBase = r * cols;
        for (let c = 0; c < cols; c++) acc += wt.data[wBase + c]! * xs[xBase + c]!;
        o[r * rows + j] = acc;
      }
    }
  }

  addBias(x: DeviceBuffer, bias: Weight, numRows: number): void {
    const xs = asBuffer(x);
    const b = asWeight(bias).data;
    const n = b.length;
    for (let r = 0; r < numRows; r++) for (let i = 0; i < n; i++) xs[r * n + i]! += b[i]!;
  }

  rope(x: DeviceBuffer, positions: Int32Array, numHeads: number, headDim: number, angles: RopeAngles, neox: boolean): void {
    const xs = asBuffer(x);
    const half = angles.ropeDim / 2;
    for (let r = 0; r < positions.length; r++) {
      const pos = positions[r]!;
      for (let h = 0; h < numHeads; h++) {
        const base = (r * numHeads + h) * headDim;
        for (let i = 0; i < half; i++) {
          // ggml rope_yarn: theta_i = pos * thetas[i], cos and sin scaled by mscale
          const theta = pos * angles.thetas[i]!;
          const cos = Math.cos(theta) * angles.mscale;
          const sin = Math.sin(theta) * angles.mscale;
          const a = neox ? base + i : base + 2 * i;
          const b = neox ? base + i + half : base + 2 * i + 1;
          const x0 = xs[a]!;
          const x1 = xs[b]!;
          xs[a] = x0 * cos - x1 * sin;
          xs[b] = x0 * sin + x1 * cos;
        }
      }
    }
  }

  kvStore(layer: number, k: DeviceBuffer, v: DeviceBuffer, slots: Int32Array): void {
    const { shape, k: kc, v: vc } = this.cache();
    const kvDim = shape.numKvHeads * shape.headDim;
    const ks = asBuffer(k);
    const vs = asBuffer(v);
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i]!;
      kc[layer]!.set(ks.subarray(i * kvDim, (i + 1) * kvDim), slot * kvDim);
      vc[layer]!.set(vs.subarray(i * kvDim, (i + 1) * kvDim), slot * kvDim);
      // the 8-bit cache keeps what the kernels keep: the rows after int8 with a per-token scale
      if (shape.dtype === "q8") {
        roundTripKvRowQ8(kc[layer]!.subarray(slot * kvDim, (slot + 1) * kvDim));
        roundTripKvRowQ8(vc[layer]!.subarray(slot * kvDim, (slot + 1) * kvDim));
      }
    }
  }

  attention(out: DeviceBuffer, q: DeviceBuffer, layer: number, numHeads: number, sequences: readonly AttentionSequence[], slidingWindow = 0, bidirectional = false, sinks: Weight | null = null): void {
    const { shape, k: kc, v: vc } = this.cache();
    const sk = sinks === null ? null : asWeight(sinks).data; // [numHeads]
    const { headDim, numKvHeads, blockSize } = shape;
    const kvDim = numKvHeads * headDim;
    const qDim = numHeads * headDim;
    const groupSize = numHeads / numKvHeads;
    const scale = 1 / Math.sqrt(headDim);
    const o = asBuffer(out);
    const qs = asBuffer(q);
    const kl = kc[layer]!;
    const vl = vc[layer]!;
    for (const seq of sequences) {
      for (let i = 0; i < seq.numRows; i++) {
        const row = seq.rowStart + i;
        // keys [first, numKeys): causal, or the whole sequence (bidirectional); a window narrows them
        const [first, numKeys] = attentionKeys(seq, i, slidingWindow, bidirectional);
        const scores = new Float64Array(numKeys); // [numKeys], used from `first`
        for (let h = 0; h < numHeads; h++) {
          const kvHead = Math.floor(h / groupSize);
          const qBase = row * qDim + h * headDim;
          // gpt-oss: the head's sink logit joins the max and the denominator, with no value row
          let max = sk === null ? -Infinity : sk[h]!;
          for (let t = first; t < numKeys; t++) {
            const slot = seq.blockTable[Math.floor(t / blockSize)]! * blockSize + (t % blockSize);
            const kBase = slot * kvDim + kvHead * headDim;
            let dot = 0;
            for (let d = 0; d < headDim; d++) dot += qs[qBase + d]! * kl[kBase + d]!;
            scores[t] = dot * scale;
            if (scores[t]! > max) max = scores[t]!;
          }
          let sum = sk === null ? 0 : Math.exp(sk[h]! - max);
          for (let t = first; t < numKeys; t++) {
            scores[t] = Math.exp(scores[t]! - max);
            sum += scores[t]!;
          }
          const acc = new Float64Array(headDim); // [headDim]
          for (let t = first; t < numKeys; t++) {
            const slot = seq.blockTable[Math.floor(t / blockSize)]! * blockSize + (t % blockSize);
            const vBase = slot * kvDim + kvHead * headDim;
            const p = scores[t]! / sum;
            for (let d = 0; d < headDim; d++) acc[d]! += p * vl[vBase + d]!;
          }
          for (let d = 0; d < headDim; d++) o[qBase + d] = acc[d]!;
        }
      }
    }
  }

  siluMul(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number): void {
    const o = asBuffer(out);
    const g = asBuffer(gate);
    const u = asBuffer(up);
    for (let i = 0; i < n; i++) {
      const x = g[i]!;
      o[i] = (x / (1 + Math.exp(-x))) * u[i]!;
    }
  }

  swigluOai(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number, alpha: number, limit: number): void {
    const o = asBuffer(out);
    const g = asBuffer(gate);
    const u = asBuffer(up);
    for (let i = 0; i < n; i++) {
      const x = Math.min(g[i]!, limit);
      const y = Math.min(Math.max(u[i]!, -limit), limit);
      o[i] = (x / (1 + Math.exp(-alpha * x))) * (y + 1);
    }
  }

  geluMul(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number): void {
    const o = asBuffer(out);
    const g = asBuffer(gate);
    const u = asBuffer(up);
    for (let i = 0; i < n; i++) {
      const x = g[i]!;
      o[i] = 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * x * (1 + 0.044715 * x * x))) * u[i]!;
    }
  }

  scale(x: DeviceBuffer, s: number, n: number): void {
    const xs = asBuffer(x);
    for (let i = 0; i < n; i++) xs[i] = xs[i]! * s;
  }

  add(out: DeviceBuffer, a: DeviceBuffer, b: DeviceBuffer, n: number): void {
    const o = asBuffer(out);
    const as = asBuffer(a);
    const bs = asBuffer(b);
    for (let i = 0; i < n; i++) o[i] = as[i]! + bs[i]!;
  }

  scatterRows(dst: DeviceBuffer, src: DeviceBuffer, rowIds: Int32Array, cols: number): void {
    const d = asBuffer(dst);
    const s = asBuffer(src);
    rowIds.forEach((id, i) => d.set(s.subarray(i * cols, (i + 1) * cols), id * cols));
  }

  weightedRowSum(out: DeviceBuffer, src: DeviceBuffer, weights: Float32Array, numRows: number, k: number, cols: number): void {
    const o = asBuffer(out);
    const s = asBuffer(src);
    for (let r = 0; r < numRows; r++) {
      for (let c = 0; c < cols; c++) {
        let sum = 0;
        for (let j = 0; j < k; j++) sum = Math.fround(sum + Math.fround(weights[r * k + j]! * s[(r * k + j) * cols + c]!));
        o[r * cols + c] = sum;
      }
    }
  }

  /** plain sums in f64 (as matmul here): the oracle the kernels' f32 sums are checked against */
  loraDelta(out: DeviceBuffer, x: DeviceBuffer, numRows: number, nIn: number, nOut: number, rowSlots: Int32Array, slots: readonly (LoraPairBuffers | null)[]): void {
    const o = asBuffer(out);
    const xs = asBuffer(x);
    for (let r = 0; r < numRows; r++) {
      const pair = rowSlots[r]! < 0 ? null : slots[rowSlots[r]!] ?? null;
      if (pair === null) continue;
      const a = asBuffer(pair.a);
      const bt = asBuffer(pair.bt);
      const ax = new Float64Array(pair.rank);
      for (let k = 0; k < pair.rank; k++) for (let i = 0; i < nIn; i++) ax[k] = ax[k]! + a[k * nIn + i]! * xs[r * nIn + i]!;
      for (let j = 0; j < nOut; j++) {
        let sum = 0;
        for (let k = 0; k < pair.rank; k++) sum += bt[k * nOut + j]! * ax[k]!;
        o[r * nOut + j] = o[r * nOut + j]! + Math.fround(pair.scale * sum);
      }
    }
  }

  gatherRows(dst: DeviceBuffer, src: DeviceBuffer, rowIds: Int32Array, cols: number): void {
    const d = asBuffer(dst);
    const s = asBuffer(src);
    // copy through a temporary so dst may alias src
    const rows = Array.from(rowIds, (id) => s.slice(id * cols, (id + 1) * cols));
    rows.forEach((row, i) => d.set(row, i * cols));
  }

  dispose(): void {
    this.kv = null;
  }
}
