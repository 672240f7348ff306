/// <reference types="@webgpu/types" />
/**
 * The WebGPU backend: the same seam as the WASM one, on WGSL compute shaders through Dawn (npm `webgpu`).
 * Weights are uploaded once, repacked but kept quantized: every type of the dtypes table has a shader (see
 * weight-layouts.ts); a type without one is converted to F16 at load with one log line per type. Activations and the KV
 * cache are f32. Ops are recorded into one command encoder and submitted at `read` (StepEncoder), so a step costs one
 * round trip to the CPU. A lost device resolves `lost` (the engine fails its requests and turns /health red) and
 * makes every later call throw; nothing crashes.
 * @example const backend = await createWebGpuBackend({}); const w = backend.loadWeight(source);
 */
import { byteSize, weightType, type GgmlType } from "../../tensor/dtypes.ts";
import { attentionKeys, type AttentionSequence, type Backend, type DeviceBuffer, type KvCacheShape, type RopeAngles, type TopK, type Weight, type WeightSource } from "../backend.ts";
import { openDawnDevice, type DawnDevice } from "./dawn-device.ts";
import { GpuKvCache } from "./gpu-kv-cache.ts";
import { f32Weight, gpuWeight, uploadable, uploadWeight } from "./gpu-weight.ts";
import { ATTENTION_WGSL, MAX_HEAD_DIM } from "./shaders/attention-wgsl.ts";
import {
  ADD_BIAS_WGSL, ADD_WGSL, GATHER_ROWS_WGSL, GELU_MUL_WGSL, KV_STORE_WGSL, RMS_NORM_WGSL, ROPE_WGSL, SCALE_WGSL, SILU_MUL_WGSL, TOP_K_WGSL, inPlaceVariant,
} from "./shaders/elementwise-wgsl.ts";
import { embedWgsl, MATMUL_TILE_R, matmulTileJ, matmulWgsl, WORKGROUP_SIZE } from "./shaders/matmul-wgsl.ts";
import { StepEncoder, foldGroups, type BufferRange } from "./step-encoder.ts";
import { GPU_WEIGHT_LAYOUTS, rowWords } from "./weight-layouts.ts";
import { ropeCosSin, ropeTableSize, WARM_UP_ROPE, type RopeTable } from "./rope-table.ts";

class GpuBuffer implements DeviceBuffer {
  constructor(readonly buffer: GPUBuffer, readonly length: number) {}
}

export interface WebGpuBackendOptions {
  /** limit for requestAdapter and requestDevice each */
  readonly timeoutMs?: number;
  /** where the one-line notices go (type conversions, device loss); default stderr */
  readonly log?: (line: string) => void;
  /** keep a host copy of the KV cache so exportKvBlocks works (default true; see kv-mirror.ts for the cost) */
  readonly mirrorKv?: boolean;
  /** weight types kept as they are (default: every type with a shader); the others are converted to f16 at load */
  readonly nativeTypes?: readonly GgmlType[];
  /** largest weight buffer (default: the adapter's binding limit); larger weights are split by rows */
  readonly maxWeightChunkBytes?: number;
  /** threads per matmul output row: 16 (GPUs) or 1 (CPU adapters); default from the adapter (see isCpuAdapter) */
  readonly matmulLanes?: 1 | 16;
}

/** Software adapters (lavapipe / llvmpipe, SwiftShader) run workgroups on CPU threads, where barriers are costly. */
export function isCpuAdapter(description: string): boolean {
  return /llvmpipe|lavapipe|swiftshader/i.test(description);
}

