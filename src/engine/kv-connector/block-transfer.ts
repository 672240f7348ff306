/**
 * Whole KV blocks between the primary pool (the runner's own layout, inside the kernels' memory) and plain bytes that
 * can live anywhere else: host memory, a file, later a socket to another process (vLLM's KV connector worker side,
 * vllm/distributed/kv_transfer/kv_connector/v1/base.py save_kv_layer / start_load_kv, reduced to whole blocks).
 * One block's bytes are [layer, K|V, the backend's block layout]; the bytes of several blocks are those, block after
 * block. Same backend, model and --kv-cache-dtype only: the bytes carry no header.
 */
import type { ModelRunner } from "../../model/model-batch.ts";

export class KvBlockTransfer {
  /** bytes of one block over all layers, K and V */
  readonly blockBytes: number;

  constructor(private readonly runner: ModelRunner, blockSize: number) {
    this.blockBytes = runner.kvBytesPerBlock(blockSize);
  }

  /** The blocks' bytes, [blockIds.length, blockBytes]. */
  read(blockIds: readonly number[]): Uint8Array {
    const data = this.runner.exportKvBlocks(Int32Array.from(blockIds));
    if (data.length !== blockIds.length * this.blockBytes) throw new Error(`KV block transfer: runner gave ${data.length} bytes for ${blockIds.length} blocks of ${this.blockBytes}`);
    return data;
  }

  /** Writes [blockIds.length, blockBytes] bytes into the blocks. */
  write(blockIds: readonly number[], data: Uint8Array): void {
    if (data.length !== blockIds.length * this.blockBytes) throw new Error(`KV block transfer: ${data.length} bytes for ${blockIds.length} blocks of ${this.blockBytes}`);
    this.runner.importKvBlocks(Int32Array.from(blockIds), data);
  }

  /** Block `i` of a multi-block byte run, without a copy. */
  slice(data: Uint8Array, i: number): Uint8Array {
    return data.subarray(i * this.blockBytes, (i + 1) * this.blockBytes);
  }
}
