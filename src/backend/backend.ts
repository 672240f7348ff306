/**
 * The kernel seam: the model's fast forward (`model/forward.ts`) calls kernels only through this interface, so a
 * backend (reference TS, WASM SIMD, WebGPU) slots in without touching the model or the engine.
 *
 * Buffers are device-side f32 arrays (WASM: offsets in the shared memory; WebGPU: GPUBuffers). Ops are enqueued in
 * call order; `read` returns once every earlier op has run (WASM runs ops at once, WebGPU batches them per step).
 * Row-major everywhere: a [rows, cols] buffer stores row r at r * cols.
 */
import type { GgmlType } from "../tensor/dtypes.ts";

/** A weight tensor handed to `loadWeight`: raw GGUF bytes. 1-D tensors (norms, biases) have rows = 1. */
export interface WeightSource {
  readonly name: string;
  readonly type: GgmlType;
  /** ne1 (rows = output features) */
  readonly rows: number;
  /** ne0 (the row length = input features) */
  readonly cols: number;
  readonly data: Uint8Array;
  /**
   * Positioned reads of `data`'s bytes [at, at + into.length) into `into` from the model file, not through the
   * mapping behind `data` (absent: `data` is in memory). A backend that streams a weight through one bounded buffer
   * this way keeps none of the file's pages resident while it loads (weight-chunks.ts).
   */
  readonly readBytes?: (at: number, into: Uint8Array) => void;
}

/** Opaque handles; each backend has its own concrete class. */
export interface Weight { readonly rows: number; readonly cols: number; readonly type: GgmlType }
export interface DeviceBuffer { readonly length: number }

/** How the KV cache stores K and V: f16, or 8-bit (int8 with one scale per token row, tensor/kv-q8.ts). */
export type KvCacheDtype = "f16" | "q8";

export interface KvCacheShape {
  /** default f16 */
  readonly dtype?: KvCacheDtype;
  readonly numLayers: number;
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly numKvHeads: number;
  readonly headDim: number;
}

/** One sequence of an attention call. Query row i sits at position startPos + i and sees positions 0..startPos + i. */
export interface AttentionSequence {
  /** first row of this sequence in q / out */
  readonly rowStart: number;
  readonly numRows: number;
  readonly startPos: number;
  /** [ceil((startPos + numRows) / blockSize)] */
  readonly blockTable: Int32Array;
}

/**
 * The keys [first, end) row i of a sequence attends to. Causal: end = p + 1 (p = startPos + i), first = end - window
 * (clamped at 0) with a window. Bidirectional: end = the sequence's length, and with a window the keys t with
 * |t - p| <= floor(window / 2) (llama.cpp llama_hparams::is_masked_swa, LLAMA_SWA_TYPE_SYMMETRIC).
 * @example attentionKeys({ rowStart: 0, numRows: 10, startPos: 0, blockTable }, 3, 4, true) // [1, 6]
 */
export function attentionKeys(seq: AttentionSequence, i: number, slidingWindow: number, bidirectional: boolean): [number, number] {
  const p = seq.startPos + i;
  if (!bidirectional) return [slidingWindow > 0 ? Math.max(0, p + 1 - slidingWindow) : 0, p + 1];
  const length = seq.startPos + seq.numRows;
  if (slidingWindow <= 0) return [0, length];
  const half = Math.floor(slidingWindow / 2);
  return [Math.max(0, p - half), Math.min(length, p + half + 1)];
}

/**
 * RoPE's angles (built once per model by model/rope-scaling.ts): pair i of every head turns by pos * thetas[i] for
 * i < ropeDim / 2, and both members of a turned pair are scaled by mscale (YaRN's and LongRoPE's attention factor, 1
 * without scaling), as ggml's rope_yarn does; dims past ropeDim are left as they are.
 */
export interface RopeAngles {
  readonly ropeDim: number;
  /** [ropeDim / 2] radians per position, in f64 */
  readonly thetas: Float64Array;
  readonly mscale: number;
}

/**
 * One LoRA adapter's pair for one weight, in device buffers (alloc + write): A [rank, nIn] and B transposed, Bt
 * [rank, nOut] (the expand then runs along rows of outputs), f32, and the factor of B (A x) (lora/lora-adapter.ts loraScale).
 */
export interface LoraPairBuffers {
  readonly a: DeviceBuffer;
  /** [rank, nOut]: B transposed */
  readonly bt: DeviceBuffer;
  readonly rank: number;
  readonly scale: number;
}

