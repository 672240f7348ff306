/**
 * The batched forward pass over the Backend seam: all tokens of a ragged batch (prefill chunks and decode tokens of
 * many sequences) go through each layer together, as rows of one matrix. Only attention looks across rows, and it is
 * told where each sequence's rows are. Same math, in the same order, as `reference-forward.ts`.
 *
 * x = embed(tokens) (* sqrt(dim): gemma3), then per layer, for all numTokens rows at once:
 *   xb = rmsnorm(x) ; q,k,v = xb.W (+bias) ; QK-norm ; rope(q,k, positions; the layer's angles: rope-scaling.ts) ;
 *   kvStore(k,v -> slots of the layer's KV cache group) ;
 *   xb = attention(q, cache; a sliding layer's window; every position of the sequence: gemma-embedding; gpt-oss: the
 *   heads' sink logits in the softmax's denominator) ;
 *   x += xb.Wo (+bias: gpt-oss) (post-norm'd: gemma3) ;
 *   xb = rmsnorm(x) ; x += (act(xb.Wgate) * xb.Wup).Wdown (post-norm'd: gemma3), act = silu or tanh-GELU, or with
 *   experts (qwen3moe, olmoe, granitemoe, gpt-oss) x += the routed experts' FFNs of xb (moe-ffn.ts)
 * then gather the rows that want logits, and only for them: logits = rmsnorm(x).Wout.
 * A step longer than the backend's maxRowsPerPass goes through all of this in passes of that many rows
 * (forwardPasses: llama.cpp's n_ubatch), with the same bits.
 * LoRA: with adapters in slots (lora-slots.ts), each adapted matmul's rows gain their own slot's B (A x) right after
 * the product, before any bias (llama.cpp build_lora_mm; vLLM's punica kernels, one adapter per row).
 */
import type { AttentionSequence, Backend, DeviceBuffer, RopeAngles, Weight, WeightSource } from "../backend/backend.ts";
import { dequantizeTensor } from "../tensor/dtypes.ts";
import type { KvCacheGroups } from "./kv-cache-groups.ts";
import type { LoraTargetName } from "../lora/lora-targets.ts";
import { LoraSlots } from "./lora-slots.ts";
import { layerSlidingWindow, type ModelConfig } from "./model-config.ts";
import { allocMoeScratch, freeMoeScratch, loadExperts, moeFfn, moeUnsupported, type ExpertHandles, type MoeScratch } from "./moe-ffn.ts";
import { layerRopeAngles } from "./rope-scaling.ts";
import { mropeStreamAngles } from "./mrope.ts";
import type { ModelWeights } from "./weights.ts";

/** One step's flattened inputs, built by the runner from a ModelBatch. */
export interface ForwardInputs {
  /** [numTokens] */
  readonly tokenIds: Int32Array;
  /** [numTokens] position of each token in its sequence */
  readonly positions: Int32Array;
  /** [numGroups][numTokens] KV cache slot of each token in each KV cache group's blocks */
  readonly slots: readonly Int32Array[];
  /** [numGroups] the sequences, with each group's block tables */
  readonly sequences: readonly (readonly AttentionSequence[])[];
  /** which group and slot each layer's K/V use (one group: layer l in slot l) */
  readonly kvGroups: KvCacheGroups;
  /** [numLogitRows] token rows whose logits are wanted, in output order */
  readonly logitRows: Int32Array;
  /**
   * pooling models: return the final hidden states of every row, after the output norm ([numTokens, dim], llama.cpp's
   * t_embd "result_norm"), instead of logits; logitRows is then unused
   */
  readonly hiddenStates?: boolean;
  /** rows whose input embeddings are given ([row][dim] blocks over the step's rows); the step then runs as one pass */
  readonly inputEmbeddings?: readonly { readonly row: number; readonly data: Float32Array }[];
  /** [numTokens] the LoRA slot each row reads (-1: the base model); absent: no row has an adapter */
  readonly loraSlots?: Int32Array;
  /** M-RoPE (qwen2vl): [4][numTokens] each row's t, y, x, e positions (model/mrope.ts); absent: `positions` in all four */
  readonly ropePositions?: Int32Array;
}

/** One pass: the step's rows [firstRow, firstRow + inputs.tokenIds.length) as inputs of their own. */
export interface ForwardPass {
  readonly firstRow: number;
  readonly inputs: ForwardInputs;
  /** [inputs.logitRows.length] where each of this pass's logit rows goes in the step's logits */
  readonly outputIndex: Int32Array;
}