/** Opens the adapter and returns the backend; throws WebGpuUnavailableError (one line; exit 2 at the CLI) when there is no usable adapter. */
export async function createWebGpuBackend(options: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
  const dawn = await openDawnDevice({ timeoutMs: options.timeoutMs });
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  return new WebGpuBackend(dawn, log, {
    mirrorKv: options.mirrorKv ?? true,
    nativeTypes: options.nativeTypes ?? GPU_WEIGHT_LAYOUTS.map((l) => l.type),
    maxWeightChunkBytes: options.maxWeightChunkBytes,
    matmulLanes: options.matmulLanes ?? (isCpuAdapter(dawn.description) ? 1 : 16),
  });
}

function f32Bits(value: number): number {
  const f = new Float32Array([value]);
  return new Uint32Array(f.buffer)[0]!;
}

/** The refusal of an 8-bit KV cache (no WGSL kernel reads it yet). */
export const WEBGPU_NO_Q8_KV = "--kv-cache-dtype fp8 is not supported with --device webgpu (fennec's 8-bit KV cache has WASM kernels only); use --kv-cache-dtype auto or --device cpu";

export class WebGpuBackend implements Backend {
  readonly name = "webgpu";
  /** the adapter, e.g. "llvmpipe: Mesa 25.0.7 (LLVM 15.0.6) (mesa)" */
  readonly adapterDescription: string;
  /** resolves with a one-line reason if the device is lost while in use (never after dispose) */
  readonly lost: Promise<string>;
  private lostReason: string | null = null;
  /** rejects with the loss reason: one promise raced by every read (a new reaction per read would pile up) */
  private readonly lostError: Promise<never>;
  private disposed = false;
  /** the Dawn device (diagnostics; tests destroy it to simulate a lost GPU) */
  readonly device: GPUDevice;
  private readonly enc: StepEncoder;
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  /** by angle table (one per model, two with gemma3's local and global bases) */
  private readonly ropeTables = new Map<RopeAngles, RopeTable>();
  private readonly convertedTypes = new Set<GgmlType>();
  private readonly maxBindingBytes: number;
  private readonly maxWeightChunkBytes: number;
  private readonly uncaptured: string[] = [];
  private kv: GpuKvCache | null = null;
  private gatherScratch: GpuBuffer | null = null;

  private readonly mirrorKv: boolean;
  private readonly nativeTypes: readonly GgmlType[];
  /** threads per matmul output row */
  readonly matmulLanes: 1 | 16;

  constructor(
    /** held so the GPU object stays reachable: Dawn tears the device down when it is collected */
    private readonly dawn: DawnDevice,
    private readonly log: (line: string) => void,
    settings: { mirrorKv: boolean; nativeTypes: readonly GgmlType[]; maxWeightChunkBytes?: number; matmulLanes: 1 | 16 },
  ) {
    this.mirrorKv = settings.mirrorKv;
    this.nativeTypes = settings.nativeTypes;
    this.matmulLanes = settings.matmulLanes;
    const maxWeightChunkBytes = settings.maxWeightChunkBytes;
    this.device = dawn.device;
    this.adapterDescription = dawn.description;
    this.maxBindingBytes = Math.min(this.device.limits.maxStorageBufferBindingSize, this.device.limits.maxBufferSize);
    this.maxWeightChunkBytes = Math.min(this.maxBindingBytes, maxWeightChunkBytes ?? this.maxBindingBytes);
    this.enc = new StepEncoder(this.device);
    this.device.onuncapturederror = (ev) => { this.uncaptured.push(ev.error.message.split("\n")[0]!); };
    this.lost = this.device.lost.then((info) => {
      if (this.disposed) return new Promise<string>(() => {});
      this.lostReason = `webgpu device lost (${info.reason}): ${info.message.split("\n")[0] || "no message"}`;
      this.log(`fennec: ${this.lostReason}`);
      return this.lostReason;
    });
    this.lostError = this.lost.then((reason) => { throw new Error(reason); });
    this.lostError.catch(() => {}); // observed by the reads; never an unhandled rejection
  }

  /** Throws once the device is gone, so the engine sees one clear error per call instead of a crash. */
  private live(): void {
    if (this.lostReason !== null) throw new Error(this.lostReason);
    if (this.disposed) throw new Error("webgpu backend: used after dispose");
  }

