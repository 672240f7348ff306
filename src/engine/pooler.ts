/**
 * Sequence pooling of one request's final hidden states (vllm/model_executor/layers/pooler.py: CLSPool, LastPool,
 * MeanPool, then EmbeddingPoolerHead: matryoshka truncation, then L2 normalisation). The prompt may arrive over several
 * prefill chunks (chunked prefill): the pooler sees each chunk's rows once, in order, and keeps only what its type needs
 * (the first row, the last row, or a running sum in float64), so nothing grows with the prompt.
 * @example const p = new SequencePooler("MEAN", dim); p.add(rows, 0); const v = embeddingOf(p.pooled(), null, true);
 */
import type { PoolingType } from "../config/pooler-config.ts";

/** vLLM F.normalize's eps: a zero vector stays zero instead of becoming NaN */
const NORM_EPS = 1e-12;

export class SequencePooler {
  /** [dim] the first row (CLS), the latest row (LAST) or the sum of rows so far (MEAN) */
  private readonly acc: Float64Array;
  private numRows = 0;

  constructor(readonly type: PoolingType, readonly dim: number) {
    this.acc = new Float64Array(dim);
  }

  /** A recompute from position 0 (after a preemption) starts over. */
  reset(): void {
    this.acc.fill(0);
    this.numRows = 0;
  }

  /** `rows` is [count, dim], the hidden states of positions [startPos, startPos + count). */
  add(rows: Float32Array, startPos: number): void {
    const { dim } = this;
    const count = rows.length / dim;
    if (startPos === 0) this.reset();
    if (count === 0) return;
    if (this.type === "CLS") {
      if (startPos === 0) for (let i = 0; i < dim; i++) this.acc[i] = rows[i]!;
    } else if (this.type === "LAST") {
      const base = (count - 1) * dim;
      for (let i = 0; i < dim; i++) this.acc[i] = rows[base + i]!;
    } else {
      for (let r = 0; r < count; r++) {
        const base = r * dim;
        for (let i = 0; i < dim; i++) this.acc[i]! += rows[base + i]!;
      }
    }
    this.numRows += count;
  }

  /** [dim] the pooled hidden state of every row added since position 0. */
  pooled(): Float32Array {
    const out = new Float32Array(this.dim);
    const scale = this.type === "MEAN" && this.numRows > 0 ? 1 / this.numRows : 1;
    for (let i = 0; i < this.dim; i++) out[i] = this.acc[i]! * scale;
    return out;
  }
}

/**
 * The embedding of a pooled state (vLLM EmbeddingPoolerHead): the first `dimensions` values (matryoshka), then L2
 * normalised when `normalize`.
 */
export function embeddingOf(pooled: Float32Array, dimensions: number | null, normalize: boolean): Float32Array {
  const out = dimensions === null || dimensions >= pooled.length ? pooled.slice() : pooled.slice(0, dimensions);
  if (!normalize) return out;
  let sum = 0;
  for (let i = 0; i < out.length; i++) sum += out[i]! * out[i]!;
  const scale = 1 / Math.max(Math.sqrt(sum), NORM_EPS);
  for (let i = 0; i < out.length; i++) out[i] = out[i]! * scale;
  return out;
}
