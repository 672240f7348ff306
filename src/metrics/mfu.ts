/**
 * `--enable-mfu-metrics`: FLOPs and memory traffic of one engine step, estimated from the model's shapes the way vLLM's
 * perf.py does (matmul FLOPs = 2 x parameters x tokens, weights read once per step, K/V written once per new token).
 * Attention FLOPs and K/V reads need each sequence's context length, which StepStats does not carry; they are estimated
 * with `meanContextTokens` (the caller's running mean), so the figures are estimates, as vLLM's help texts say.
 */
import type { ModelConfig } from "../model/model-config.ts";

export interface ModelShapeCost {
  /** parameters inside matmuls that every token goes through (attention projections, FFN, LM head) */
  readonly matmulParams: number;
  /**
   * bytes of weights one step of one token reads (all matmul weights plus one embedding row per token, ignored; a
   * mixture of experts: the router and k experts per layer)
   */
  readonly weightBytes: number;
  /** mixture of experts: bytes of one expert's gate, up and down over all layers, and k and E; absent: dense */
  readonly experts?: { readonly bytesPerExpert: number; readonly used: number; readonly count: number };
  /** bytes of K and V one token adds across all layers */
  readonly kvBytesPerToken: number;
  /** FLOPs of attention per token per context token (QK^T and PV over all layers and heads) */
  readonly attentionFlopsPerContextToken: number;
}

export interface StepCost {
  readonly flops: number;
  readonly readBytes: number;
  readonly writeBytes: number;
}

/**
 * @param bytesPerWeight average stored bytes per weight (e.g. 4 for f32, ~0.56 for Q4_K)
 * @param bytesPerKvElement bytes per cached K/V element (4 for an f32 cache)
 * @example shapeCost(config, 4, 4).matmulParams
 */
export function shapeCost(config: ModelConfig, bytesPerWeight: number, bytesPerKvElement: number): ModelShapeCost {
  const kvDim = config.numKvHeads * config.headDim;
  const qDim = config.numHeads * config.headDim;
  const attentionParams = config.dim * qDim + 2 * config.dim * kvDim + qDim * config.dim;
  // mixture of experts: a token goes through the router, its k experts and the shared one only (active parameters)
  const moe = config.moe;
  const ffnParams = moe === undefined ? 3 * config.dim * config.hiddenDim
    : config.dim * moe.expertCount + 3 * config.dim * moe.expertHiddenDim * moe.expertUsedCount + 3 * config.dim * (moe.sharedHiddenDim ?? 0);
  const matmulParams = config.numLayers * (attentionParams + ffnParams) + config.dim * config.vocabSize;
  return {
    matmulParams,
    weightBytes: matmulParams * bytesPerWeight,
    ...(moe === undefined ? {} : { experts: { bytesPerExpert: config.numLayers * 3 * config.dim * moe.expertHiddenDim * bytesPerWeight, used: moe.expertUsedCount, count: moe.expertCount } }),
    kvBytesPerToken: 2 * config.numLayers * kvDim * bytesPerKvElement,
    attentionFlopsPerContextToken: 4 * config.numLayers * qDim,
  };
}

/**
 * Cost of one step that computed `numTokens` tokens whose mean context is `meanContextTokens`. A mixture of experts
 * reads each routed expert once per step (moe-ffn.ts groups the rows by expert): at most k distinct experts per token,
 * and never more than all E of them, counted as min(E, k x tokens) per layer.
 */
export function stepCost(cost: ModelShapeCost, numTokens: number, meanContextTokens: number): StepCost {
  if (numTokens <= 0) return { flops: 0, readBytes: 0, writeBytes: 0 };
  const e = cost.experts;
  const expertBytes = e === undefined ? 0 : (Math.min(e.count, e.used * numTokens) - e.used) * e.bytesPerExpert;
  return {
    flops: 2 * cost.matmulParams * numTokens + cost.attentionFlopsPerContextToken * meanContextTokens * numTokens,
    readBytes: cost.weightBytes + expertBytes + cost.kvBytesPerToken * meanContextTokens * numTokens,
    writeBytes: cost.kvBytesPerToken * numTokens,
  };
}