/**
 * One step's rows cut into passes of at most `maxRows` rows, in row order, that run one after another through all
 * the layers (llama.cpp's micro-batches: n_ubatch rows of an n_batch batch, llama_context::decode). Each op of a pass
 * then works on maxRows rows of activations, which stay in a core's L2, instead of streaming a long prompt's rows
 * from memory once per weight row group. The results are the one-pass bits: every op but attention works row by
 * row, and a pass's attention reads only KV rows that an earlier pass, or its own kvStore, has written (causal
 * attention: a bidirectional model's step is never cut).
 * @example for (const pass of forwardPasses(inputs, 512)) await forward.run(pass.inputs);
 */
export function forwardPasses(inputs: ForwardInputs, maxRows: number): ForwardPass[] {
  const numTokens = inputs.tokenIds.length;
  if (!(Number.isInteger(maxRows) && maxRows > 0)) throw new Error(`forwardPasses: ${maxRows} rows per pass`);
  const passes: ForwardPass[] = [];
  for (let first = 0; first < numTokens; first += maxRows) {
    const end = Math.min(numTokens, first + maxRows);
    // each KV cache group's sequences, cut to this pass's rows; the block tables stay whole (a row sees every key before it)
    const sequences = inputs.sequences.map((group) => {
      const cut: AttentionSequence[] = [];
      for (const s of group) {
        const from = Math.max(s.rowStart, first);
        const to = Math.min(s.rowStart + s.numRows, end);
        if (from < to) cut.push({ rowStart: from - first, numRows: to - from, startPos: s.startPos + (from - s.rowStart), blockTable: s.blockTable });
      }
      return cut;
    });
    const outputIndex: number[] = [];
    const logitRows: number[] = [];
    inputs.logitRows.forEach((row, j) => {
      if (row >= first && row < end) {
        outputIndex.push(j);
        logitRows.push(row - first);
      }
    });
    passes.push({
      firstRow: first,
      inputs: {
        tokenIds: inputs.tokenIds.subarray(first, end),
        positions: inputs.positions.subarray(first, end),
        slots: inputs.slots.map((groupSlots) => groupSlots.subarray(first, end)),
        sequences,
        kvGroups: inputs.kvGroups,
        logitRows: Int32Array.from(logitRows),
        hiddenStates: inputs.hiddenStates,
        loraSlots: inputs.loraSlots?.subarray(first, end),
        ...(inputs.ropePositions !== undefined ? { ropePositions: sliceStreams(inputs.ropePositions, numTokens, first, end) } : {}),
      },
      outputIndex: Int32Array.from(outputIndex),
    });
  }
  return passes;
}

/** rows [first, end) of each of the 4 position streams of [4][numTokens] */
function sliceStreams(streams: Int32Array, numTokens: number, first: number, end: number): Int32Array {
  const out = new Int32Array(4 * (end - first));
  for (let s = 0; s < 4; s++) out.set(streams.subarray(s * numTokens + first, s * numTokens + end), s * (end - first));
  return out;
}

/** Called as weights are uploaded: bytes done and bytes in all. */
export type LoadProgress = (loadedBytes: number, totalBytes: number) => void;

/** Bytes of every distinct weight tensor (a tied output counts once; stacked experts count whole). */
function modelBytes(weights: ModelWeights): number {
  const all = new Set<WeightSource>([weights.tokenEmbd, weights.output, weights.outputNorm]);
  for (const layer of weights.layers) for (const w of Object.values(layer)) if (w !== null) all.add(w);
  let total = 0;
  for (const w of all) total += w.data.length;
  return total;
}

interface LayerHandles {
  attnNorm: Weight; wq: Weight; wk: Weight; wv: Weight; wo: Weight;
  bq: Weight | null; bk: Weight | null; bv: Weight | null;
  qNorm: Weight | null; kNorm: Weight | null;
  ffnNorm: Weight; wGate: Weight | null; wUp: Weight | null; wDown: Weight | null;
  /** mixture of experts: the router and each expert (moe-ffn.ts); null: the dense FFN above */
  experts: ExpertHandles | null;
  attnPostNorm: Weight | null; ffnPostNorm: Weight | null;
  /** gpt-oss: each head's sink logit [numHeads] and attn_output's bias [dim] */
  sinks: Weight | null; bo: Weight | null;
}

