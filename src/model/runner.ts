/**
 * The ModelRunner: turns the engine's ModelBatch (token ids + block tables) into flat per-token arrays (positions,
 * KV slots, attention ranges, logit rows) and runs the batched forward on the backend it was given.
 * The only place block ids become memory: slot = blockTable[pos / blockSize] * blockSize + pos % blockSize.
 */
import type { AttentionSequence, Backend, KvCacheDtype } from "../backend/backend.ts";
import type { BatchLogits, ModelBatch, ModelRunner } from "./model-batch.ts";
import type { ModelConfig } from "./model-config.ts";
import { BatchedForward, type ForwardInputs, type LoadProgress } from "./forward.ts";
import type { ModelWeights } from "./weights.ts";


interface KvLayout {
  readonly numBlocks: number;
  readonly blockSize: number;
}

/**
 * A ModelRunner over any Backend (reference, WASM, WebGPU: the caller picks, see backend/create-backend.ts).
 * @example const runner = new Runner(config, weights, new ReferenceBackend()); runner.allocateKvCache(64, 16);
 */
export class Runner implements ModelRunner {
  private readonly forward: BatchedForward;
  private kv: KvLayout | null = null;
  /** bytes one position takes in the backend's KV cache, over all layers, K and V (f32 or f16: the backend's choice) */
  private readonly kvBytesPerPosition: number;

  constructor(
    readonly config: ModelConfig, weights: ModelWeights, private readonly backend: Backend, onProgress?: LoadProgress,
    /** --kv-cache-dtype: f16 (auto) or the 8-bit cache */
    private readonly kvDtype: KvCacheDtype = "f16",
  ) {
    this.forward = new BatchedForward(config, weights, backend, onProgress);
    // the backend keeps its KV layout to itself: measure one position with a 1-block, 1-slot cache (replaced at allocateKvCache)
    const { numLayers, numKvHeads, headDim } = config;
    backend.allocKvCache({ dtype: kvDtype, numLayers, numBlocks: 1, blockSize: 1, numKvHeads, headDim });
    this.kvBytesPerPosition = backend.exportKvBlocks(Int32Array.of(0)).length;
  }

  kvBytesPerBlock(blockSize: number): number {
    return blockSize * this.kvBytesPerPosition;
  }

  allocateKvCache(numBlocks: number, blockSize: number): void {
    if (!Number.isInteger(numBlocks) || numBlocks <= 0 || !Number.isInteger(blockSize) || blockSize <= 0) {
      throw new Error(`allocateKvCache: numBlocks ${numBlocks} and blockSize ${blockSize} must be positive integers`);
    }
    const { numLayers, numKvHeads, headDim } = this.config;
    this.backend.allocKvCache({ dtype: this.kvDtype, numLayers, numBlocks, blockSize, numKvHeads, headDim });
    this.kv = { numBlocks, blockSize };
  }

  /** Flattens the batch; throws on a malformed batch (an engine bug, not user input). */
  private flatten(batch: ModelBatch, kv: KvLayout): { inputs: ForwardInputs; rowStart: Int32Array } {
    const { blockSize, numBlocks } = kv;
    let numTokens = 0;
    let numLogitRows = 0;
    for (const seq of batch.sequences) {
      numTokens += seq.tokenIds.length;
      numLogitRows += seq.logits === "all" ? seq.tokenIds.length : seq.logits === "last" ? 1 : 0;
    }
    const tokenIds = new Int32Array(numTokens); // [numTokens]
    const positions = new Int32Array(numTokens); // [numTokens]
    const slots = new Int32Array(numTokens); // [numTokens]
    const logitRows = new Int32Array(numLogitRows); // [numLogitRows]
    const rowStart = new Int32Array(batch.sequences.length); // [numSequences]
    const sequences: AttentionSequence[] = [];
    let row = 0;
    let logitRow = 0;
    batch.sequences.forEach((seq, i) => {
      const count = seq.tokenIds.length;
      const endPos = seq.startPos + count;
      if (count === 0) throw new Error(`runner: sequence ${i} has no tokens`);
      if (endPos > this.config.contextLength) {
        throw new Error(`runner: sequence ${i} reaches position ${endPos}, past the context length ${this.config.contextLength}`);
      }
      const blocksNeeded = Math.ceil(endPos / blockSize);
      if (seq.blockTable.length < blocksNeeded) {
        throw new Error(`runner: sequence ${i} needs ${blocksNeeded} KV blocks for ${endPos} positions, its block table has ${seq.blockTable.length}`);
      }
      for (let b = 0; b < blocksNeeded; b++) {
        const id = seq.blockTable[b]!;
        if (id < 0 || id >= numBlocks) throw new Error(`runner: sequence ${i} block id ${id} out of range [0, ${numBlocks})`);
      }
      for (const id of seq.tokenIds) {
        if (id < 0 || id >= this.config.vocabSize) throw new Error(`runner: sequence ${i} token id ${id} out of range [0, ${this.config.vocabSize})`);
      }
      tokenIds.set(seq.tokenIds, row);
      for (let t = 0; t < count; t++) {
        const pos = seq.startPos + t;
        positions[row + t] = pos;
        slots[row + t] = seq.blockTable[Math.floor(pos / blockSize)]! * blockSize + (pos % blockSize);
      }
      sequences.push({ rowStart: row, numRows: count, startPos: seq.startPos, blockTable: seq.blockTable.subarray(0, blocksNeeded) });
      rowStart[i] = seq.logits === "none" ? -1 : logitRow;
      if (seq.logits === "all") for (let t = 0; t < count; t++) logitRows[logitRow++] = row + t;
      else if (seq.logits === "last") logitRows[logitRow++] = row + count - 1;
      row += count;
    });
    return { inputs: { tokenIds, positions, slots, sequences, logitRows }, rowStart };
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
    const logits = await this.forward.run(inputs);
    return { logits, rowStart };
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