  private pipeline(key: string, code: () => string): GPUComputePipeline {
    let p = this.pipelines.get(key);
    if (p === undefined) {
      const module = this.device.createShaderModule({ code: code() });
      p = this.device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
      this.pipelines.set(key, p);
    }
    return p;
  }

  private createBuffer(sizeBytes: number, what: string): GPUBuffer {
    const size = Math.max(16, Math.ceil(sizeBytes / 4) * 4);
    if (size > this.maxBindingBytes) {
      throw new Error(`webgpu: ${what} needs ${(size / 2 ** 20).toFixed(1)} MiB, over this adapter's ${(this.maxBindingBytes / 2 ** 20).toFixed(0)} MiB storage-binding limit`);
    }
    return this.device.createBuffer({ size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  }

  // ---- weights and buffers -------------------------------------------------------------------------------------

  loadWeight(source: WeightSource): Weight {
    this.live();
    return uploadWeight(this.device, source, {
      nativeTypes: this.nativeTypes,
      maxChunkBytes: this.maxWeightChunkBytes,
      createBuffer: (bytes, what) => this.createBuffer(bytes, what),
      onConvert: (typeName, type) => {
        if (this.convertedTypes.has(type)) return;
        this.convertedTypes.add(type);
        this.log(`fennec: webgpu has no ${typeName} shader; converting ${typeName} weights to f16 at load`);
      },
    });
  }

  alloc(numFloats: number): DeviceBuffer {
    this.live();
    return new GpuBuffer(this.createBuffer(numFloats * 4, `a buffer of ${numFloats} floats`), numFloats);
  }

  free(buffer: DeviceBuffer): void {
    // recorded ops may still use it: submit them first (the driver frees after the work is done)
    if (this.enc.numPending > 0) this.enc.flush();
    gpuBuffer(buffer).buffer.destroy();
  }

  write(dst: DeviceBuffer, src: Float32Array, dstOffset = 0): void {
    this.live();
    // queue writes land before unsubmitted commands: submit what reads the old contents first
    if (this.enc.numPending > 0) this.enc.flush();
    this.device.queue.writeBuffer(gpuBuffer(dst).buffer, dstOffset * 4, uploadable(src));
  }

  async read(src: DeviceBuffer, numFloats: number, srcOffset = 0): Promise<Float32Array> {
    this.live();
    if (numFloats === 0) {
      this.enc.flush();
      return new Float32Array(0);
    }
    const staging = this.device.createBuffer({ size: numFloats * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.enc.copy(gpuBuffer(src).buffer, srcOffset * 4, staging, 0, numFloats * 4);
    this.enc.flush();
    try {
      await Promise.race([staging.mapAsync(GPUMapMode.READ), this.lostError]);
      const out = new Float32Array(staging.getMappedRange().slice(0));
      staging.unmap();
      await this.kv?.mirror?.drain();
      await this.enc.checkErrors();
      const uncaptured = this.uncaptured.splice(0);
      if (uncaptured.length > 0) throw new Error(`webgpu: ${uncaptured[0]}`);
      return out;
    } finally {
      staging.destroy();
    }
  }

  /** The k largest of each row with their ids (see Backend.topK): runs the step and reads back numRows * k pairs. */
  async topK(src: DeviceBuffer, numRows: number, cols: number, k: number): Promise<TopK> {
    this.live();
    if (!(Number.isInteger(k) && k >= 1 && k <= cols)) throw new Error(`topK: k must be an integer in [1, ${cols}] (got ${k})`);
    const out = new GpuBuffer(this.createBuffer(numRows * k * 8, "the top-k result"), numRows * k * 2);
    try {
      this.enc.dispatch(this.pipeline("top_k", () => TOP_K_WGSL), new Uint32Array([cols, k, numRows]), [range(src), range(out)], numRows);
      const pairs = new Uint32Array((await this.read(out, numRows * k * 2)).buffer); // [numRows, k, (id, value bits)]
      const ids = new Int32Array(numRows * k); // [numRows, k]
      const values = new Float32Array(numRows * k); // [numRows, k]
      const bits = new Float32Array(pairs.buffer);
      for (let i = 0; i < numRows * k; i++) {
        ids[i] = pairs[2 * i]! | 0;
        values[i] = ids[i]! < 0 ? -Infinity : bits[2 * i + 1]!;
      }
      return { ids, values };
    } finally {
      out.buffer.destroy();
    }
  }

  // ---- KV cache ----------------------------------------------------------------------------------------------

  allocKvCache(shape: KvCacheShape): void {
    this.live();
    if (shape.dtype === "q8") throw new Error(WEBGPU_NO_Q8_KV);
    if (shape.headDim > MAX_HEAD_DIM) throw new Error(`webgpu: head dim ${shape.headDim} is over the attention shader's ${MAX_HEAD_DIM}`);
    this.releaseKv();
    this.kv = new GpuKvCache(this.device, this.enc, shape, this.mirrorKv, (bytes, what) => this.createBuffer(bytes, what));
  }

  private releaseKv(): void {
    if (this.kv === null) return;
    if (this.enc.numPending > 0) this.enc.flush();
    this.kv.destroy();
    this.kv = null;
  }

  private cache(): GpuKvCache {
    if (this.kv === null) throw new Error("webgpu backend: allocKvCache was not called");
    return this.kv;
  }

  /** [numBlocks of the ids, layer, K|V, blockSize, kvDim] f32 bytes (the reference layout), from the host mirror. */
  exportKvBlocks(blockIds: Int32Array): Uint8Array {
    this.live();
    return this.cache().exportBlocks(blockIds);
  }

  /** The same bytes straight from the GPU (works with mirrorKv off too). */
  async exportKvBlocksAsync(blockIds: Int32Array): Promise<Uint8Array> {
    this.live();
    return this.cache().exportBlocksAsync(blockIds);
  }

  importKvBlocks(blockIds: Int32Array, data: Uint8Array): void {
    this.live();
    this.cache().importBlocks(blockIds, data);
  }

  // ---- ops (recorded, run at the next read) ----------------------------------------------------------------------

  embed(out: DeviceBuffer, table: Weight, tokenIds: Int32Array): void {
    this.live();
    const t = gpuWeight(table);
    for (const id of tokenIds) {
      if (id < 0 || id >= t.rows) throw new Error(`embed: token id ${id} out of range [0, ${t.rows})`);
    }
    const ids = this.enc.indexData(tokenIds);
    const pipeline = this.pipeline(`embed:${t.storedType}`, () => embedWgsl(t.layout));
    const [gx] = foldGroups(tokenIds.length);
    for (const c of t.chunks) {
      const params = new Uint32Array([t.cols, rowWords(t.layout, t.cols), tokenIds.length, c.rowStart, c.numRows, gx]);
      this.enc.dispatch(pipeline, params, [{ buffer: c.buffer }, ids, range(out)], tokenIds.length);
    }
  }

  rmsNorm(out: DeviceBuffer, x: DeviceBuffer, weight: Weight, numRows: number, dim: number, eps: number): void {
    this.live();
    const w = f32Weight(weight, dim, "rmsNorm");
    const params = new Uint32Array([dim, numRows, f32Bits(eps)]);
    const inPlace = same(out, x);
    const pipeline = inPlace ? this.pipeline("rms_norm:X", () => inPlaceVariant(RMS_NORM_WGSL, "X")) : this.pipeline("rms_norm", () => RMS_NORM_WGSL);
    this.enc.dispatch(pipeline, params, [w, range(x), inPlace ? null : range(out)], numRows);
  }

  matmul(out: DeviceBuffer, w: Weight, x: DeviceBuffer, numRows: number): void {
    this.live();
    const gw = gpuWeight(w);
    if (same(out, x)) throw new Error("matmul: out must not alias x");
    const lanes = this.matmulLanes;
    const pipeline = this.pipeline(`matmul:${gw.storedType}:${lanes}`, () => matmulWgsl(gw.layout, lanes));
    for (const c of gw.chunks) {
      const numGroups = Math.ceil(c.numRows / matmulTileJ(lanes)) * Math.ceil(numRows / MATMUL_TILE_R);
      const params = new Uint32Array([c.numRows, gw.cols, numRows, rowWords(gw.layout, gw.cols), gw.cols / gw.layout.unitElems, gw.rows, c.rowStart, foldGroups(numGroups)[0]]);
      this.enc.dispatch(pipeline, params, [{ buffer: c.buffer }, range(x), range(out)], numGroups);
    }
  }

  addBias(x: DeviceBuffer, bias: Weight, numRows: number): void {
    this.live();
    const n = bias.cols * bias.rows;
    const b = f32Weight(bias, n, "addBias");
    const total = numRows * n;
    const groups = Math.ceil(total / WORKGROUP_SIZE);
    this.enc.dispatch(this.pipeline("add_bias", () => ADD_BIAS_WGSL), new Uint32Array([total, n, foldGroups(groups)[0]]), [b, range(x)], groups);
  }

  rope(x: DeviceBuffer, positions: Int32Array, numHeads: number, headDim: number, angles: RopeAngles, neox: boolean): void {
    this.live();
    if (positions.length === 0) return;
    let maxPos = 0;
    for (const p of positions) maxPos = Math.max(maxPos, p);
    const table = this.ropeTable(angles, maxPos + 1);
    const half = angles.ropeDim / 2;
    const total = positions.length * numHeads * half;
    const groups = Math.ceil(total / WORKGROUP_SIZE);
    const params = new Uint32Array([numHeads, headDim, half, neox ? 1 : 0, total, foldGroups(groups)[0]]);
    this.enc.dispatch(this.pipeline("rope", () => ROPE_WGSL), params, [this.enc.indexData(positions), { buffer: table.buffer }, range(x)], groups);
  }

  /** The angle table's GPU copy covering `numPositions` (rope-table.ts), made once per table and size. */
  private ropeTable(angles: RopeAngles, numPositions: number): RopeTable {
    const have = this.ropeTables.get(angles);
    if (have !== undefined && have.numPositions >= numPositions) return have;
    const size = ropeTableSize(numPositions);
    const cs = ropeCosSin(angles, size);
    // a new buffer: recorded ops keep reading the old one, which the GC releases
    const buffer = this.createBuffer(cs.byteLength, "the RoPE table");
    this.device.queue.writeBuffer(buffer, 0, cs);
    const table = { buffer, numPositions: size };
    this.ropeTables.set(angles, table);
    return table;
  }

  kvStore(layer: number, k: DeviceBuffer, v: DeviceBuffer, slots: Int32Array): void {
    this.live();
    const { shape, k: kc, v: vc } = this.cache();
    const kvDim = shape.numKvHeads * shape.headDim;
    const total = slots.length * kvDim;
    const groups = Math.ceil(total / WORKGROUP_SIZE);
    this.enc.dispatch(this.pipeline("kv_store", () => KV_STORE_WGSL), new Uint32Array([total, kvDim, foldGroups(groups)[0]]),
      [this.enc.indexData(slots), range(k), range(v), { buffer: kc[layer]! }, { buffer: vc[layer]! }], groups);
    this.kv?.mirror?.record(this.enc, layer, gpuBuffer(k).buffer, gpuBuffer(v).buffer, slots);
  }

  attention(out: DeviceBuffer, q: DeviceBuffer, layer: number, numHeads: number, sequences: readonly AttentionSequence[], slidingWindow = 0, bidirectional = false): void {
    this.live();
    const { shape, k, v } = this.cache();
    const { headDim, numKvHeads, blockSize } = shape;
    let numEntries = 0;
    for (const s of sequences) numEntries += s.numRows;
    const entries: number[] = []; // [numEntries, (row, numKeys, blockTableWord, firstKey)] then the block tables
    const tables: number[] = [];
    for (const s of sequences) {
      const tableWord = 4 * numEntries + tables.length;
      for (let i = 0; i < s.numRows; i++) {
        const [first, end] = attentionKeys(s, i, slidingWindow, bidirectional);
        entries.push(s.rowStart + i, end, tableWord, first);
      }
      for (const b of s.blockTable) tables.push(b);
    }
    if (same(out, q)) throw new Error("attention: out must not alias q");
    const numGroups = numEntries * numHeads;
    const params = new Uint32Array([numHeads, headDim, numKvHeads * headDim, numHeads * headDim, blockSize,
      numHeads / numKvHeads, numEntries, foldGroups(numGroups)[0], f32Bits(1 / Math.sqrt(headDim)), 0]);
    this.enc.dispatch(this.pipeline("attention", () => ATTENTION_WGSL), params,
      [this.enc.indexData([...entries, ...tables]), range(q), range(out), { buffer: k[layer]! }, { buffer: v[layer]! }], numGroups);
  }

  siluMul(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number): void {
    this.live();
    this.elementwise("silu_mul", SILU_MUL_WGSL, out, [["G", gate], ["U", up]], n);
  }

  geluMul(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number): void {
    this.live();
    this.elementwise("gelu_mul", GELU_MUL_WGSL, out, [["G", gate], ["U", up]], n);
  }

  scale(x: DeviceBuffer, s: number, n: number): void {
    this.live();
    if (n === 0) return;
    const groups = Math.ceil(n / WORKGROUP_SIZE);
    this.enc.dispatch(this.pipeline("scale", () => SCALE_WGSL), new Uint32Array([n, foldGroups(groups)[0], f32Bits(s)]), [range(x)], groups);
  }

  add(out: DeviceBuffer, a: DeviceBuffer, b: DeviceBuffer, n: number): void {
    this.live();
    this.elementwise("add", ADD_WGSL, out, [["A", a], ["B", b]], n);
  }

  /** out[i] = f(inputs[0][i], inputs[1][i]) over n elements, in place into the input that out aliases. */
  private elementwise(name: string, code: string, out: DeviceBuffer, inputs: readonly [string, DeviceBuffer][], n: number): void {
    const into = inputs.find(([, b]) => same(b, out))?.[0];
    if (into !== undefined && inputs.filter(([, b]) => same(b, out)).length > 1) throw new Error(`${name}: out aliases more than one input`);
    const pipeline = into === undefined ? this.pipeline(name, () => code) : this.pipeline(`${name}:${into}`, () => inPlaceVariant(code, into));
    const groups = Math.ceil(n / WORKGROUP_SIZE);
    const bindings = [...inputs.map(([, b]) => range(b)), into === undefined ? range(out) : null];
    this.enc.dispatch(pipeline, new Uint32Array([n, foldGroups(groups)[0]]), bindings, groups);
  }

  gatherRows(dst: DeviceBuffer, src: DeviceBuffer, rowIds: Int32Array, cols: number): void {
    this.live();
    const total = rowIds.length * cols;
    if (total === 0) return;
    // rows move between workgroups, so an in-place gather would race: go through a scratch buffer
    const aliased = gpuBuffer(dst).buffer === gpuBuffer(src).buffer;
    let target = gpuBuffer(dst);
    if (aliased) {
      if (this.gatherScratch === null || this.gatherScratch.length < total) {
        this.gatherScratch = new GpuBuffer(this.createBuffer(total * 4, "the gather scratch"), total);
      }
      target = this.gatherScratch;
    }
    const groups = Math.ceil(total / WORKGROUP_SIZE);
    this.enc.dispatch(this.pipeline("gather_rows", () => GATHER_ROWS_WGSL), new Uint32Array([total, cols, foldGroups(groups)[0]]),
      [this.enc.indexData(rowIds), range(src), { buffer: target.buffer }], groups);
    if (aliased) this.enc.copy(target.buffer, 0, gpuBuffer(dst).buffer, 0, total * 4);
  }

  /**
   * Compiles every pipeline a model of these weight types uses (default: all), by running each op once on tiny
   * inputs. Drivers compile at first dispatch, which on lavapipe takes seconds per shader: call this at start-up, not
   * on the first request. The KV cache, if any, is left untouched.
   */
  async warmUp(types: readonly GgmlType[] = this.nativeTypes): Promise<void> {
    this.live();
    const cols = 256; // a multiple of every block size
    const x = this.alloc(cols);
    const y = this.alloc(cols);
    const out = this.alloc(cols);
    const f32 = weightType(0)!;
    const weights = [this.loadWeight({ name: "warm-up norm", type: f32.type, rows: 1, cols, data: new Uint8Array(byteSize(f32, cols)) })];
    const norm = weights[0]!;
    for (const type of types) {
      const wt = weightType(type)!;
      const w = this.loadWeight({ name: `warm-up ${wt.name}`, type, rows: 2, cols, data: new Uint8Array(byteSize(wt, 2 * cols)) });
      weights.push(w);
      this.matmul(out, w, x, 1);
      this.embed(out, w, Int32Array.of(1));
    }
    this.rmsNorm(out, x, norm, 1, cols, 1e-5);
    this.rmsNorm(x, x, norm, 1, cols, 1e-5);
    this.addBias(x, norm, 1);
    this.rope(x, Int32Array.of(3), 2, 8, WARM_UP_ROPE, false);
    // each elementwise op in its three forms: a fresh output, in place into the first input, into the second
    for (const dst of [out, x, y]) {
      this.add(dst, x, y, cols);
      this.siluMul(dst, x, y, cols);
      this.geluMul(dst, x, y, cols);
    }
    this.scale(x, 1, cols);
    this.gatherRows(out, x, Int32Array.of(0), 8);
    this.gatherRows(x, x, Int32Array.of(0), 8);
    const kept = this.kv;
    const scratchKv = new GpuKvCache(this.device, this.enc, { numLayers: 1, numBlocks: 1, blockSize: 4, numKvHeads: 1, headDim: 8 }, false,
      (bytes, what) => this.createBuffer(bytes, what));
    this.kv = scratchKv;
    try {
      this.kvStore(0, x, y, Int32Array.of(0));
      this.attention(out, x, 0, 2, [{ rowStart: 0, numRows: 1, startPos: 0, blockTable: Int32Array.of(0) }]);
      this.attention(out, x, 0, 2, [{ rowStart: 0, numRows: 1, startPos: 0, blockTable: Int32Array.of(0) }], 1);
      await this.topK(out, 1, 8, 2); // runs (and reads) everything recorded above
    } finally {
      this.kv = kept;
      scratchKv.destroy();
      for (const w of weights) for (const c of gpuWeight(w).chunks) c.buffer.destroy();
      for (const b of [x, y, out]) this.free(b);
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.releaseKv();
    this.enc.destroy();
    this.device.destroy();
  }
}

function gpuBuffer(b: DeviceBuffer): GpuBuffer {
  if (!(b instanceof GpuBuffer)) throw new Error("webgpu backend: buffer from another backend");
  return b;
}

function same(a: DeviceBuffer, b: DeviceBuffer): boolean {
  return gpuBuffer(a).buffer === gpuBuffer(b).buffer;
}

function range(b: DeviceBuffer): BufferRange {
  return { buffer: gpuBuffer(b).buffer };
}
