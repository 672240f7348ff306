/**
 * The ModelRunner: turns the engine's ModelBatch (token ids + block tables) into flat per-token arrays (positions,
 * KV slots, attention ranges, logit rows) and runs the batched forward on the backend it was given.
 * The only place block ids become memory: slot = blockTable[pos / blockSize] * blockSize + pos % blockSize, per KV cache
 * group (kv-cache-groups.ts): each layer reads and writes its group's table, in its slot of the group's blocks.
 */
import type { AttentionSequence, Backend, KvCacheDtype } from "../backend/backend.ts";
import { NULL_BLOCK, type BatchLogits, type ModelBatch, type ModelRunner, type SequenceChunk } from "./model-batch.ts";
import type { ModelConfig } from "./model-config.ts";
import { BatchedForward, type ForwardInputs, type LoadProgress } from "./forward.ts";
import type { LoraAdapter } from "../lora/lora-adapter.ts";
import type { LoraSlots } from "./lora-slots.ts";
import { singleKvCacheGroup, type KvCacheGroups } from "./kv-cache-groups.ts";
import type { ModelWeights } from "./weights.ts";
import { dequantizeTensor } from "../tensor/dtypes.ts";


interface KvLayout {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly groups: KvCacheGroups;
}

/**
 * A ModelRunner over any Backend (reference, WASM, WebGPU: the caller picks, see backend/create-backend.ts).
 * @example const runner = new Runner(config, weights, new ReferenceBackend()); runner.allocateKvCache(64, 16);
 */
/** [numTokens] each row's LoRA slot (-1: none), or undefined when no sequence has an adapter. */
function loraRows(batch: ModelBatch, numTokens: number): Int32Array | undefined {
  if (!batch.sequences.some((s) => s.loraSlot !== undefined && s.loraSlot >= 0)) return undefined;
  const rows = new Int32Array(numTokens).fill(-1);
  let row = 0;
  for (const s of batch.sequences) {
    rows.fill(s.loraSlot ?? -1, row, row + s.tokenIds.length);
    row += s.tokenIds.length;
  }
  return rows;
}

export class Runner implements ModelRunner {
  private readonly forward: BatchedForward;
  private kv: KvLayout | null = null;
  /** bytes one position takes in the backend's KV cache in one layer, K and V (f32 or f16: the backend's choice) */
  private readonly kvBytesPerPositionLayer: number;

  /** gemma-embedding's dense_2 [F, dim] and dense_3 [dim, F] as f32, or null (a few MB: plain matrix-vector products) */
  private readonly dense: { readonly dense2: Float32Array; readonly dense3: Float32Array } | null;

  constructor(
    readonly config: ModelConfig, weights: ModelWeights, private readonly backend: Backend, onProgress?: LoadProgress,
    /** --kv-cache-dtype: f16 (auto) or the 8-bit cache */
    private readonly kvDtype: KvCacheDtype = "f16",
  ) {
    this.forward = new BatchedForward(config, weights, backend, onProgress);
    this.dense = weights.dense == null ? null : { dense2: dequantizeTensor(weights.dense.dense2), dense3: dequantizeTensor(weights.dense.dense3) };
    // the backend keeps its KV layout to itself: measure one position with a 1-block, 1-slot cache of every layer
    // (replaced at allocateKvCache; the split backend places layers per memory, so all of them), the same bytes per layer
    const { numLayers, numKvHeads, headDim } = config;
    backend.allocKvCache({ dtype: kvDtype, numLayers, numBlocks: 1, blockSize: 1, numKvHeads, headDim });
    this.kvBytesPerPositionLayer = backend.exportKvBlocks(Int32Array.of(0)).length / numLayers;
  }

  kvBytesPerBlock(blockSize: number, numLayers = this.config.numLayers): number {
    return blockSize * numLayers * this.kvBytesPerPositionLayer;
  }

  allocateKvCache(numBlocks: number, blockSize: number, groups: KvCacheGroups = singleKvCacheGroup(this.config.numLayers)): void {
    if (!Number.isInteger(numBlocks) || numBlocks <= 0 || !Number.isInteger(blockSize) || blockSize <= 0) {
      throw new Error(`allocateKvCache: numBlocks ${numBlocks} and blockSize ${blockSize} must be positive integers`);
    }
    if (groups.layerGroup.length !== this.config.numLayers) throw new Error(`allocateKvCache: KV cache groups for ${groups.layerGroup.length} layers, the model has ${this.config.numLayers}`);
    const { numKvHeads, headDim } = this.config;
    // every group's block has groupSize layer slots: one storage of groupSize layers serves all groups (vLLM KVCacheTensor shared_by)
    this.backend.allocKvCache({ dtype: this.kvDtype, numLayers: groups.groupSize, numBlocks, blockSize, numKvHeads, headDim });
    this.kv = { numBlocks, blockSize, groups };
  }

