/**
 * The oracle: a plain forward pass in the style of llama2.c's `forward()`. One token at a time, a contiguous f32 KV
 * cache, every weight dequantized to f32 up front. Slow on purpose: every fast path (the batched runner, the WASM and
 * WebGPU kernels) is tested against this, so it must stay simple enough to check by reading.
 *
 * x = embedding(token) (* sqrt(dim): gemma3), then per layer (paper order):
 *   xb = rmsnorm(x) ; q,k,v = xb.Wq,Wk,Wv (+bias: qwen2) ; per-head rmsnorm on q,k (qwen3, gemma3) ; rope(q,k)
 *   (the layer's angles: rope-scaling.ts; none in smollm3's no-rope layers) ;
 *   cache k,v at pos ; xb = attention(q, cache[0..pos], or the last `window` positions on a sliding layer) ;
 *   x += xb.Wo (rmsnorm'd first: gemma3 post-attention norm) ;
 *   xb = rmsnorm(x) ; x += (act(xb.Wgate) * xb.Wup).Wdown (rmsnorm'd first: gemma3 post-FFN norm), act = silu or tanh-GELU,
 *   or with experts (qwen3moe, olmoe, granitemoe) x += the k routed experts' SwiGLU FFNs of xb, weighted (moe-routing.ts)
 *   (+ granitemoe's shared expert) ; granite scales each branch by residual_scale before its add
 * then logits = rmsnorm(x).Wout (granite: / logit_scale).
 * gemma3's layers alternate: sliding-window layers with their own rope base, and global ones (llama.cpp gemma3.cpp).
 * A bidirectional model (gemma-embedding) runs one whole sequence at a time instead: `encode(tokens)`.
 */
import type { RopeAngles, WeightSource } from "../backend/backend.ts";
import { dequantizeTensor, type GgmlType } from "../tensor/dtypes.ts";
import { layerRopeFreqBase, layerSlidingWindow, type ModelConfig } from "./model-config.ts";
import { layerRopeAngles } from "./rope-scaling.ts";
import { mropePairStreams, mropeThetas, textMropePosition, type MropePosition } from "./mrope.ts";
import { routeExperts } from "./moe-routing.ts";
import { addInPlace, gelu, matmul, rmsnorm, rope, silu, softmax, softmaxWithSink, swigluOai } from "./reference-ops.ts";
import { expertRows, type ModelWeights } from "./weights.ts";
import { loraScale, loraUpdate, type LoraAdapter } from "../lora/lora-adapter.ts";
import type { LoraTargetName } from "../lora/lora-targets.ts";

/** A matrix dequantized to f32 [rows, cols] row-major (rows = output features), and the type it came from. */
interface Matrix {
  readonly data: Float32Array;
  readonly type: GgmlType;
}

/** One layer's weights as f32. */
interface LayerF32 {
  attnNorm: Float32Array; // [dim]
  wq: Matrix; // [qDim, dim]
  wk: Matrix; // [kvDim, dim]
  wv: Matrix; // [kvDim, dim]
  wo: Matrix; // [dim, qDim]
  bq: Float32Array | null; // [qDim]
  bk: Float32Array | null; // [kvDim]
  bv: Float32Array | null; // [kvDim]
  qNorm: Float32Array | null; // [headDim]
  kNorm: Float32Array | null; // [headDim]
  ffnNorm: Float32Array; // [dim]
  wGate: Matrix | null; // [hiddenDim, dim] (null: experts)
  wUp: Matrix | null; // [hiddenDim, dim]
  wDown: Matrix | null; // [dim, hiddenDim]
  experts: ExpertsF32 | null;
  /** gpt-oss: the sink logit of each head [numHeads] and attn_output's bias [dim] */
  sinks: Float32Array | null;
  bo: Float32Array | null;
  attnPostNorm: Float32Array | null; // [dim]
  ffnPostNorm: Float32Array | null; // [dim]
}

