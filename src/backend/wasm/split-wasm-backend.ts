/**
 * The WASM backend over several wasm32 memories, for a model larger than one (memory-plan.ts places a contiguous
 * range of layers, with their weights and KV blocks, in each). Every memory is a whole WasmBackend (its heap, its
 * kernel instance, the shared pool's threads through `forMemory(i)`), so every op runs the same kernels on the same
 * bytes as with one memory: the same bits. An op runs in the memory of its weight or its layer's KV; ops without
 * either (rope, silu, add, gather) run where the previous one ran.
 *
 * A buffer has a copy in every memory (allocated up front, so a step never allocates). Its contents are the extent
 * the last op wrote, in the memory that op ran in; an op in another memory first copies the extent it reads. In the
 * forward pass only the residual stream crosses, once per layer range: [numTokens, dim] floats, a few KB per token.
 * @example const backend = await createSplitWasmBackend({ threads: 2 }, plan); // plan.numMemories > 1
 */
import type { AttentionSequence, Backend, DeviceBuffer, KvCacheShape, RopeAngles, Weight, WeightSource } from "../backend.ts";
import type { MemoryPlan } from "./memory-plan.ts";
import { memoryOfTensor } from "./memory-plan.ts";
import type { WasmHeap } from "./wasm-memory.ts";
import { kvCacheBytesPerToken } from "./kv-cache-layout.ts";
import { createWasmBackends, type WasmBackend, type WasmBackendOptions } from "./wasm-backend.ts";
import { WasmBuffer } from "./wasm-weight.ts";

class SplitBuffer implements DeviceBuffer {
  /** floats of the contents (what the last op or write produced) */
  extent = 0;
  /** the memory that holds all `extent` floats */
  home = 0;
  constructor(
    readonly length: number,
    /** [numMemories] this buffer's copy in each memory */
    readonly parts: readonly WasmBuffer[],
    /** [numMemories] leading floats of the contents each copy holds */
    readonly valid: Float64Array,
  ) {}
}

class SplitWeight implements Weight {
  constructor(readonly memory: number, readonly inner: Weight) {}
  get rows(): number { return this.inner.rows; }
  get cols(): number { return this.inner.cols; }
  get type(): Weight["type"] { return this.inner.type; }
}

function asBuffer(b: DeviceBuffer): SplitBuffer {
  if (!(b instanceof SplitBuffer)) throw new Error("split wasm backend: buffer from another backend");
  return b;
}

function asWeight(w: Weight): SplitWeight {
  if (!(w instanceof SplitWeight)) throw new Error("split wasm backend: weight from another backend");
  return w;
}

export class SplitWasmBackend implements Backend {
  readonly name: string;
  /** every part's (they are the same kernels) */
  readonly maxRowsPerPass: number | undefined;
  readonly attentionSinks = true;
  /** the memory the last op ran in */
  private current = 0;
  private kvShape: KvCacheShape | null = null;

  constructor(
    private readonly parts: readonly WasmBackend[],
    private readonly heaps: readonly WasmHeap[],
    readonly plan: MemoryPlan,
  ) {
    this.name = parts[0]!.name;
    this.maxRowsPerPass = parts[0]!.maxRowsPerPass;
  }

  get numThreads(): number {
    return this.parts[0]!.numThreads;
  }

  /** Bytes in use per memory (weights, KV cache, activations). */
  get memoryBytesPerMemory(): number[] {
    return this.parts.map((p) => p.memoryBytes);
  }

  get memoryBytes(): number {
    return this.parts.reduce((sum, p) => sum + p.memoryBytes, 0);
  }

  /** This buffer's copy in memory `m`, holding at least `floats` leading floats of its contents (copied if need be). */
  private readIn(buffer: DeviceBuffer, m: number, floats: number): WasmBuffer {
    const b = asBuffer(buffer);
    const need = Math.min(floats, b.extent, b.length);
    const have = b.valid[m]!;
    if (have < need) {
      const src = this.heaps[b.home]!.floats;
      const from = b.parts[b.home]!.ptr / 4;
      this.heaps[m]!.floats.set(src.subarray(from + have, from + need), b.parts[m]!.ptr / 4 + have);
      b.valid[m] = need;
    }
    return b.parts[m]!;
  }