/** What `topK` reads back: [numRows, k] each. */
export interface TopK {
  readonly ids: Int32Array;
  readonly values: Float32Array;
}

export interface Backend {
  /** "reference" | "wasm-scalar" | "wasm-simd" | "wasm-relaxed-simd" | "webgpu" */
  readonly name: string;
  /**
   * Optional (WASM): the most rows one pass through the layers should take; the forward pass runs a longer step in
   * passes of this many rows (model/forward-passes.ts, llama.cpp's n_ubatch). Unset: one pass, whatever the step.
   */
  readonly maxRowsPerPass?: number;
  /** upload (and repack) a weight once at load */
  loadWeight(source: WeightSource): Weight;
  alloc(numFloats: number): DeviceBuffer;
  free(buffer: DeviceBuffer): void;
  write(dst: DeviceBuffer, src: Float32Array, dstOffset?: number): void;
  read(src: DeviceBuffer, numFloats: number, srcOffset?: number): Promise<Float32Array>;

  allocKvCache(shape: KvCacheShape): void;
  /** the blocks' bytes, [numBlocks of the ids, layer, K|V, block in the backend's own layout]; same backend and model only */
  exportKvBlocks(blockIds: Int32Array): Uint8Array;
  importKvBlocks(blockIds: Int32Array, data: Uint8Array): void;