  /** Flattens the batch; throws on a malformed batch (an engine bug, not user input). */
  private flatten(batch: ModelBatch, kv: KvLayout): { inputs: ForwardInputs; rowStart: Int32Array } {
    const { blockSize, numBlocks, groups } = kv;
    const numGroups = groups.groups.length;
    let numTokens = 0;
    let numLogitRows = 0;
    for (const seq of batch.sequences) {
      numTokens += seq.tokenIds.length;
      numLogitRows += seq.logits === "all" ? seq.tokenIds.length : seq.logits === "last" ? 1 : 0;
    }
    const tokenIds = new Int32Array(numTokens); // [numTokens]
    const positions = new Int32Array(numTokens); // [numTokens]
    const slots = Array.from({ length: numGroups }, () => new Int32Array(numTokens)); // [numGroups][numTokens]
    const logitRows = new Int32Array(numLogitRows); // [numLogitRows]
    const rowStart = new Int32Array(batch.sequences.length); // [numSequences]
    const sequences: AttentionSequence[][] = Array.from({ length: numGroups }, () => []); // [numGroups][numSequences]
    const inputEmbeddings: { row: number; data: Float32Array }[] = [];
    // M-RoPE streams [4][numTokens], when a sequence gives them (the others' rows: their position in all four)
    const ropePositions = batch.sequences.some((seq) => seq.ropePositions !== undefined) ? new Int32Array(4 * numTokens) : null;
    let row = 0;
    let logitRow = 0;
    batch.sequences.forEach((seq, i) => {
      const count = seq.tokenIds.length;
      const endPos = seq.startPos + count;
      if (count === 0) throw new Error(`runner: sequence ${i} has no tokens`);
      // a bidirectional row sees later positions: the engine computes each prompt whole, in one step
      if (this.config.bidirectional === true && seq.startPos !== 0) throw new Error(`runner: sequence ${i} starts at position ${seq.startPos}; a bidirectional model computes a sequence in one step from position 0`);
      if (endPos > this.config.contextLength) {
        throw new Error(`runner: sequence ${i} reaches position ${endPos}, past the context length ${this.config.contextLength}`);
      }
      const tables = seq.blockTables ?? [seq.blockTable];
      if (tables.length !== numGroups) throw new Error(`runner: sequence ${i} has ${tables.length} block tables, the KV cache has ${numGroups} groups`);
      const blocksNeeded = Math.ceil(endPos / blockSize);
      tables.forEach((table, g) => {
        if (table.length < blocksNeeded) {
          throw new Error(`runner: sequence ${i} needs ${blocksNeeded} KV blocks for ${endPos} positions, its block table${numGroups > 1 ? ` of group ${g}` : ""} has ${table.length}`);
        }
        // a sliding group may have freed the blocks wholly behind the first key of the chunk's first row (vLLM null block)
        const window = groups.groups[g]!.slidingWindow;
        const firstLive = window > 0 ? Math.floor(Math.max(0, seq.startPos - window + 1) / blockSize) : 0;
        const mapped = new Int32Array(blocksNeeded); // [blocksNeeded] the null block reads as block 0, which is never touched
        for (let b = 0; b < blocksNeeded; b++) {
          const id = table[b]!;
          if (id === NULL_BLOCK && b < firstLive) continue;
          if (id < 0 || id >= numBlocks) throw new Error(`runner: sequence ${i} block id ${id} out of range [0, ${numBlocks})${numGroups > 1 ? ` in group ${g}` : ""}`);
          mapped[b] = id;
        }
        for (let t = 0; t < count; t++) {
          const pos = seq.startPos + t;
          slots[g]![row + t] = mapped[Math.floor(pos / blockSize)]! * blockSize + (pos % blockSize);
        }
        sequences[g]!.push(...attentionRanges(seq, row, mapped));
      });
      for (const id of seq.tokenIds) {
        if (id < 0 || id >= this.config.vocabSize) throw new Error(`runner: sequence ${i} token id ${id} out of range [0, ${this.config.vocabSize})`);
      }
      tokenIds.set(seq.tokenIds, row);
      for (const e of seq.inputEmbeddings ?? []) {
        if (e.row < 0 || e.numRows < 1 || e.row + e.numRows > count || e.data.length !== e.numRows * this.config.dim) {
          throw new Error(`runner: sequence ${i} has input embeddings for rows [${e.row}, ${e.row + e.numRows}) of ${e.data.length} floats; it has ${count} rows of width ${this.config.dim}`);
        }
        inputEmbeddings.push({ row: row + e.row, data: e.data });
      }
      for (let t = 0; t < count; t++) positions[row + t] = seq.startPos + t;
      if (ropePositions !== null) {
        const given = seq.ropePositions;
        if (given !== undefined && (given.length !== 4 * count || this.config.ropeSections === undefined)) {
          throw new Error(`runner: sequence ${i} gives ${given.length} M-RoPE positions for ${count} rows${this.config.ropeSections === undefined ? " to a model without M-RoPE" : ""}`);
        }
        for (let s = 0; s < 4; s++) for (let t = 0; t < count; t++) ropePositions[s * numTokens + row + t] = given !== undefined ? given[s * count + t]! : seq.startPos + t;
      }
      rowStart[i] = seq.logits === "none" ? -1 : logitRow;
      if (seq.logits === "all") for (let t = 0; t < count; t++) logitRows[logitRow++] = row + t;
      else if (seq.logits === "last") logitRows[logitRow++] = row + count - 1;
      row += count;
    });
    return {
      inputs: { tokenIds, positions, slots, sequences, kvGroups: groups, logitRows, ...(inputEmbeddings.length > 0 ? { inputEmbeddings } : {}), ...(ropePositions !== null ? { ropePositions } : {}) },
      rowStart,
    };
  }