/** A mixture-of-experts layer's router and experts, one matrix per expert. */
interface ExpertsF32 {
  router: Matrix; // [expertCount, dim]
  gate: Matrix[]; // [expertCount][expertHiddenDim, dim]
  up: Matrix[]; // [expertCount][expertHiddenDim, dim]
  down: Matrix[]; // [expertCount][dim, expertHiddenDim]
  /** granitemoe (shared): the always-on expert, gate / up [sharedHiddenDim, dim], down [dim, sharedHiddenDim] */
  shared: { gate: Matrix; up: Matrix; down: Matrix } | null;
  /** gpt-oss: the router's bias [expertCount] and each expert's biases, gate / up [expertHiddenDim], down [dim] */
  biases: { router: Float32Array; gate: Float32Array[]; up: Float32Array[]; down: Float32Array[] } | null;
}

export interface ReferenceForwardOptions {
  /**
   * Rounds a matmul's input vector [cols] before the product, given the weight's type. Off by default (exact f32
   * math). The llama.cpp cross-check uses it to round like ggml's CPU kernels (q8_0 / q8_K / f16 activations), so
   * both sides compute the same numbers.
   */
  readonly roundMatmulInput?: (x: Float32Array, weightType: GgmlType) => Float32Array;
  /** Replaces the tanh-GELU of GeGLU models (the llama.cpp cross-check passes ggml's f16 table lookup); default `gelu`. */
  readonly gelu?: (x: number) => number;
  /**
   * Replaces the rope angles theta_i = pos * base^(-2i / ropeDim), i < ropeDim / 2 (the llama.cpp cross-check passes
   * ggml's f32 recurrence, which drifts with i and pos on wide heads such as gemma3's 256); default exact.
   */
  readonly ropeAngles?: (pos: number, ropeDim: number, freqBase: number) => ArrayLike<number>;
  /**
   * A LoRA adapter and its user scale: each adapted matmul gains y += scale * B (A x) right after the product, before
   * any bias (llama.cpp build_lora_mm; lora/lora-adapter.ts). A x reads the input unrounded (f32 A, as ggml multiplies it).
   */
  readonly lora?: { readonly adapter: LoraAdapter; readonly scale: number };
  /** Rounds each position's K and V [kvDim] as a cache stores them (the backends' f16 cache); default kept as f32. */
  readonly roundKvCache?: (x: Float32Array) => Float32Array;
}



/**
 * The reference model: call `forward(token, pos)` for pos = 0, 1, 2 ... of one sequence; `reset()` starts a new one.
 * @example const ref = new ReferenceForward(config, weights, 64); const logits = ref.forward(bosId, 0);
 */
export class ReferenceForward {
  private readonly tokenEmbd: Float32Array; // [vocabSize, dim]
  private readonly layers: LayerF32[];
  private readonly outputNorm: Float32Array; // [dim]
  private readonly output: Matrix; // [vocabSize, dim] (the same data as tokenEmbd when tied)
  private readonly roundInput: ReferenceForwardOptions["roundMatmulInput"];
  private readonly roundKv: ReferenceForwardOptions["roundKvCache"];
  private readonly gelu: (x: number) => number;
  private readonly ropeAnglesHook: ReferenceForwardOptions["ropeAngles"];
  private readonly lora: ReferenceForwardOptions["lora"];
  /** [numLayers] each layer's rope angles, null for no rope */
  private readonly layerAngles: (RopeAngles | null)[];
  /** gemma-embedding's sentence-transformers projections, or null */
  private readonly dense: { readonly dense2: Matrix; readonly dense3: Matrix } | null;

  // run state (llama2.c RunState)
  private readonly x: Float32Array; // [dim] the residual stream
  private readonly xb: Float32Array; // [max(dim, qDim)] normed input / attention output
  private readonly xb2: Float32Array; // [dim] a branch's output before the residual add
  private readonly hb: Float32Array; // [hiddenDim] gate
  private readonly hb2: Float32Array; // [hiddenDim] up
  private readonly q: Float32Array; // [qDim]
  private readonly k: Float32Array; // [kvDim]
  private readonly v: Float32Array; // [kvDim]
  private readonly att: Float32Array; // [maxSeqLen] one head's scores
  private readonly logits: Float32Array; // [vocabSize]
  private readonly keyCache: Float32Array; // [numLayers, maxSeqLen, kvDim]
  private readonly valueCache: Float32Array; // [numLayers, maxSeqLen, kvDim]

