/// <reference types="@webgpu/types" />
/**
 * The paged KV cache on the GPU: per layer one K and one V buffer of f32 [numBlocks * blockSize, kvDim] (slot = block *
 * blockSize + offset), plus the optional host mirror (kv-mirror.ts) that keeps `exportBlocks` synchronous.
 * Block export / import use the reference backend's layout: [ids, layer, K|V, blockSize, kvDim] f32 bytes.
 * @example const kv = new GpuKvCache(device, enc, shape, true, createBuffer); kv.importBlocks(ids, bytes);
 */
import type { KvCacheShape } from "../backend.ts";
import { uploadable } from "./gpu-weight.ts";
import { KvMirror } from "./kv-mirror.ts";
import type { StepEncoder } from "./step-encoder.ts";

export class GpuKvCache {
  /** per layer: [numBlocks * blockSize, kvDim] f32 */
  readonly k: GPUBuffer[] = [];
  readonly v: GPUBuffer[] = [];
  /** host copy for the synchronous exportBlocks; null with mirrorKv off */
  readonly mirror: KvMirror | null;
  private readonly blockBytes: number;

  constructor(
    private readonly device: GPUDevice,
    private readonly enc: StepEncoder,
    readonly shape: KvCacheShape,
    mirrorKv: boolean,
    createBuffer: (sizeBytes: number, what: string) => GPUBuffer,
  ) {
    this.blockBytes = shape.blockSize * shape.numKvHeads * shape.headDim * 4;
    const layerBytes = shape.numBlocks * this.blockBytes;
    for (let l = 0; l < shape.numLayers; l++) {
      this.k.push(createBuffer(layerBytes, "the KV cache of one layer (lower --kv-cache-memory)"));
      this.v.push(createBuffer(layerBytes, "the KV cache of one layer (lower --kv-cache-memory)"));
    }
    this.mirror = mirrorKv ? new KvMirror(device, shape) : null;
  }

  private bytesFor(numBlocks: number): number {
    return numBlocks * this.shape.numLayers * 2 * this.blockBytes;
  }

  /** From the host mirror: needs mirrorKv and the step's read done (the mirror fills at each read). */
  exportBlocks(blockIds: Int32Array): Uint8Array {
    const { shape, mirror } = this;
    if (mirror === null) throw new Error("webgpu backend: exportKvBlocks needs mirrorKv (or call exportKvBlocksAsync)");
    if (mirror.behind) throw new Error("webgpu backend: exportKvBlocks before the step's read (the KV mirror is behind)");
    const blockFloats = this.blockBytes / 4;
    const out = new Float32Array(this.bytesFor(blockIds.length) / 4); // [ids, layer, K|V, blockSize, kvDim]
    let o = 0;
    for (const id of blockIds) {
      for (let l = 0; l < shape.numLayers; l++) {
        for (const part of [mirror.k[l]!, mirror.v[l]!]) {
          out.set(part.subarray(id * blockFloats, (id + 1) * blockFloats), o);
          o += blockFloats;
        }
      }
    }
    return new Uint8Array(out.buffer);
  }

  /** Straight from the GPU: copies the blocks into one staging buffer, runs the step, maps it. */
  async exportBlocksAsync(blockIds: Int32Array): Promise<Uint8Array> {
    const total = this.bytesFor(blockIds.length);
    if (total === 0) return new Uint8Array(0);
    const staging = this.device.createBuffer({ size: total, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    let o = 0;
    for (const id of blockIds) {
      for (let l = 0; l < this.shape.numLayers; l++) {
        for (const part of [this.k[l]!, this.v[l]!]) {
          this.enc.copy(part, id * this.blockBytes, staging, o, this.blockBytes);
          o += this.blockBytes;
        }
      }
    }
    this.enc.flush();
    try {
      await staging.mapAsync(GPUMapMode.READ);
      const out = new Uint8Array(staging.getMappedRange().slice(0));
      staging.unmap();
      await this.enc.checkErrors();
      return out;
    } finally {
      staging.destroy();
    }
  }

  importBlocks(blockIds: Int32Array, data: Uint8Array): void {
    const { shape, mirror, blockBytes } = this;
    const need = this.bytesFor(blockIds.length);
    if (data.length !== need) throw new Error(`importKvBlocks: ${data.length} bytes, expected ${need}`);
    // rows still on their way to the mirror would land after (and over) the imported ones
    if (mirror?.behind) throw new Error("webgpu backend: importKvBlocks before the step's read (the KV mirror is behind)");
    // queue writes land before unsubmitted commands: submit what was recorded first
    if (this.enc.numPending > 0) this.enc.flush();
    let o = 0;
    for (const id of blockIds) {
      for (let l = 0; l < shape.numLayers; l++) {
        for (const part of [this.k[l]!, this.v[l]!]) {
          this.device.queue.writeBuffer(part, id * blockBytes, uploadable(data), o, blockBytes);
          o += blockBytes;
        }
        if (mirror !== null) {
          const floats = new Float32Array(data.slice(o - 2 * blockBytes, o).buffer); // [K|V, blockSize, kvDim]
          mirror.k[l]!.set(floats.subarray(0, blockBytes / 4), (id * blockBytes) / 4);
          mirror.v[l]!.set(floats.subarray(blockBytes / 4), (id * blockBytes) / 4);
        }
      }
    }
  }

  /** Destroys the buffers; recorded ops that use them must have been submitted. */
  destroy(): void {
    for (const b of [...this.k, ...this.v]) b.destroy();
    this.mirror?.destroy();
  }
}