/** Activation buffers for up to `numTokens` rows and `numLogitRows` logit rows (llama2.c RunState, batched). */
interface Scratch {
  readonly numTokens: number;
  readonly numLogitRows: number;
  readonly x: DeviceBuffer; // [numTokens, dim] residual stream
  readonly xb: DeviceBuffer; // [numTokens, max(dim, qDim)] normed input, then attention output
  readonly xb2: DeviceBuffer; // [numTokens, dim] a branch's output before the residual add
  readonly q: DeviceBuffer; // [numTokens, qDim]
  readonly k: DeviceBuffer; // [numTokens, kvDim]
  readonly v: DeviceBuffer; // [numTokens, kvDim]
  readonly qNormed: DeviceBuffer; // [numTokens, qDim] (QK-norm output)
  readonly kNormed: DeviceBuffer; // [numTokens, kvDim]
  readonly gate: DeviceBuffer; // [numTokens, hiddenDim]
  readonly up: DeviceBuffer; // [numTokens, hiddenDim]
  readonly act: DeviceBuffer; // [numTokens, hiddenDim] silu(gate) * up
  readonly gathered: DeviceBuffer; // [numLogitRows, dim]
  readonly gatheredNormed: DeviceBuffer; // [numLogitRows, dim]
  readonly logits: DeviceBuffer; // [numLogitRows, vocabSize]
  readonly moe: MoeScratch | null; // the routed FFN's buffers (moe-ffn.ts)
}

/**
 * The model's weights on a backend plus the activation buffers; `run` computes one step.
 * @example const fwd = new BatchedForward(config, weights, backend); const logits = await fwd.run(inputs);
 */
export class BatchedForward {
  private readonly tokenEmbd: Weight;
  private readonly layers: LayerHandles[];
  private readonly outputNorm: Weight;
  private readonly output: Weight;
  /** [numLayers] each layer's rope angles, null for no rope */
  private readonly angles: (RopeAngles | null)[];
  /** qwen2vl: [numLayers] each layer's angles split by position stream (mropeStreamAngles); null: plain rope */
  private readonly streamAngles: ({ stream: number; angles: RopeAngles }[] | null)[] | null;
  private scratch: Scratch | null = null;
  /** the resident LoRA adapters (enableLora), or null */
  private loraSlots: LoraSlots | null = null;

  /** `onProgress(loadedBytes, totalBytes)` is called after each weight is uploaded (a progress bar for large models) */
  constructor(readonly config: ModelConfig, weights: ModelWeights, private readonly backend: Backend, onProgress?: LoadProgress) {
    const totalBytes = modelBytes(weights);
    let loadedBytes = 0;
    const load = (w: WeightSource): Weight => {
      const handle = backend.loadWeight(w);
      loadedBytes += w.data.length;
      onProgress?.(loadedBytes, totalBytes);
      return handle;
    };
    const maybe = (w: WeightSource | null): Weight | null => (w === null ? null : load(w));
    const moe = config.moe;
    if (moe !== undefined) {
      const why = moeUnsupported(backend, moe.oaiExperts === true);
      if (why !== null) throw new Error(why);
    }
    if (config.attentionSinks === true && backend.attentionSinks !== true) throw new Error(`the ${backend.name} backend does not run ${config.architecture} (no attention sinks); use the CPU (WASM) backend`);
    this.tokenEmbd = load(weights.tokenEmbd);
    this.output = weights.output === weights.tokenEmbd ? this.tokenEmbd : load(weights.output);
    this.outputNorm = load(weights.outputNorm);
    this.angles = layerRopeAngles(config, weights.ropeFactors == null ? null : dequantizeTensor(weights.ropeFactors));
    const sections = config.ropeSections;
    this.streamAngles = sections === undefined ? null : this.angles.map((a) => (a === null ? null : mropeStreamAngles(a, sections)));
    this.layers = weights.layers.map((l) => ({
      attnNorm: load(l.attnNorm), wq: load(l.wq), wk: load(l.wk), wv: load(l.wv), wo: load(l.wo),
      bq: maybe(l.bq), bk: maybe(l.bk), bv: maybe(l.bv), qNorm: maybe(l.qNorm), kNorm: maybe(l.kNorm),
      ffnNorm: load(l.ffnNorm), wGate: maybe(l.wGate), wUp: maybe(l.wUp), wDown: maybe(l.wDown),
      experts: moe === undefined || l.ffnGateInp == null ? null : loadExperts(moe, l, load),
      attnPostNorm: maybe(l.attnPostNorm), ffnPostNorm: maybe(l.ffnPostNorm),
      sinks: maybe(l.attnSinks ?? null), bo: maybe(l.bo ?? null),
    }));
  }