  constructor(readonly config: ModelConfig, weights: ModelWeights, readonly maxSeqLen = config.contextLength, options: ReferenceForwardOptions = {}) {
    const f32 = (w: WeightSource): Float32Array => dequantizeTensor(w);
    const maybe = (w: WeightSource | null): Float32Array | null => (w === null ? null : f32(w));
    const matrix = (w: WeightSource): Matrix => ({ data: f32(w), type: w.type });
    const maybeMatrix = (w: WeightSource | null): Matrix | null => (w === null ? null : matrix(w));
    const expertCount = config.moe?.expertCount ?? 0;
    // a [expertCount, n] bias tensor: expert e's bias is row e
    const perExpertRow = (w: WeightSource): Float32Array[] => {
      const all = f32(w);
      return Array.from({ length: expertCount }, (_, e) => all.subarray(e * w.cols, (e + 1) * w.cols));
    };
    const perExpert = (w: WeightSource | null | undefined): Matrix[] => Array.from({ length: expertCount }, (_, e) => matrix(expertRows(w!, e, expertCount)));
    this.tokenEmbd = f32(weights.tokenEmbd);
    this.output = weights.output === weights.tokenEmbd ? { data: this.tokenEmbd, type: weights.tokenEmbd.type } : matrix(weights.output);
    this.outputNorm = f32(weights.outputNorm);
    this.layers = weights.layers.map((l) => ({
      attnNorm: f32(l.attnNorm), wq: matrix(l.wq), wk: matrix(l.wk), wv: matrix(l.wv), wo: matrix(l.wo),
      bq: maybe(l.bq), bk: maybe(l.bk), bv: maybe(l.bv), qNorm: maybe(l.qNorm), kNorm: maybe(l.kNorm),
      ffnNorm: f32(l.ffnNorm), wGate: maybeMatrix(l.wGate), wUp: maybeMatrix(l.wUp), wDown: maybeMatrix(l.wDown),
      experts: l.ffnGateInp == null ? null : {
        router: matrix(l.ffnGateInp), gate: perExpert(l.ffnGateExps), up: perExpert(l.ffnUpExps), down: perExpert(l.ffnDownExps),
        shared: l.ffnGateShexp == null ? null : { gate: matrix(l.ffnGateShexp), up: matrix(l.ffnUpShexp!), down: matrix(l.ffnDownShexp!) },
        biases: l.ffnGateInpBias == null ? null : {
          router: f32(l.ffnGateInpBias), gate: perExpertRow(l.ffnGateExpsBias!), up: perExpertRow(l.ffnUpExpsBias!), down: perExpertRow(l.ffnDownExpsBias!),
        },
      },
      sinks: maybe(l.attnSinks ?? null), bo: maybe(l.bo ?? null),
      attnPostNorm: maybe(l.attnPostNorm), ffnPostNorm: maybe(l.ffnPostNorm),
    }));
    this.roundInput = options.roundMatmulInput;
    this.roundKv = options.roundKvCache;
    this.gelu = options.gelu ?? gelu;
    this.ropeAnglesHook = options.ropeAngles;
    this.lora = options.lora;
    this.layerAngles = layerRopeAngles(config, weights.ropeFactors == null ? null : f32(weights.ropeFactors));
    this.dense = weights.dense == null ? null : { dense2: matrix(weights.dense.dense2), dense3: matrix(weights.dense.dense3) };

    const { dim, hiddenDim, numLayers, vocabSize } = config;
    const qDim = config.numHeads * config.headDim;
    const kvDim = config.numKvHeads * config.headDim;
    this.x = new Float32Array(dim);
    this.xb = new Float32Array(Math.max(dim, qDim));
    this.xb2 = new Float32Array(dim);
    const ffnWidth = Math.max(hiddenDim, config.moe?.expertHiddenDim ?? 0, config.moe?.sharedHiddenDim ?? 0);
    this.hb = new Float32Array(ffnWidth);
    this.hb2 = new Float32Array(ffnWidth);
    this.q = new Float32Array(qDim);
    this.k = new Float32Array(kvDim);
    this.v = new Float32Array(kvDim);
    this.att = new Float32Array(maxSeqLen);
    this.logits = new Float32Array(vocabSize);
    this.keyCache = new Float32Array(numLayers * maxSeqLen * kvDim);
    this.valueCache = new Float32Array(numLayers * maxSeqLen * kvDim);
  }