  /** An op in memory `m` is about to write `floats` leading floats of the buffer: they become its contents. */
  private writeIn(buffer: DeviceBuffer, m: number, floats: number): WasmBuffer {
    const b = asBuffer(buffer);
    b.valid.fill(0);
    b.extent = Math.min(floats, b.length);
    b.valid[m] = b.extent;
    b.home = m;
    return b.parts[m]!;
  }

  private on(m: number): WasmBackend {
    this.current = m;
    return this.parts[m]!;
  }

  loadWeight(source: WeightSource): Weight {
    const m = memoryOfTensor(this.plan, source.name);
    return new SplitWeight(m, this.parts[m]!.loadWeight(source));
  }

  alloc(numFloats: number): DeviceBuffer {
    return new SplitBuffer(numFloats, this.parts.map((p) => p.alloc(numFloats) as WasmBuffer), new Float64Array(this.parts.length));
  }

  free(buffer: DeviceBuffer): void {
    const b = asBuffer(buffer);
    b.parts.forEach((part, m) => this.parts[m]!.free(part));
  }

  write(dst: DeviceBuffer, src: Float32Array, dstOffset = 0): void {
    const b = asBuffer(dst);
    this.parts[b.home]!.write(b.parts[b.home]!, src, dstOffset);
    b.extent = Math.max(b.extent, dstOffset + src.length);
    for (let m = 0; m < b.valid.length; m++) b.valid[m] = m === b.home ? b.extent : Math.min(b.valid[m]!, dstOffset);
  }

  read(src: DeviceBuffer, numFloats: number, srcOffset = 0): Promise<Float32Array> {
    const b = asBuffer(src);
    return this.parts[b.home]!.read(b.parts[b.home]!, numFloats, srcOffset);
  }

  /** Each memory's part of the cache holds its layers. */
  allocKvCache(shape: KvCacheShape): void {
    this.plan.firstLayer.forEach((first, m) => {
      const end = this.plan.firstLayer[m + 1] ?? shape.numLayers;
      this.parts[m]!.allocKvCache({ ...shape, numLayers: end - first });
    });
    this.kvShape = shape;
  }

  /** KV bytes of one block id in memory m (its layers, K and V). */
  private blockBytesIn(m: number): number {
    const shape = this.kvShape!;
    const numLayers = (this.plan.firstLayer[m + 1] ?? shape.numLayers) - this.plan.firstLayer[m]!;
    return shape.blockSize * kvCacheBytesPerToken({ ...shape, numLayers });
  }

  /** The single-memory layout: per block id, every layer's K and V in layer order (the memories' parts one after another). */
  exportKvBlocks(blockIds: Int32Array): Uint8Array {
    if (this.kvShape === null) throw new Error("wasm backend: allocKvCache was not called");
    const parts = this.parts.map((p) => p.exportKvBlocks(blockIds));
    const sizes = parts.map((_, m) => this.blockBytesIn(m));
    const perId = sizes.reduce((a, b) => a + b, 0);
    const out = new Uint8Array(blockIds.length * perId);
    for (let i = 0; i < blockIds.length; i++) {
      let o = i * perId;
      parts.forEach((part, m) => {
        out.set(part.subarray(i * sizes[m]!, (i + 1) * sizes[m]!), o);
        o += sizes[m]!;
      });
    }
    return out;
  }

  importKvBlocks(blockIds: Int32Array, data: Uint8Array): void {
    if (this.kvShape === null) throw new Error("wasm backend: allocKvCache was not called");
    const sizes = this.parts.map((_, m) => this.blockBytesIn(m));
    const perId = sizes.reduce((a, b) => a + b, 0);
    if (data.length !== blockIds.length * perId) throw new Error(`importKvBlocks: ${data.length} bytes, expected ${blockIds.length * perId}`);
    let offset = 0;
    this.parts.forEach((p, m) => {
      const part = new Uint8Array(blockIds.length * sizes[m]!);
      for (let i = 0; i < blockIds.length; i++) part.set(data.subarray(i * perId + offset, i * perId + offset + sizes[m]!), i * sizes[m]!);
      p.importKvBlocks(blockIds, part);
      offset += sizes[m]!;
    });
  }

  embed(out: DeviceBuffer, table: Weight, tokenIds: Int32Array): void {
    const t = asWeight(table);
    this.on(t.memory).embed(this.writeIn(out, t.memory, tokenIds.length * t.cols), t.inner, tokenIds);
  }