  reserveActivations(numTokens: number, numLogitRows: number): void {
    this.forward.reserve(numTokens, numLogitRows);
  }

  async execute(batch: ModelBatch): Promise<BatchLogits> {
    if (this.kv === null) throw new Error("runner: allocateKvCache was not called");
    const { inputs, rowStart } = this.flatten(batch, this.kv);
    if (batch.hiddenStates === true) {
      const hidden = await this.forward.run({ ...inputs, hiddenStates: true });
      return { logits: new Float32Array(0), rowStart, hidden };
    }
    const loraSlots = loraRows(batch, inputs.tokenIds.length);
    const logits = await this.forward.run(loraSlots === undefined ? inputs : { ...inputs, loraSlots });
    return { logits, rowStart };
  }

  enableLora(maxLoras: number): void {
    this.forward.enableLora(maxLoras);
  }

  loadLora(slot: number, adapter: LoraAdapter, userScale = 1): void {
    this.loraSlots().load(slot, adapter, userScale);
  }

  unloadLora(slot: number): void {
    this.loraSlots().unload(slot);
  }

  private loraSlots(): LoraSlots {
    const slots = this.forward.lora;
    if (slots === null) throw new Error("runner: enableLora was not called");
    return slots;
  }

  projectPooled(pooled: Float32Array): Float32Array {
    const d = this.dense;
    if (d === null) return pooled;
    const { dim } = this.config;
    const features = this.config.denseFeatures!;
    const matVec = (w: Float32Array, x: Float32Array, rows: number, cols: number): Float32Array => {
      const y = new Float32Array(rows);
      for (let r = 0; r < rows; r++) {
        let acc = 0;
        for (let c = 0; c < cols; c++) acc += w[r * cols + c]! * x[c]!;
        y[r] = acc;
      }
      return y;
    };
    return matVec(d.dense3, matVec(d.dense2, pooled, features, dim), dim, features);
  }

  exportKvBlocks(blockIds: Int32Array): Uint8Array {
    return this.backend.exportKvBlocks(blockIds);
  }

  importKvBlocks(blockIds: Int32Array, data: Uint8Array): void {
    this.backend.importKvBlocks(blockIds, data);
  }

  dispose(): void {
    this.forward.dispose();
    this.backend.dispose();
  }
}

/**
 * A chunk's attention ranges starting at step row `row`: one causal range, or, where a span of given embeddings
 * attends ahead (Gemma 3's image, llama.cpp decodes it with causal attention off), each of its rows as a range of
 * one row at the span's last position, so it sees every key of the span (and, with a sliding window, the keys within
 * the window of the span's end).
 */
function attentionRanges(seq: SequenceChunk, row: number, blockTable: Int32Array): AttentionSequence[] {
  const spans = (seq.inputEmbeddings ?? []).filter((e) => e.attendAhead);
  if (spans.length === 0) return [{ rowStart: row, numRows: seq.tokenIds.length, startPos: seq.startPos, blockTable }];
  const out: AttentionSequence[] = [];
  let next = 0; // first chunk row not yet in a range
  for (const span of spans) {
    if (span.row > next) out.push({ rowStart: row + next, numRows: span.row - next, startPos: seq.startPos + next, blockTable });
    const lastPos = seq.startPos + span.row + span.numRows - 1;
    for (let r = 0; r < span.numRows; r++) out.push({ rowStart: row + span.row + r, numRows: 1, startPos: lastPos, blockTable });
    next = span.row + span.numRows;
  }
  if (next < seq.tokenIds.length) out.push({ rowStart: row + next, numRows: seq.tokenIds.length - next, startPos: seq.startPos + next, blockTable });
  return out;
}