  /** theta_i at pos: pos * thetas[i], or the hook's unscaled angles times the scaling's per-dim ratio thetas[i] / base^(-2i/d) */
  private ropeTheta(pos: number, angles: RopeAngles, freqBase: number): ArrayLike<number> {
    const hook = this.ropeAnglesHook;
    if (hook === undefined) return Float64Array.from(angles.thetas, (t) => pos * t);
    const unscaled = hook(pos, angles.ropeDim, freqBase);
    return Float64Array.from({ length: angles.ropeDim / 2 }, (_, i) => unscaled[i]! * (angles.thetas[i]! / Math.pow(freqBase, (-2 * i) / angles.ropeDim)));
  }

  /** out[rows] = W[rows, cols] . x[cols], with the optional input rounding */
  private matmul(out: Float32Array, x: Float32Array, w: Matrix, cols: number, rows: number): void {
    const input = this.roundInput ? this.roundInput(x.subarray(0, cols), w.type) : x;
    matmul(out, input, w.data, cols, rows);
  }

  /** out += the adapter's update of layer l's `target` for input x [cols] (nothing when the adapter leaves it alone) */
  private loraAdd(out: Float32Array, x: Float32Array, l: number, target: LoraTargetName): void {
    const pair = this.lora?.adapter.layers[l]?.get(target);
    if (pair === undefined) return;
    loraUpdate(out, x.subarray(0, pair.nIn), pair, loraScale(this.lora!.adapter.alpha, pair.rank, this.lora!.scale));
  }

  /** Forget the sequence (the cache is simply overwritten from pos 0). */
  reset(): void {
    this.keyCache.fill(0);
    this.valueCache.fill(0);
  }

  /**
   * Logits [vocabSize] for the next token after `token` at position `pos` (a view: copy it to keep it). `token` may be
   * an input embedding [dim] (an image's row); `ropePos` are M-RoPE's 4 streams (qwen2vl; default all `pos`).
   */
  forward(token: number | Float32Array, pos: number, ropePos?: MropePosition): Float32Array {
    this.advance(token, pos, ropePos);
    const { dim, rmsEps, vocabSize } = this.config;
    rmsnorm(this.x, this.x, this.outputNorm, dim, rmsEps);
    this.matmul(this.logits, this.x, this.output, dim, vocabSize);
    // granite: logits / logit_scale
    if (this.config.logitScale !== undefined) {
      const inv = Math.fround(1 / this.config.logitScale);
      for (let i = 0; i < vocabSize; i++) this.logits[i] = this.logits[i]! * inv;
    }
    return this.logits;
  }

  /** Runs `token` at `pos` through every layer (its K and V enter the cache) without the LM head: a prompt's prefix. */
  advance(token: number | Float32Array, pos: number, ropePos?: MropePosition): void {
    const c = this.config;
    if (c.bidirectional === true) throw new Error("reference forward: a bidirectional model sees later positions too: use encode(tokens)");
    if (pos < 0 || pos >= this.maxSeqLen) throw new Error(`reference forward: position ${pos} out of range [0, ${this.maxSeqLen})`);
    const kvDim = c.numKvHeads * c.headDim;
    const { x, xb, q, k, v } = this;
    if (typeof token === "number") this.embed(x, token);
    else x.set(token.subarray(0, c.dim)); // a given embedding is not scaled (llama.cpp scales token inputs only)
    for (let l = 0; l < this.layers.length; l++) {
      this.projectQkv(l, x, pos, ropePos);
      // cache k, v at pos
      const layerOffset = l * this.maxSeqLen * kvDim;
      const round = this.roundKv;
      this.keyCache.set(round === undefined ? k : round(k), layerOffset + pos * kvDim);
      this.valueCache.set(round === undefined ? v : round(v), layerOffset + pos * kvDim);
      // positions first..pos (first = 0, or pos - window + 1 on a sliding layer)
      const window = layerSlidingWindow(c, l);
      this.attend(xb, q, this.keyCache, this.valueCache, layerOffset, window > 0 ? Math.max(0, pos - window + 1) : 0, pos, this.layers[l]!.sinks);
      this.finishLayer(l, x, xb);
    }
  }

