/// <reference types="@webgpu/types" />
/**
 * Records one step's dispatches into a single command encoder and submits them together (at a read, or when a host
 * write must land after the ops already recorded): no per-op round trip to the CPU.
 * Each dispatch takes its params from a uniform arena and its index data (token ids, slots, block tables) from a
 * storage arena; both are filled on the CPU and uploaded with one writeBuffer each just before the submit, which the
 * queue orders before the commands that read them.
 */

const SLOT_BYTES = 256; // minUniformBufferOffsetAlignment and minStorageBufferOffsetAlignment (WebGPU maximum)
const PARAM_SLOTS = 4096;
const INITIAL_DATA_BYTES = 4 << 20;
const MAX_GROUPS_PER_DIM = 65535;

export interface BufferRange { readonly buffer: GPUBuffer; readonly offset?: number; readonly size?: number }

/** (x, y) workgroup counts for `count` groups; shaders recover the index as wg.x + wg.y * groupsX. */
export function foldGroups(count: number): [number, number] {
  const x = Math.max(1, Math.min(count, MAX_GROUPS_PER_DIM));
  return [x, Math.max(1, Math.ceil(count / x))];
}

export class StepEncoder {
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private readonly params: GPUBuffer;
  private readonly paramWords = new Uint32Array((PARAM_SLOTS * SLOT_BYTES) / 4); // [PARAM_SLOTS, 64]
  private paramSlot = 0;
  private data: GPUBuffer;
  private dataWords: Uint32Array<ArrayBuffer>; // [data bytes / 4]
  private dataBytesUsed = 0;
  /** validation / out-of-memory errors of submitted steps, checked at the next read */
  private pendingErrors: Promise<GPUError | null>[] = [];
  /** dispatches recorded since the last submit */
  numPending = 0;

  constructor(private readonly device: GPUDevice) {
    this.params = device.createBuffer({ size: this.paramWords.byteLength, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    this.dataWords = new Uint32Array(INITIAL_DATA_BYTES / 4);
    this.data = this.createDataBuffer(INITIAL_DATA_BYTES);
  }

  private createDataBuffer(bytes: number): GPUBuffer {
    return this.device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  }

  private begin(): GPUCommandEncoder {
    if (this.encoder === null) {
      this.device.pushErrorScope("out-of-memory");
      this.device.pushErrorScope("validation");
      this.encoder = this.device.createCommandEncoder();
    }
    return this.encoder;
  }

  private computePass(): GPUComputePassEncoder {
    if (this.pass === null) this.pass = this.begin().beginComputePass();
    return this.pass;
  }

  /** Copies index data into the step's data arena; returns its binding range (256-byte aligned). */
  indexData(values: Int32Array | Uint32Array | readonly number[]): BufferRange {
    const bytes = Math.max(4, values.length * 4);
    const padded = Math.ceil(bytes / SLOT_BYTES) * SLOT_BYTES;
    if (this.dataBytesUsed + padded > this.dataWords.byteLength) {
      this.flush();
      if (padded > this.dataWords.byteLength) {
        // the old arena may still be read by submitted work: drop it to the GC rather than destroying it
        const size = Math.ceil((padded * 2) / SLOT_BYTES) * SLOT_BYTES;
        this.dataWords = new Uint32Array(size / 4);
        this.data = this.createDataBuffer(size);
      }
    }
    const offset = this.dataBytesUsed;
    this.dataWords.set(values, offset / 4);
    this.dataBytesUsed += padded;
    return { buffer: this.data, offset, size: bytes };
  }

  /** Records one dispatch: params (u32 words; f32 fields as their bits) at binding 0, then `bindings` at 1, 2, ...
   * (null: a binding the pipeline does not have, e.g. the output of an in-place variant). */
  dispatch(pipeline: GPUComputePipeline, paramWords: Uint32Array, bindings: readonly (BufferRange | null)[], numGroups: number): void {
    if (numGroups === 0) return;
    if (this.paramSlot === PARAM_SLOTS) this.flush();
    const slot = this.paramSlot++;
    this.paramWords.set(paramWords, (slot * SLOT_BYTES) / 4);
    const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: this.params, offset: slot * SLOT_BYTES, size: Math.max(16, Math.ceil(paramWords.byteLength / 16) * 16) } }];
    bindings.forEach((b, i) => b && entries.push({ binding: i + 1, resource: { buffer: b.buffer, offset: b.offset ?? 0, size: b.size } }));
    const bindGroup = this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
    const pass = this.computePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroup);
    const [x, y] = foldGroups(numGroups);
    pass.dispatchWorkgroups(x, y);
    this.numPending++;
  }

  /** Records a buffer copy in order with the dispatches. */
  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, sizeBytes: number): void {
    if (sizeBytes === 0) return;
    if (this.pass !== null) { this.pass.end(); this.pass = null; }
    this.begin().copyBufferToBuffer(src, srcOffset, dst, dstOffset, sizeBytes);
    this.numPending++;
  }

  /** Uploads the arenas and submits everything recorded; the GPU runs it while the CPU goes on. */
  flush(): void {
    if (this.encoder === null) return;
    if (this.pass !== null) { this.pass.end(); this.pass = null; }
    if (this.paramSlot > 0) this.device.queue.writeBuffer(this.params, 0, this.paramWords, 0, (this.paramSlot * SLOT_BYTES) / 4);
    if (this.dataBytesUsed > 0) this.device.queue.writeBuffer(this.data, 0, this.dataWords, 0, this.dataBytesUsed / 4);
    this.device.queue.submit([this.encoder.finish()]);
    this.encoder = null;
    this.pendingErrors.push(this.device.popErrorScope(), this.device.popErrorScope());
    this.paramSlot = 0;
    this.dataBytesUsed = 0;
    this.numPending = 0;
  }

  /** Throws the first GPU error of the steps submitted so far (one line). */
  async checkErrors(): Promise<void> {
    const pending = this.pendingErrors;
    this.pendingErrors = [];
    for (const error of await Promise.all(pending)) {
      if (error !== null) throw new Error(`webgpu: ${error.message.split("\n")[0]}`);
    }
  }

  destroy(): void {
    this.params.destroy();
    this.data.destroy();
  }
}
