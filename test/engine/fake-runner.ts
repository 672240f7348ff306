/**
 * A deterministic fake model behind the real ModelRunner contract, for engine tests. Its "KV cache" holds, per slot, a
 * running hash of the token and of the previous position's slot (read through the block table), and the logits at a
 * position are a pseudo-random vector drawn from that hash. So the logits depend only on the sequence's tokens, and any
 * wrong block id, stale block or skipped position changes the output: batch-invariance, prefix-cache and preemption
 * tests compare real data paths, not bookkeeping.
 */
import type { BatchLogits, ModelBatch, ModelRunner } from "../../src/model/model-batch.ts";
import type { GgufPoolingType, ModelConfig } from "../../src/model/model-config.ts";

export interface FakeRunnerOptions {
  readonly vocabSize?: number;
  readonly contextLength?: number;
  /** this token's logit becomes huge at positions >= eosAtLen - 1 (the sequence reaches eosAtLen tokens with it) */
  readonly eosId?: number;
  readonly eosAtLen?: number;
  /** wait this long in every execute (to abort mid-step from another thread) */
  readonly stepDelayMs?: number;
  /** throw on this execute call (1-based), to test engine death */
  readonly failOnStep?: number;
  /** an embedding model's GGUF pooling type (the engine then pools; hidden states come from the same hashes) */
  readonly poolingType?: GgufPoolingType;
  /** a bidirectional model (gemma-embedding): ModelConfig.bidirectional, and every chunk must be a whole prompt */
  readonly bidirectional?: boolean;
}

export const FAKE_SEED = 0x9e3779b9;

function mix(prev: number, tokenId: number, pos: number): number {
  let h = Math.imul(prev ^ tokenId, 0x85ebca6b) ^ Math.imul(pos + 1, 0xc2b2ae35);
  h ^= h >>> 13;
  h = Math.imul(h, 0x27d4eb2f);
  return (h ^ (h >>> 16)) >>> 0;
}

export class FakeRunner implements ModelRunner {
  readonly config: ModelConfig;
  /** positions computed so far (prefix-cache hits must lower this) */
  numTokensComputed = 0;
  numExecuteCalls = 0;
  /** [numExecuteCalls] sequences per call */
  readonly batchSizes: number[] = [];
  /** [numExecuteCalls] logit rows each call returned (the engine's per-step logits allocation) */
  readonly logitRowsPerCall: number[] = [];
  /** what the engine reserved at start-up (reserveActivations), null before */
  reserved: { numTokens: number; numLogitRows: number } | null = null;
  private kv = new Uint32Array(0); // [numBlocks * blockSize] running hash per slot
  private written = new Uint8Array(0); // [numBlocks * blockSize] 1 once a slot was written
  private blockSize = 16;

  constructor(private readonly options: FakeRunnerOptions = {}) {
    const vocabSize = options.vocabSize ?? 97;
    this.config = {
      architecture: "llama", name: "fake", vocabSize, dim: 8, hiddenDim: 16, numLayers: 1, numHeads: 1, numKvHeads: 1,
      headDim: 8, ropeDim: 8, ropeFreqBase: 10000, ropeNeox: false, rmsEps: 1e-5, contextLength: options.contextLength ?? 512,
      tiedEmbeddings: true, hasQkvBias: false, hasQkNorm: false, ...(options.poolingType ? { poolingType: options.poolingType } : {}),
      ...(options.bidirectional === true ? { bidirectional: true } : {}),
    };
  }

  kvBytesPerBlock(blockSize: number): number {
    return blockSize * 4;
  }

  allocateKvCache(numBlocks: number, blockSize: number): void {
    this.blockSize = blockSize;
    this.kv = new Uint32Array(numBlocks * blockSize);
    this.written = new Uint8Array(numBlocks * blockSize);
  }

  reserveActivations(numTokens: number, numLogitRows: number): void {
    this.reserved = { numTokens, numLogitRows };
  }