  rmsNorm(out: DeviceBuffer, x: DeviceBuffer, weight: Weight, numRows: number, dim: number, eps: number): void {
    const w = asWeight(weight);
    const m = w.memory;
    const xm = this.readIn(x, m, numRows * dim);
    this.on(m).rmsNorm(this.writeIn(out, m, numRows * dim), xm, w.inner, numRows, dim, eps);
  }

  matmul(out: DeviceBuffer, w: Weight, x: DeviceBuffer, numRows: number): void {
    const wt = asWeight(w);
    const m = wt.memory;
    const xm = this.readIn(x, m, numRows * wt.cols);
    this.on(m).matmul(this.writeIn(out, m, numRows * wt.rows), wt.inner, xm, numRows);
  }

  matmulShared(outs: readonly DeviceBuffer[], ws: readonly Weight[], x: DeviceBuffer, numRows: number): void {
    const weights = ws.map(asWeight);
    const m = weights[0]?.memory ?? this.current;
    if (weights.some((w) => w.memory !== m) || outs.length !== weights.length) {
      ws.forEach((w, i) => this.matmul(outs[i]!, w, x, numRows));
      return;
    }
    const xm = this.readIn(x, m, numRows * weights[0]!.cols);
    const outsM = outs.map((o, i) => this.writeIn(o, m, numRows * weights[i]!.rows));
    this.on(m).matmulShared(outsM, weights.map((w) => w.inner), xm, numRows);
  }

  matmulEach(outs: readonly DeviceBuffer[], ws: readonly Weight[], xs: readonly DeviceBuffer[], numRows: number): void {
    const weights = ws.map(asWeight);
    const m = weights[0]?.memory ?? this.current;
    if (weights.some((w) => w.memory !== m) || outs.length !== weights.length || xs.length !== weights.length) {
      ws.forEach((w, i) => this.matmul(outs[i]!, w, xs[i]!, numRows));
      return;
    }
    const xsM = xs.map((x, i) => this.readIn(x, m, numRows * weights[i]!.cols));
    const outsM = outs.map((o, i) => this.writeIn(o, m, numRows * weights[i]!.rows));
    this.on(m).matmulEach(outsM, weights.map((w) => w.inner), xsM, numRows);
  }

  /** the layer's experts are in one memory (a layer's weights are placed together); else one matmul per group */
  matmulGrouped(outs: readonly DeviceBuffer[], ws: readonly (readonly Weight[])[], x: DeviceBuffer, offsets: Int32Array, biases: readonly (readonly Weight[])[] | null = null): void {
    const weights = ws.map((p) => p.map(asWeight));
    const bs = biases?.map((p) => p.map(asWeight)) ?? null;
    const m = weights[0]?.[0]?.memory ?? this.current;
    const rows = offsets[offsets.length - 1] ?? 0;
    if ([...weights, ...(bs ?? [])].some((p) => p.some((w) => w.memory !== m)) || outs.length !== weights.length) {
      throw new Error("split wasm backend: matmulGrouped's weights are not all in one memory");
    }
    const xm = this.readIn(x, m, rows * (weights[0]?.[0]?.cols ?? 0));
    const outsM = outs.map((o, j) => this.writeIn(o, m, rows * (weights[j]?.[0]?.rows ?? 0)));
    this.on(m).matmulGrouped(outsM, weights.map((p) => p.map((w) => w.inner)), xm, offsets, bs?.map((p) => p.map((w) => w.inner)) ?? null);
  }

  addBias(x: DeviceBuffer, bias: Weight, numRows: number): void {
    const b = asWeight(bias);
    const n = numRows * b.rows * b.cols;
    this.readIn(x, b.memory, n);
    this.on(b.memory).addBias(this.writeIn(x, b.memory, n), b.inner, numRows);
  }

  rope(x: DeviceBuffer, positions: Int32Array, numHeads: number, headDim: number, angles: RopeAngles, neox: boolean): void {
    const m = this.current;
    const n = positions.length * numHeads * headDim;
    this.readIn(x, m, n);
    this.on(m).rope(this.writeIn(x, m, n), positions, numHeads, headDim, angles, neox);
  }

  /** The memory of `layer` and the layer's index among that memory's layers. */
  private layerIn(layer: number): [number, number] {
    const m = this.plan.layerMemory[layer];
    if (m === undefined) throw new Error(`split wasm backend: no layer ${layer}`);
    return [m, layer - this.plan.firstLayer[m]!];
  }