  /** the LoRA slots (enableLora), or null */
  get lora(): LoraSlots | null {
    return this.loraSlots;
  }

  /** The --max-loras slots adapters are loaded into (throws one line on a backend without the per-row kernel). */
  enableLora(maxLoras: number): LoraSlots {
    if (this.loraSlots === null) this.loraSlots = new LoraSlots(this.backend, maxLoras, this.config.numLayers);
    return this.loraSlots;
  }

  /**
   * Allocates the buffers for steps of up to `numTokens` rows and `numLogitRows` logit rows (the engine calls it at
   * start-up with its largest step); a failure names what was asked for.
   */
  reserve(numTokens: number, numLogitRows: number): void {
    const { dim, hiddenDim, vocabSize } = this.config;
    numTokens = Math.min(numTokens, this.backend.maxRowsPerPass ?? numTokens);
    numLogitRows = Math.min(numLogitRows, numTokens);
    try {
      this.ensureScratch(numTokens, numLogitRows);
    } catch (e) {
      const floatsPerToken = 4 * dim + 2 * this.config.numHeads * this.config.headDim + 4 * this.config.numKvHeads * this.config.headDim + 3 * hiddenDim;
      const mib = ((numTokens * floatsPerToken + numLogitRows * (2 * dim + vocabSize)) * 4) / 2 ** 20;
      throw new Error(`the activations of a ${numTokens}-token step with ${numLogitRows} logit rows (${mib.toFixed(0)} MiB) do not fit beside the weights and the KV cache (${e instanceof Error ? e.message : String(e)}); lower --max-num-batched-tokens or --kv-cache-memory`);
    }
  }

  /** Buffers grow to the largest step seen so far and are then reused. */
  private ensureScratch(numTokens: number, numLogitRows: number): Scratch {
    const s = this.scratch;
    if (s !== null && s.numTokens >= numTokens && s.numLogitRows >= numLogitRows) return s;
    if (s !== null) this.freeScratch(s);
    const n = Math.max(numTokens, s?.numTokens ?? 0);
    const m = Math.max(numLogitRows, s?.numLogitRows ?? 0, 1);
    const { dim, hiddenDim, vocabSize } = this.config;
    const qDim = this.config.numHeads * this.config.headDim;
    const kvDim = this.config.numKvHeads * this.config.headDim;
    const b = this.backend;
    const next: Scratch = {
      numTokens: n,
      numLogitRows: m,
      x: b.alloc(n * dim),
      xb: b.alloc(n * Math.max(dim, qDim)),
      xb2: b.alloc(n * dim),
      q: b.alloc(n * qDim),
      k: b.alloc(n * kvDim),
      v: b.alloc(n * kvDim),
      qNormed: b.alloc(this.config.hasQkNorm ? n * qDim : 1),
      kNormed: b.alloc(this.config.hasQkNorm ? n * kvDim : 1),
      // a mixture-of-experts model has no dense FFN
      gate: b.alloc(this.config.moe === undefined ? n * hiddenDim : 1),
      up: b.alloc(this.config.moe === undefined ? n * hiddenDim : 1),
      act: b.alloc(this.config.moe === undefined ? n * hiddenDim : 1),
      gathered: b.alloc(m * dim),
      gatheredNormed: b.alloc(m * dim),
      logits: b.alloc(m * vocabSize),
      moe: this.config.moe === undefined ? null : allocMoeScratch(b, this.config.moe, dim, n),
    };
    this.scratch = next;
    return next;
  }

  private freeScratch(s: Scratch): void {
    for (const buffer of [s.x, s.xb, s.xb2, s.q, s.k, s.v, s.qNormed, s.kNormed, s.gate, s.up, s.act, s.gathered, s.gatheredNormed, s.logits]) {
      this.backend.free(buffer);
    }
    if (s.moe !== null) freeMoeScratch(this.backend, s.moe);
  }

