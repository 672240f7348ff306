/// <reference types="@webgpu/types" />
/**
 * A host copy of the paged KV cache, so `exportKvBlocks` can stay synchronous as the Backend contract says (WebGPU has
 * no synchronous read-back). Each kvStore also copies its k / v rows into a staging buffer, in order with the step;
 * `drain` (run by every read, where the step's round trip happens anyway) maps it and scatters the rows into the
 * host arrays. So after a step's logits are read, the mirror equals the GPU cache. Costs one extra copy of the new
 * K/V rows per step and host memory equal to the cache; off with `mirrorKv: false` (then export throws).
 */
import type { KvCacheShape } from "../backend.ts";
import type { StepEncoder } from "./step-encoder.ts";

interface PendingRows {
  readonly layer: number;
  /** [numRows] cache slots of the rows */
  readonly slots: Int32Array;
  readonly staging: GPUBuffer;
  /** k rows at byteOffset, v rows right after */
  readonly byteOffset: number;
}

const INITIAL_STAGING_BYTES = 1 << 20;

export class KvMirror {
  /** per layer: [numBlocks * blockSize, kvDim] */
  readonly k: Float32Array[] = [];
  readonly v: Float32Array[] = [];
  readonly kvDim: number;
  private staging: GPUBuffer | null = null;
  private stagingBytes = 0;
  private usedBytes = 0;
  private pending: PendingRows[] = [];

  constructor(private readonly device: GPUDevice, readonly shape: KvCacheShape) {
    this.kvDim = shape.numKvHeads * shape.headDim;
    const layerFloats = shape.numBlocks * shape.blockSize * this.kvDim;
    for (let l = 0; l < shape.numLayers; l++) {
      this.k.push(new Float32Array(layerFloats));
      this.v.push(new Float32Array(layerFloats));
    }
  }

  /** true while rows stored on the GPU have not reached the host yet (until the next read) */
  get behind(): boolean {
    return this.pending.length > 0;
  }

  /** Records the copy of k, v [slots.length, kvDim] (just stored into `layer`) for the next drain. */
  record(enc: StepEncoder, layer: number, k: GPUBuffer, v: GPUBuffer, slots: Int32Array): void {
    const bytes = slots.length * this.kvDim * 4;
    if (bytes === 0) return;
    if (this.staging === null || this.usedBytes + 2 * bytes > this.stagingBytes) {
      // a fresh buffer; the old one stays listed in `pending` until drained
      this.stagingBytes = Math.max(INITIAL_STAGING_BYTES, 2 * this.stagingBytes, 4 * bytes);
      this.staging = this.device.createBuffer({ size: this.stagingBytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      this.usedBytes = 0;
    }
    enc.copy(k, 0, this.staging, this.usedBytes, bytes);
    enc.copy(v, 0, this.staging, this.usedBytes + bytes, bytes);
    this.pending.push({ layer, slots: slots.slice(), staging: this.staging, byteOffset: this.usedBytes });
    this.usedBytes += 2 * bytes;
  }

  /** Brings the host copy up to date; every copy recorded so far must have been submitted. */
  async drain(): Promise<void> {
    if (this.pending.length === 0) return;
    const pending = this.pending;
    this.pending = [];
    const kvDim = this.kvDim;
    for (const staging of new Set(pending.map((p) => p.staging))) {
      await staging.mapAsync(GPUMapMode.READ);
      const all = new Float32Array(staging.getMappedRange()); // [staging bytes / 4]
      for (const p of pending) {
        if (p.staging !== staging) continue;
        const n = p.slots.length * kvDim;
        const k = all.subarray(p.byteOffset / 4, p.byteOffset / 4 + n);
        const v = all.subarray(p.byteOffset / 4 + n, p.byteOffset / 4 + 2 * n);
        for (let i = 0; i < p.slots.length; i++) {
          this.k[p.layer]!.set(k.subarray(i * kvDim, (i + 1) * kvDim), p.slots[i]! * kvDim);
          this.v[p.layer]!.set(v.subarray(i * kvDim, (i + 1) * kvDim), p.slots[i]! * kvDim);
        }
      }
      staging.unmap();
      if (staging !== this.staging) staging.destroy();
    }
    this.usedBytes = 0;
  }

  destroy(): void {
    this.staging?.destroy();
    this.staging = null;
  }
}