  kvStore(layer: number, k: DeviceBuffer, v: DeviceBuffer, slots: Int32Array): void {
    const [m, local] = this.layerIn(layer);
    const shape = this.kvShape;
    if (shape === null) throw new Error("wasm backend: allocKvCache was not called");
    const n = slots.length * shape.numKvHeads * shape.headDim;
    this.on(m).kvStore(local, this.readIn(k, m, n), this.readIn(v, m, n), slots);
  }

  attention(out: DeviceBuffer, q: DeviceBuffer, layer: number, numHeads: number, sequences: readonly AttentionSequence[], slidingWindow = 0, bidirectional = false, sinks: Weight | null = null): void {
    const [m, local] = this.layerIn(layer);
    // a layer's sinks are placed with its other tensors, in the memory of its KV (memory-plan.ts memoryOfTensor)
    if (sinks !== null && asWeight(sinks).memory !== m) throw new Error(`split wasm backend: layer ${layer}'s sinks are not in its memory`);
    const shape = this.kvShape;
    if (shape === null) throw new Error("wasm backend: allocKvCache was not called");
    let numRows = 0;
    for (const s of sequences) numRows = Math.max(numRows, s.rowStart + s.numRows);
    const n = numRows * numHeads * shape.headDim;
    const qm = this.readIn(q, m, n);
    this.on(m).attention(this.writeIn(out, m, n), qm, local, numHeads, sequences, slidingWindow, bidirectional, sinks === null ? null : asWeight(sinks).inner);
  }

  siluMul(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number): void {
    const m = this.current;
    const g = this.readIn(gate, m, n);
    const u = this.readIn(up, m, n);
    this.on(m).siluMul(this.writeIn(out, m, n), g, u, n);
  }

  geluMul(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number): void {
    const m = this.current;
    const g = this.readIn(gate, m, n);
    const u = this.readIn(up, m, n);
    this.on(m).geluMul(this.writeIn(out, m, n), g, u, n);
  }

  swigluOai(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number, alpha: number, limit: number): void {
    const m = this.current;
    const g = this.readIn(gate, m, n);
    const u = this.readIn(up, m, n);
    this.on(m).swigluOai(this.writeIn(out, m, n), g, u, n, alpha, limit);
  }

  scale(x: DeviceBuffer, s: number, n: number): void {
    const m = this.current;
    this.readIn(x, m, n);
    this.on(m).scale(this.writeIn(x, m, n), s, n);
  }

  add(out: DeviceBuffer, a: DeviceBuffer, b: DeviceBuffer, n: number): void {
    const m = this.current;
    const am = this.readIn(a, m, n);
    const bm = this.readIn(b, m, n);
    this.on(m).add(this.writeIn(out, m, n), am, bm, n);
  }

  gatherRows(dst: DeviceBuffer, src: DeviceBuffer, rowIds: Int32Array, cols: number): void {
    const m = this.current;
    const s = this.readIn(src, m, Infinity);
    this.on(m).gatherRows(this.writeIn(dst, m, rowIds.length * cols), s, rowIds, cols);
  }

  scatterRows(dst: DeviceBuffer, src: DeviceBuffer, rowIds: Int32Array, cols: number): void {
    const m = this.current;
    const s = this.readIn(src, m, rowIds.length * cols);
    // a scatter writes some rows only: the others keep what the buffer held
    this.readIn(dst, m, Infinity);
    this.on(m).scatterRows(this.writeIn(dst, m, Infinity), s, rowIds, cols);
  }

  weightedRowSum(out: DeviceBuffer, src: DeviceBuffer, weights: Float32Array, numRows: number, k: number, cols: number): void {
    const m = this.current;
    const s = this.readIn(src, m, numRows * k * cols);
    this.on(m).weightedRowSum(this.writeIn(out, m, numRows * cols), s, weights, numRows, k, cols);
  }

  dispose(): void {
    for (const p of this.parts) p.dispose();
    this.kvShape = null;
  }
}

/** The backend over `plan.numMemories` memories (two or more; one memory is plain createWasmBackend). */
export async function createSplitWasmBackend(options: WasmBackendOptions, plan: MemoryPlan): Promise<SplitWasmBackend> {
  const { backends, heaps } = await createWasmBackends(options, plan.numMemories);
  return new SplitWasmBackend(backends, heaps, plan);
}