  /**
   * The final hidden states [tokens.length, dim] of one whole sequence after the output norm (llama.cpp's t_embd),
   * layer by layer: every position's q, k, v first, then each position's attention over the positions it sees. Causal
   * models see positions 0..p (the last `window` on a sliding layer); bidirectional ones (gemma-embedding) every
   * position, or on a sliding layer those within window / 2 of p either side (llama.cpp LLAMA_SWA_TYPE_SYMMETRIC).
   */
  encode(tokens: readonly number[]): Float32Array {
    const c = this.config;
    const { dim, rmsEps } = c;
    const n = tokens.length;
    const qDim = c.numHeads * c.headDim;
    const kvDim = c.numKvHeads * c.headDim;
    if (n > this.maxSeqLen) throw new Error(`reference forward: ${n} tokens are more than ${this.maxSeqLen} positions`);
    const xs = tokens.map((token) => { const x = new Float32Array(dim); this.embed(x, token); return x; }); // [n][dim]
    const qs = new Float32Array(n * qDim); // [n, qDim]
    const keys = new Float32Array(n * kvDim); // [n, kvDim]
    const values = new Float32Array(n * kvDim); // [n, kvDim]
    const out = new Float32Array(this.xb.length);
    for (let l = 0; l < this.layers.length; l++) {
      for (let p = 0; p < n; p++) {
        this.projectQkv(l, xs[p]!, p);
        qs.set(this.q, p * qDim);
        keys.set(this.k, p * kvDim);
        values.set(this.v, p * kvDim);
      }
      const window = layerSlidingWindow(c, l);
      const half = Math.floor(window / 2);
      for (let p = 0; p < n; p++) {
        const [first, last] = c.bidirectional === true
          ? (window > 0 ? [Math.max(0, p - half), Math.min(n - 1, p + half)] : [0, n - 1])
          : [window > 0 ? Math.max(0, p - window + 1) : 0, p];
        this.attend(out, qs.subarray(p * qDim, (p + 1) * qDim), keys, values, 0, first, last);
        this.finishLayer(l, xs[p]!, out);
      }
    }
    const hidden = new Float32Array(n * dim);
    for (let p = 0; p < n; p++) {
      rmsnorm(xs[p]!, xs[p]!, this.outputNorm, dim, rmsEps);
      hidden.set(xs[p]!, p * dim);
    }
    return hidden;
  }

  /**
   * A pooled vector [dim] through the sentence-transformers projections dense_2 then dense_3 (gemma-embedding;
   * llama.cpp build_dense_out, after pooling, before normalisation); the vector itself when the model has none.
   */
  projectPooled(pooled: Float32Array): Float32Array {
    const d = this.dense;
    if (d === null) return pooled;
    const features = this.config.denseFeatures!;
    const mid = new Float32Array(features);
    this.matmul(mid, pooled, d.dense2, this.config.dim, features);
    const out = new Float32Array(this.config.dim);
    this.matmul(out, mid, d.dense3, features, this.config.dim);
    return out;
  }

  /** x = embedding(token) (* sqrt(dim): gemma3) */
  private embed(x: Float32Array, token: number): void {
    const c = this.config;
    if (!Number.isInteger(token) || token < 0 || token >= c.vocabSize) throw new Error(`reference forward: token id ${token} out of range [0, ${c.vocabSize})`);
    x.set(this.tokenEmbd.subarray(token * c.dim, (token + 1) * c.dim));
    const embeddingScale = c.embeddingScale ?? 1;
    for (let i = 0; i < c.dim; i++) x[i] = x[i]! * embeddingScale;
  }

