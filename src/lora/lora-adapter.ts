/**
 * One LoRA adapter as the model uses it: per layer, per target, the pair A [rank, nIn] and B [nOut, rank] in f32
 * (row-major, rows = output features, like every weight here). The update of a target's matmul is
 * y += scale * B (A x), scale = userScale * alpha / rank, or userScale alone when the file has no alpha
 * (llama.cpp llama_adapter_lora_weight::get_scale, applied in llm_graph_context::build_lora_mm).
 */
import type { LoraTargetName } from "./lora-targets.ts";

export interface LoraPair {
  readonly rank: number;
  readonly nIn: number;
  readonly nOut: number;
  /** [rank, nIn] */
  readonly a: Float32Array;
  /** [nOut, rank] */
  readonly b: Float32Array;
}

export interface LoraAdapter {
  /** the file it was read from (every error names it) */
  readonly source: string;
  /** general.architecture, the base's */
  readonly architecture: string;
  /** adapter.lora.alpha; 0 when absent (the scale is then the user's alone) */
  readonly alpha: number;
  /** the largest rank of its pairs (vLLM checks it against --max-lora-rank) */
  readonly rank: number;
  /** [numLayers] the layer's adapted targets */
  readonly layers: readonly ReadonlyMap<LoraTargetName, LoraPair>[];
  /** bytes of A and B in f32 */
  readonly bytes: number;
}

/**
 * The factor of B (A x) for one pair: f32 math in llama.cpp's order.
 * @example loraScale(16, 8, 1) // 2
 */
export function loraScale(alpha: number, rank: number, userScale: number): number {
  return alpha !== 0 ? Math.fround(Math.fround(userScale * alpha) / rank) : Math.fround(userScale);
}

/**
 * y[nOut] += scale * B (A x[nIn]) for one row, in f32 (the plain form every fast path is checked against).
 * @example loraUpdate(q, xb, pair, loraScale(adapter.alpha, pair.rank, 1));
 */
export function loraUpdate(y: Float32Array, x: Float32Array, pair: LoraPair, scale: number): void {
  const { rank, nIn, nOut, a, b } = pair;
  const ax = new Float32Array(rank);
  for (let r = 0; r < rank; r++) {
    let sum = 0;
    for (let i = 0; i < nIn; i++) sum += a[r * nIn + i]! * x[i]!;
    ax[r] = sum;
  }
  for (let o = 0; o < nOut; o++) {
    let sum = 0;
    for (let r = 0; r < rank; r++) sum += b[o * rank + r]! * ax[r]!;
    y[o] = y[o]! + Math.fround(scale * Math.fround(sum));
  }
}