  async execute(batch: ModelBatch): Promise<BatchLogits> {
    this.numExecuteCalls++;
    this.batchSizes.push(batch.sequences.length);
    if (this.options.failOnStep === this.numExecuteCalls) throw new Error("fake runner: injected failure");
    if (this.options.bidirectional === true && batch.sequences.some((s) => s.startPos !== 0)) throw new Error("fake runner: a bidirectional model got a chunk that does not start at 0");
    if (this.options.stepDelayMs) await new Promise((r) => setTimeout(r, this.options.stepDelayMs));
    const V = this.config.vocabSize;
    const rows: Float32Array[] = [];
    const hidden: Float32Array[] = []; // with batch.hiddenStates: [numTokens][dim], from each position's hash
    const rowStart = new Int32Array(batch.sequences.length).fill(-1);
    batch.sequences.forEach((seq, s) => {
      const slot = (pos: number): number => {
        const block = seq.blockTable[Math.floor(pos / this.blockSize)];
        if (block === undefined) throw new Error(`fake runner: position ${pos} has no block`);
        return block * this.blockSize + (pos % this.blockSize);
      };
      if (seq.logits !== "none") rowStart[s] = rows.length;
      for (let j = 0; j < seq.tokenIds.length; j++) {
        const pos = seq.startPos + j;
        let prev = FAKE_SEED;
        if (pos > 0) {
          const p = slot(pos - 1);
          if (!this.written[p]) throw new Error(`fake runner: position ${pos - 1} read before it was written`);
          prev = this.kv[p]!;
        }
        const h = mix(prev, seq.tokenIds[j]!, pos);
        this.kv[slot(pos)] = h;
        this.written[slot(pos)] = 1;
        this.numTokensComputed++;
        const isLast = j === seq.tokenIds.length - 1;
        if (batch.hiddenStates === true) hidden.push(this.logitsFor(h, pos, this.config.dim));
        if (seq.logits === "all" || (seq.logits === "last" && isLast)) rows.push(this.logitsFor(h, pos, V));
      }
    });
    this.logitRowsPerCall.push(rows.length);
    if (this.reserved !== null && rows.length > this.reserved.numLogitRows) throw new Error(`fake runner: ${rows.length} logit rows, ${this.reserved.numLogitRows} reserved`);
    const logits = new Float32Array(rows.length * V); // [numRows, vocabSize]
    rows.forEach((r, i) => logits.set(r, i * V));
    if (batch.hiddenStates === true) {
      const dim = this.config.dim;
      const out = new Float32Array(hidden.length * dim); // [numTokens, dim]
      hidden.forEach((r, i) => out.set(r, i * dim));
      return { logits, rowStart, hidden: out };
    }
    return { logits, rowStart };
  }

  /** [vocabSize] values in [-4, 4) from the position's hash */
  private logitsFor(hash: number, pos: number, V: number): Float32Array {
    const row = new Float32Array(V);
    let s = hash || 1;
    for (let i = 0; i < V; i++) {
      s ^= s << 13; s ^= s >>> 17; s ^= s << 5;
      row[i] = ((s >>> 0) / 0x100000000) * 8 - 4;
    }
    const { eosId, eosAtLen } = this.options;
    if (eosId !== undefined && eosAtLen !== undefined && eosId < V) row[eosId] = pos + 2 >= eosAtLen ? 100 : -100;
    return row;
  }

  exportKvBlocks(blockIds: Int32Array): Uint8Array {
    const out = new Uint32Array(blockIds.length * this.blockSize);
    blockIds.forEach((b, i) => out.set(this.kv.subarray(b * this.blockSize, (b + 1) * this.blockSize), i * this.blockSize));
    return new Uint8Array(out.buffer);
  }

  importKvBlocks(blockIds: Int32Array, data: Uint8Array): void {
    const src = new Uint32Array(data.buffer, data.byteOffset, data.byteLength / 4);
    blockIds.forEach((b, i) => {
      this.kv.set(src.subarray(i * this.blockSize, (i + 1) * this.blockSize), b * this.blockSize);
      this.written.fill(1, b * this.blockSize, (b + 1) * this.blockSize);
    });
  }

  dispose(): void {}
}

/** Entry point for the engine Worker's `module` runner spec. */
export function createRunner(options: FakeRunnerOptions): ModelRunner {
  return new FakeRunner(options);
}