  /** this.q, this.k, this.v of layer l for the residual x at pos: qkv (+ bias), QK-norm, rope */
  private projectQkv(l: number, x: Float32Array, pos: number, ropePos?: MropePosition): void {
    const c = this.config;
    const { dim, headDim, numHeads, numKvHeads, rmsEps } = c;
    const qDim = numHeads * headDim;
    const kvDim = numKvHeads * headDim;
    const w = this.layers[l]!;
    const { xb, q, k, v } = this;
    rmsnorm(xb, x, w.attnNorm, dim, rmsEps);
    this.matmul(q, xb, w.wq, dim, qDim);
    this.matmul(k, xb, w.wk, dim, kvDim);
    this.matmul(v, xb, w.wv, dim, kvDim);
    this.loraAdd(q, xb, l, "attn_q");
    this.loraAdd(k, xb, l, "attn_k");
    this.loraAdd(v, xb, l, "attn_v");
    if (w.bq && w.bk && w.bv) {
      addInPlace(q, w.bq);
      addInPlace(k, w.bk);
      addInPlace(v, w.bv);
    }
    if (w.qNorm && w.kNorm) {
      // per head (qwen3, gemma3), or over the whole of q and of k (olmoe)
      const width = c.qkNormFullWidth === true ? numHeads * headDim : headDim;
      for (let h = 0; h < (numHeads * headDim) / width; h++) rmsnorm(q, q, w.qNorm, width, rmsEps, h * width);
      const kWidth = c.qkNormFullWidth === true ? numKvHeads * headDim : headDim;
      for (let h = 0; h < (numKvHeads * headDim) / kWidth; h++) rmsnorm(k, k, w.kNorm, kWidth, rmsEps, h * kWidth);
    }
    const angles = this.layerAngles[l]!;
    if (angles !== null) {
      const base = layerRopeFreqBase(c, l);
      const theta = c.ropeSections === undefined ? this.ropeTheta(pos, angles, base)
        : mropeThetas(ropePos ?? textMropePosition(pos), mropePairStreams(c.ropeSections, angles.ropeDim), (p) => this.ropeTheta(p, angles, base));
      rope(q, numHeads, headDim, angles.ropeDim, theta, angles.mscale, c.ropeNeox);
      rope(k, numKvHeads, headDim, angles.ropeDim, theta, angles.mscale, c.ropeNeox);
    }
  }

  /**
   * out [qDim] = multi-head attention of q over key / value rows first..last (row t at base + t * kvDim); query head h
   * reads kv head h / groupSize (GQA)
   */
  private attend(out: Float32Array, q: Float32Array, keys: Float32Array, values: Float32Array, base: number, first: number, last: number, sinks: Float32Array | null = null): void {
    const c = this.config;
    const { headDim, numHeads, numKvHeads } = c;
    const kvDim = numKvHeads * headDim;
    const groupSize = numHeads / numKvHeads;
    const att = this.att;
    const scale = c.attentionScale ?? 1 / Math.sqrt(headDim);
    for (let h = 0; h < numHeads; h++) {
      const qOffset = h * headDim;
      const kvHeadOffset = Math.floor(h / groupSize) * headDim;
      for (let t = first; t <= last; t++) {
        const kOffset = base + t * kvDim + kvHeadOffset;
        let score = 0;
        for (let i = 0; i < headDim; i++) score += q[qOffset + i]! * keys[kOffset + i]!;
        att[t - first] = score * scale;
      }
      // gpt-oss: the head's sink logit joins the denominator only (ggml_soft_max_ext with sinks)
      if (sinks === null) softmax(att, last - first + 1);
      else softmaxWithSink(att, last - first + 1, sinks[h]!);
      for (let i = 0; i < headDim; i++) out[qOffset + i] = 0;
      for (let t = first; t <= last; t++) {
        const vOffset = base + t * kvDim + kvHeadOffset;
        const a = att[t - first]!;
        for (let i = 0; i < headDim; i++) out[qOffset + i]! += a * values[vOffset + i]!;
      }
    }
  }