  /** out[numRows, cols] = table rows tokenIds[i] (dequantized) */
  embed(out: DeviceBuffer, table: Weight, tokenIds: Int32Array): void;
  /** out[r] = x[r] / rms(x[r]) * weight, over numRows rows of length dim (also used per head for QK-norm) */
  rmsNorm(out: DeviceBuffer, x: DeviceBuffer, weight: Weight, numRows: number, dim: number, eps: number): void;
  /** out[numRows, w.rows] = x[numRows, w.cols] . w^T; row r of out must not depend on numRows (batch invariance) */
  matmul(out: DeviceBuffer, w: Weight, x: DeviceBuffer, numRows: number): void;
  /**
   * outs[i] = matmul(ws[i], x) for weights that read the same input (q, k, v; gate, up), the same bits as one matmul
   * each; optional: a backend that can share the input's preparation and one dispatch implements it.
   */
  matmulShared?(outs: readonly DeviceBuffer[], ws: readonly Weight[], x: DeviceBuffer, numRows: number): void;
  /**
   * outs[i] = matmul(ws[i], xs[i]) for weights that each read their own input (a decode step's routed experts' down
   * projections, one activation per slot), the same bits as one matmul each; optional: a backend that can run them as
   * one dispatch implements it (ggml_mul_mat_id runs every chosen expert's rows in one op).
   */
  matmulEach?(outs: readonly DeviceBuffer[], ws: readonly Weight[], xs: readonly DeviceBuffer[], numRows: number): void;
  /**
   * Optional (a prefill's routed experts, ggml_mul_mat_id): for every group g and projection j, rows [offsets[g],
   * offsets[g + 1]) of outs[j] (rows of ws[j][g].rows floats) = the same rows of x . ws[j][g]^T (gate and up read the
   * same rows), plus biases[j][g] when given (gpt-oss, ggml_add_id), the same bits as one matmul (and addBias) each;
   * a backend that can run every group's rows in one dispatch per call implements it.
   */
  matmulGrouped?(outs: readonly DeviceBuffer[], ws: readonly (readonly Weight[])[], x: DeviceBuffer, offsets: Int32Array, biases?: readonly (readonly Weight[])[] | null): void;
  /** x[r] += bias for numRows rows */
  addBias(x: DeviceBuffer, bias: Weight, numRows: number): void;
  /** in place on x[numRows, numHeads * headDim]; row r has position positions[r]; the first angles.ropeDim dims rotate */
  rope(x: DeviceBuffer, positions: Int32Array, numHeads: number, headDim: number, angles: RopeAngles, neox: boolean): void;
  /** write k, v [numRows, numKvHeads * headDim] of `layer` into the cache slots (slot = block * blockSize + offset) */
  kvStore(layer: number, k: DeviceBuffer, v: DeviceBuffer, slots: Int32Array): void;
  /**
   * causal attention of q [rows, numHeads * headDim] over the cached K/V of `layer`; GQA by numHeads / numKvHeads.
   * slidingWindow > 0 (gemma3's sliding layers): the row at position p sees keys max(0, p - window + 1) .. p only, and
   * the blocks before them are never read (so the KV manager may have freed them).
   * bidirectional (gemma-embedding): each row sees its whole sequence, keys 0 .. startPos + numRows - 1, or with a
   * window those within window / 2 of p either side; attentionKeys() is the rule every backend follows.
   * sinks (gpt-oss; only on a backend with `attentionSinks`): a float weight [numHeads], each head's sink logit, which
   * joins its softmax's max and denominator and has no value row (llama.cpp ggml_soft_max_ext with sinks).
   */
  attention(out: DeviceBuffer, q: DeviceBuffer, layer: number, numHeads: number, sequences: readonly AttentionSequence[], slidingWindow?: number, bidirectional?: boolean, sinks?: Weight | null): void;
  /** Optional: true when `attention` takes sinks (a backend without it refuses gpt-oss) */
  readonly attentionSinks?: boolean;
  /** out[i] = silu(gate[i]) * up[i] for n elements */
  siluMul(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number): void;
  /** out[i] = gelu(gate[i]) * up[i] for n elements, GELU's tanh approximation (GeGLU: gemma3) */
  geluMul(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number): void;
  /**
   * Optional (gpt-oss's experts; a backend without it refuses gpt-oss): out[i] = x / (1 + e^(-alpha x)) * (y + 1) with
   * x = min(gate[i], limit), y = clamp(up[i], -limit, limit) (ggml_swiglu_oai); out may alias gate
   */
  swigluOai?(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number, alpha: number, limit: number): void;
  /** x[i] *= s in place for n elements */
  scale(x: DeviceBuffer, s: number, n: number): void;
  /** out[i] = a[i] + b[i] (out may alias a) */
  add(out: DeviceBuffer, a: DeviceBuffer, b: DeviceBuffer, n: number): void;
  /** copy numRows rows of length cols: dst row i = src row rowIds[i] (gathers the positions that need logits) */
  gatherRows(dst: DeviceBuffer, src: DeviceBuffer, rowIds: Int32Array, cols: number): void;
  /**
   * Optional (mixture of experts; a backend without it refuses MoE models): dst row rowIds[i] = src row i, rows of
   * length cols (each expert's output rows go back to their (token, slot) places; rowIds are distinct)
   */
  scatterRows?(dst: DeviceBuffer, src: DeviceBuffer, rowIds: Int32Array, cols: number): void;
  /**
   * Optional (mixture of experts): out[r] = sum over s < k of weights[r * k + s] * src[r * k + s], for numRows rows
   * of length cols; each product rounded to f32 and added in slot order s = 0, 1 ... (llama.cpp build_moe_ffn: the
   * experts' outputs times their weights, then ggml_add of each slot's view in turn)
   */
  weightedRowSum?(out: DeviceBuffer, src: DeviceBuffer, weights: Float32Array, numRows: number, k: number, cols: number): void;
  /**
   * Optional (LoRA; a backend without it refuses adapters): out[r] += s.scale * s.bt^T (s.a x[r]) for each row r of
   * out [numRows, nOut] and x [numRows, nIn] whose slot s = slots[rowSlots[r]] is not null (rowSlots[r] -1: none),
   * each product rounded to f32 and added after the matmul (llama.cpp build_lora_mm; vLLM punica: one adapter per row)
   */
  loraDelta?(out: DeviceBuffer, x: DeviceBuffer, numRows: number, nIn: number, nOut: number, rowSlots: Int32Array, slots: readonly (LoraPairBuffers | null)[]): void;

  dispose(): void;

  /**
   * Optional (WebGPU): the k largest values of each row of src [numRows, cols] and their column ids, value descending
   * (ties: the lower id first), read back without the rows themselves (greedy sampling needs k = 1). Rows with fewer
   * than k finite values pad with id -1. @example const { ids } = await backend.topK!(logits, 1, vocabSize, 1);
   */
  topK?(src: DeviceBuffer, numRows: number, cols: number, k: number): Promise<TopK>;

  /**
   * Optional (WebGPU): compile every kernel for these weight types (default: all) now, by running each op once on tiny
   * inputs; the KV cache is untouched. GPU drivers compile at first use (lavapipe: seconds per shader), so call it
   * after loading the weights rather than paying on the first request.
   */
  warmUp?(types?: readonly GgmlType[]): Promise<void>;

  /**
   * Optional (WebGPU): resolves with a one-line reason if the device is lost while in use (never after dispose).
   * Every later call throws that reason. The engine should fail its running requests and mark /health unhealthy.
   */
  readonly lost?: Promise<string>;
}