  /**
   * Returns logits [logitRows.length, vocabSize] (with `hiddenStates`: the normed rows [numTokens, dim]); the KV cache
   * must already be allocated on the backend.
   */
  async run(inputs: ForwardInputs): Promise<Float32Array> {
    const maxRows = this.backend.maxRowsPerPass;
    const n = inputs.tokenIds.length;
    // a bidirectional model's rows read the keys after them in the step: it always runs as one pass
    // given embeddings (an image's rows, which may see the keys after them): one pass too
    if (maxRows === undefined || n <= maxRows || this.config.bidirectional === true || (inputs.inputEmbeddings?.length ?? 0) > 0) return this.runPass(inputs);
    // a long step in passes of maxRows rows (forwardPasses): the same bits, each op's rows in L2
    const width = inputs.hiddenStates === true ? this.config.dim : this.config.vocabSize;
    const result = new Float32Array((inputs.hiddenStates === true ? n : inputs.logitRows.length) * width);
    for (const pass of forwardPasses(inputs, maxRows)) {
      const part = await this.runPass(pass.inputs);
      if (inputs.hiddenStates === true) result.set(part, pass.firstRow * width);
      else pass.outputIndex.forEach((j, i) => result.set(part.subarray(i * width, (i + 1) * width), j * width));
    }
    return result;
  }