  /** x += attnOut.Wo (post-norm'd: gemma3), then x += the FFN of rmsnorm(x): SwiGLU, or GeGLU (gemma3) */
  private finishLayer(l: number, x: Float32Array, attnOut: Float32Array): void {
    const c = this.config;
    const { dim, hiddenDim, headDim, numHeads, rmsEps } = c;
    const w = this.layers[l]!;
    const { xb, xb2, hb, hb2 } = this;
    this.matmul(xb2, attnOut, w.wo, numHeads * headDim, dim);
    this.loraAdd(xb2, attnOut, l, "attn_output");
    if (w.bo) addInPlace(xb2, w.bo);
    if (w.attnPostNorm) rmsnorm(xb2, xb2, w.attnPostNorm, dim, rmsEps);
    this.residualScale(xb2);
    addInPlace(x, xb2);

    rmsnorm(xb, x, w.ffnNorm, dim, rmsEps);
    if (w.experts !== null) {
      this.experts(xb2, xb, w.experts);
    } else {
      this.matmul(hb, xb, w.wGate!, dim, hiddenDim);
      this.matmul(hb2, xb, w.wUp!, dim, hiddenDim);
      this.loraAdd(hb, xb, l, "ffn_gate");
      this.loraAdd(hb2, xb, l, "ffn_up");
      const act = c.ffnActivation === "gelu_tanh" ? this.gelu : silu;
      for (let i = 0; i < hiddenDim; i++) hb[i] = act(hb[i]!) * hb2[i]!;
      this.matmul(xb2, hb, w.wDown!, hiddenDim, dim);
      this.loraAdd(xb2, hb, l, "ffn_down");
    }
    if (w.ffnPostNorm) rmsnorm(xb2, xb2, w.ffnPostNorm, dim, rmsEps);
    this.residualScale(xb2);
    addInPlace(x, xb2);
  }

  /**
   * out [dim] = the routed experts' SwiGLU FFNs of xb, weighted, added in slot order (llama.cpp build_moe_ffn):
   * router logits = xb.Wrouter -> softmax -> the k best (moe-routing.ts) -> sum_s w_s * down_e(silu(gate_e.xb) * up_e.xb)
   */
  private experts(out: Float32Array, xb: Float32Array, w: ExpertsF32): void {
    const moe = this.config.moe!;
    const { dim } = this.config;
    const width = moe.expertHiddenDim;
    const logits = new Float32Array(moe.expertCount);
    this.matmul(logits, xb, w.router, dim, moe.expertCount);
    if (w.biases) addInPlace(logits, w.biases.router);
    const { ids, weights } = routeExperts(logits, 1, moe);
    const { hb, hb2 } = this;
    const y = new Float32Array(dim);
    out.fill(0);
    for (let s = 0; s < moe.expertUsedCount; s++) {
      const e = ids[s]!;
      this.matmul(hb, xb, w.gate[e]!, dim, width);
      this.matmul(hb2, xb, w.up[e]!, dim, width);
      if (w.biases) {
        for (let i = 0; i < width; i++) hb[i] = hb[i]! + w.biases.gate[e]![i]!;
        for (let i = 0; i < width; i++) hb2[i] = hb2[i]! + w.biases.up[e]![i]!;
        for (let i = 0; i < width; i++) hb[i] = swigluOai(hb[i]!, hb2[i]!);
      } else {
        for (let i = 0; i < width; i++) hb[i] = silu(hb[i]!) * hb2[i]!;
      }
      this.matmul(y, hb, w.down[e]!, width, dim);
      if (w.biases) addInPlace(y, w.biases.down[e]!);
      for (let i = 0; i < dim; i++) out[i] = out[i]! + Math.fround(y[i]! * weights[s]!);
    }
    // granitemoe (shared): a plain SwiGLU FFN of the same input, added to the routed experts' sum
    if (w.shared !== null) {
      const sh = moe.sharedHiddenDim!;
      this.matmul(hb, xb, w.shared.gate, dim, sh);
      this.matmul(hb2, xb, w.shared.up, dim, sh);
      for (let i = 0; i < sh; i++) hb[i] = silu(hb[i]!) * hb2[i]!;
      this.matmul(y, hb, w.shared.down, sh, dim);
      addInPlace(out, y);
    }
  }

  /** granite: a branch's output times residual_scale before its residual add */
  private residualScale(branch: Float32Array): void {
    const r = this.config.residualScale;
    if (r === undefined || r === 1) return;
    for (let i = 0; i < branch.length; i++) branch[i] = branch[i]! * r;
  }
}