  /** One pass of all the layers over every row of `inputs`. */
  private async runPass(inputs: ForwardInputs): Promise<Float32Array> {
    const c = this.config;
    const b = this.backend;
    const n = inputs.tokenIds.length;
    const numLogitRows = inputs.logitRows.length;
    const { dim, hiddenDim, headDim, numHeads, numKvHeads, rmsEps } = c;
    if (n === 0) return new Float32Array(0);
    const s = this.ensureScratch(n, numLogitRows);
    const matmuls = (outs: DeviceBuffer[], ws: Weight[], x: DeviceBuffer): void => {
      if (b.matmulShared) b.matmulShared(outs, ws, x, n);
      else outs.forEach((out, i) => b.matmul(out, ws[i]!, x, n));
    };
    // each row's adapter update of layer l's `target`, after its matmul (out [n, w.rows] += B (A x [n, w.cols]))
    const rowSlots = this.loraSlots === null ? undefined : inputs.loraSlots;
    const lora = (l: number, target: LoraTargetName, out: DeviceBuffer, w: Weight, x: DeviceBuffer): void => {
      if (rowSlots === undefined) return;
      b.loraDelta!(out, x, n, w.cols, w.rows, rowSlots, this.loraSlots!.pairs(l, target));
    };

    b.embed(s.x, this.tokenEmbd, inputs.tokenIds);
    if (c.embeddingScale !== undefined && c.embeddingScale !== 1) b.scale(s.x, c.embeddingScale, n * dim);
    // given embeddings replace their rows after the scale (llama.cpp scales token inputs only)
    for (const e of inputs.inputEmbeddings ?? []) b.write(s.x, e.data, e.row * dim);
    // the kernels scale scores by 1 / sqrt(headDim); another attention scale pre-scales q (as llama.cpp gemma3.cpp does)
    const qScale = c.attentionScale === undefined ? 1 : c.attentionScale * Math.sqrt(headDim);
    // granite: each branch's output times residual_scale before its residual add
    const residualScale = c.residualScale ?? 1;

    for (let l = 0; l < this.layers.length; l++) {
      const w = this.layers[l]!;

      b.rmsNorm(s.xb, s.x, w.attnNorm, n, dim, rmsEps);
      matmuls([s.q, s.k, s.v], [w.wq, w.wk, w.wv], s.xb);
      lora(l, "attn_q", s.q, w.wq, s.xb);
      lora(l, "attn_k", s.k, w.wk, s.xb);
      lora(l, "attn_v", s.v, w.wv, s.xb);
      if (w.bq && w.bk && w.bv) {
        b.addBias(s.q, w.bq, n);
        b.addBias(s.k, w.bk, n);
        b.addBias(s.v, w.bv, n);
      }
      let q = s.q;
      let k = s.k;
      if (w.qNorm && w.kNorm) {
        // every head is a row of length headDim; olmoe: every token's whole q (k) is one row
        if (c.qkNormFullWidth === true) {
          b.rmsNorm(s.qNormed, s.q, w.qNorm, n, numHeads * headDim, rmsEps);
          b.rmsNorm(s.kNormed, s.k, w.kNorm, n, numKvHeads * headDim, rmsEps);
        } else {
          b.rmsNorm(s.qNormed, s.q, w.qNorm, n * numHeads, headDim, rmsEps);
          b.rmsNorm(s.kNormed, s.k, w.kNorm, n * numKvHeads, headDim, rmsEps);
        }
        q = s.qNormed;
        k = s.kNormed;
      }
      const angles = this.angles[l]!;
      const byStream = inputs.ropePositions !== undefined ? this.streamAngles?.[l] : undefined;
      if (byStream != null) {
        // M-RoPE: each position stream turns its own pairs (llama.cpp ggml_rope_multi)
        for (const { stream, angles: a } of byStream) {
          const positions = inputs.ropePositions!.subarray(stream * n, (stream + 1) * n);
          b.rope(q, positions, numHeads, headDim, a, c.ropeNeox);
          b.rope(k, positions, numKvHeads, headDim, a, c.ropeNeox);
        }
      } else if (angles !== null) {
        b.rope(q, inputs.positions, numHeads, headDim, angles, c.ropeNeox);
        b.rope(k, inputs.positions, numKvHeads, headDim, angles, c.ropeNeox);
      }
      if (qScale !== 1) b.scale(q, qScale, n * numHeads * headDim);
      // the layer's K/V live in its slot of its group's blocks (kv-cache-groups.ts)
      const group = inputs.kvGroups.layerGroup[l]!;
      const slot = inputs.kvGroups.layerSlot[l]!;
      b.kvStore(slot, k, s.v, inputs.slots[group]!);
      // only a layer with sinks passes them: a backend without the parameter runs every other model as before
      if (w.sinks !== null) b.attention(s.xb, q, slot, numHeads, inputs.sequences[group]!, layerSlidingWindow(c, l), c.bidirectional === true, w.sinks);
      else b.attention(s.xb, q, slot, numHeads, inputs.sequences[group]!, layerSlidingWindow(c, l), c.bidirectional === true);
      b.matmul(s.xb2, w.wo, s.xb, n);
      lora(l, "attn_output", s.xb2, w.wo, s.xb);
      if (w.bo) b.addBias(s.xb2, w.bo, n);
      // post-norms write to another buffer: WebGPU cannot bind one buffer as both input and output
      if (w.attnPostNorm) b.rmsNorm(s.xb, s.xb2, w.attnPostNorm, n, dim, rmsEps);
      if (residualScale !== 1) b.scale(w.attnPostNorm ? s.xb : s.xb2, residualScale, n * dim);
      b.add(s.x, s.x, w.attnPostNorm ? s.xb : s.xb2, n * dim);

      b.rmsNorm(s.xb, s.x, w.ffnNorm, n, dim, rmsEps);
      if (w.experts !== null) await moeFfn(b, c.moe!, dim, w.experts, s.moe!, s.xb2, s.xb, n);
      else {
        matmuls([s.gate, s.up], [w.wGate!, w.wUp!], s.xb);
        lora(l, "ffn_gate", s.gate, w.wGate!, s.xb);
        lora(l, "ffn_up", s.up, w.wUp!, s.xb);
        if (c.ffnActivation === "gelu_tanh") b.geluMul(s.act, s.gate, s.up, n * hiddenDim);
        else b.siluMul(s.act, s.gate, s.up, n * hiddenDim);
        b.matmul(s.xb2, w.wDown!, s.act, n);
        lora(l, "ffn_down", s.xb2, w.wDown!, s.act);
      }
      if (w.ffnPostNorm) b.rmsNorm(s.xb, s.xb2, w.ffnPostNorm, n, dim, rmsEps);
      if (residualScale !== 1) b.scale(w.ffnPostNorm ? s.xb : s.xb2, residualScale, n * dim);
      b.add(s.x, s.x, w.ffnPostNorm ? s.xb : s.xb2, n * dim);
    }

    if (inputs.hiddenStates === true) {
      b.rmsNorm(s.xb, s.x, this.outputNorm, n, dim, rmsEps);
      return b.read(s.xb, n * dim);
    }
    if (numLogitRows === 0) return new Float32Array(0);
    b.gatherRows(s.gathered, s.x, inputs.logitRows, dim);
    b.rmsNorm(s.gatheredNormed, s.gathered, this.outputNorm, numLogitRows, dim, rmsEps);
    b.matmul(s.logits, this.output, s.gatheredNormed, numLogitRows);
    // granite: logits / logit_scale (ggml_scale by its inverse)
    if (c.logitScale !== undefined) b.scale(s.logits, Math.fround(1 / c.logitScale), numLogitRows * c.vocabSize);
    return b.read(s.logits, numLogitRows * c.vocabSize);
  }

  /** Frees the activation buffers (the weights go with the backend). */
  dispose(): void {
    this.loraSlots?.dispose();
    this.loraSlots = null;
    if (this.scratch !== null) this.freeScratch(this.scratch);
    this.scratch = null;
  }
}
