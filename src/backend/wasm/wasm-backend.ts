/**
 * The WASM backend: AssemblyScript kernels (kernels/) on one shared memory, matmuls and attention split across a
 * pool of persistent worker threads. Weights are repacked at load (repack.ts); float weights become f32 rows.
 * KV cache: f16, [numLayers, K|V, numBlocks, numKvHeads, blockSize, headDim] (half the bytes of f32; attention
 * converts with a bit trick, see kernels/common.ts), or 8-bit (KvCacheShape.dtype "q8": per block the int8 rows,
 * then one f32 scale per token; about half the bytes again, see kernels/kv-store.ts; kv-cache-layout.ts).
 * Matmul activations are quantized to int8 once per matmul input, as llama.cpp does: per 32 (quantize_q8, Q8_0) for
 * the 32-value weight types, per 256 (quantize_q8k, Q8_K) for Q4_K / Q5_K / Q6_K; an input read by both, both ways
 * (quantized-activations.ts). Weights: wasm-weight.ts; attention's split into tasks: attention-tasks.ts.
 * @example const backend = await createWasmBackend({ threads: 2 }); backend.matmul(out, w, x, numTokens);
 */
import type { AttentionSequence, Backend, DeviceBuffer, KvCacheShape, LoraPairBuffers, RopeAngles, Weight, WeightSource } from "../backend.ts";
import { planAttentionTasks, writeAttentionTasks } from "./attention-tasks.ts";
import { loadKernelModule, type KernelExports } from "./kernel-module.ts";
import { warmUpKernels } from "./kernel-warm-up.ts";
import { copyKvBlocksIn, copyKvBlocksOut, kvBytesPerPositionPerLayerPart, kvPartAddress, type KvState } from "./kv-cache-layout.ts";
import { GROUP_HEADER, GROUP_HEADER_INTS, GROUP_ROW, GROUP_ROW_INTS, matmulTableRange, MAX_GROUP_WEIGHTS, PoolOp, SILU_UNIT, TILE_SCRATCH_BYTES } from "./pool-ops.ts";
import { activationArgs, MIN_PARALLEL_ROWS_ELEMENTS, quantizeActivations } from "./quantized-activations.ts";
import { type GroupedMatmulContext, groupedMatmul, RegionScratch } from "./expert-matmul.ts";
import { Scratch } from "./scratch.ts";
import type { SimdLevel } from "./simd-levels.ts";
import { type MemoryPool, ThreadPool } from "./thread-pool.ts";
import { WasmHeap } from "./wasm-memory.ts";
import { asBuffer, asWeight, loadWasmWeight, WasmBuffer, type WasmWeight } from "./wasm-weight.ts";

/** Below this many multiply-adds a matmul runs on the calling thread alone (waking threads costs more). */
const MIN_PARALLEL_MACS = 1 << 16;
const THREAD_TMP_BYTES = 64;
/** siluMul spreads over the threads from this many elements (a prefill chunk, not a decode step) */
const MIN_PARALLEL_SILU = 16384;
/**
 * Rows of one forward pass (Backend.maxRowsPerPass; llama.cpp's default n_ubatch is 512): a pass's activations, e.g.
 * the FFN's [rows, 1536] f32, then stay in a core's L2 (1 MiB on Zen 4) while every row group of a weight reads them.
 */
const ROWS_PER_PASS = 512;
/** LoRA's update spreads over the threads from this many multiply-adds (a prefill chunk with an adapter) */
const MIN_PARALLEL_LORA_MACS = 1 << 16;

/** A rope cos/sin table in its scratch and what it was computed for. */
interface RopeTable {
  readonly scratch: Scratch;
  readonly positions: Int32Array;
  readonly angles: RopeAngles | null;
}

export class WasmBackend implements Backend {
  readonly name: string;
  readonly maxRowsPerPass = ROWS_PER_PASS;
  readonly attentionSinks = true;
  private kv: KvState | null = null;
  private readonly activations: Scratch;
  /** matmulEach's inputs after the first, one scratch each */
  private readonly eachActivations: Scratch[] = [];
  /** matmulGrouped's context (expert-matmul.ts), made on first use */
  private grouped: GroupedMatmulContext | null = null;
  private readonly ints: Scratch;
  private readonly threadScratch: Scratch;
  /** two cos/sin tables: gemma3's sliding and global layers alternate between two rope bases */
  private readonly ropeTables: RopeTable[];
  /** attention's per-segment results of rows longer than segmentKeys, until attention_merge combines them */
  private readonly attentionPartials: Scratch;
  /** keys per attention task (the kernels' SEGMENT_KEYS) */
  private readonly segmentKeys: number;
  /** query rows per attention tile (the kernels' TILE_ROWS) */
  private readonly tileRows: number;
  /** the f64 angles rope_table reads */
  private readonly ropeThetaScratch: Scratch;
  /** LoRA: the rows' slots, the slot table (16 bytes a slot) and a group of rows' A x and expand sums (kernels/lora.ts) */
  private readonly loraScratch: Scratch;

  constructor(
    readonly level: SimdLevel,
    private readonly heap: WasmHeap,
    private readonly k: KernelExports,
    private readonly pool: MemoryPool,
  ) {
    this.name = `wasm-${level}`;
    this.activations = new Scratch(heap);
    this.ints = new Scratch(heap);
    this.threadScratch = new Scratch(heap);
    this.ropeTables = [0, 1].map(() => ({ scratch: new Scratch(heap), positions: new Int32Array(0), angles: null }));
    this.ropeThetaScratch = new Scratch(heap);
    this.attentionPartials = new Scratch(heap);
    this.loraScratch = new Scratch(heap);
    this.segmentKeys = k.attention_segment_keys();
    this.tileRows = k.attention_tile_rows();
    this.setThreadScratch(0);
  }

  get numThreads(): number {
    return this.pool.numThreads;
  }

  /** Bytes of the shared memory in use (weights, KV cache, activations). */
  get memoryBytes(): number {
    return this.heap.usedBytes;
  }

  /** Bytes of the shared memory allocated and not freed (memoryBytes less blocks waiting for reuse). */
  get liveMemoryBytes(): number {
    return this.heap.liveBytes;
  }

  private scratchStride = 0;

  /** Per-thread scratch: 64 bytes for the matmul tails, then `floats` f32 for attention scores. */
  private setThreadScratch(floats: number): void {
    const stride = Math.ceil((THREAD_TMP_BYTES + floats * 4) / 64) * 64;
    if (stride <= this.scratchStride) return;
    this.scratchStride = stride;
    const base = this.threadScratch.ensure(stride * this.pool.numThreads);
    this.pool.setScratch(base, stride);
  }

  loadWeight(source: WeightSource): Weight {
    return loadWasmWeight(this.heap, source);
  }

  alloc(numFloats: number): DeviceBuffer {
    return new WasmBuffer(this.heap.alloc(numFloats * 4), numFloats);
  }

  free(buffer: DeviceBuffer): void {
    const b = asBuffer(buffer);
    this.heap.free(b.ptr, b.length * 4);
  }

  write(dst: DeviceBuffer, src: Float32Array, dstOffset = 0): void {
    const d = asBuffer(dst);
    if (dstOffset + src.length > d.length) throw new Error(`write: ${src.length} floats at ${dstOffset} overflow a buffer of ${d.length}`);
    this.heap.floats.set(src, d.ptr / 4 + dstOffset);
  }

  read(src: DeviceBuffer, numFloats: number, srcOffset = 0): Promise<Float32Array> {
    const s = asBuffer(src);
    const start = s.ptr / 4 + srcOffset;
    return Promise.resolve(this.heap.floats.slice(start, start + numFloats));
  }

  allocKvCache(shape: KvCacheShape): void {
    if (this.kv !== null) this.heap.free(this.kv.base, this.kv.layerPartBytes * 2 * this.kv.shape.numLayers);
    const blockBytes = shape.blockSize * kvBytesPerPositionPerLayerPart(shape);
    const layerPartBytes = shape.numBlocks * blockBytes;
    const total = layerPartBytes * 2 * shape.numLayers;
    const base = this.heap.alloc(total);
    this.heap.bytes.fill(0, base, base + total);
    this.kv = { shape, base, layerPartBytes, blockBytes };
  }

  private cache(): KvState {
    if (this.kv === null) throw new Error("wasm backend: allocKvCache was not called");
    return this.kv;
  }

  exportKvBlocks(blockIds: Int32Array): Uint8Array {
    return copyKvBlocksOut(this.cache(), this.heap.bytes, blockIds);
  }

  importKvBlocks(blockIds: Int32Array, data: Uint8Array): void {
    copyKvBlocksIn(this.cache(), this.heap.bytes, blockIds, data);
  }

  /** Copies an int array into the int scratch at a byte offset; returns its address. */
  private putInts(values: Int32Array, byteOffset = 0): number {
    const at = this.ints.ensure(byteOffset + values.length * 4) + byteOffset;
    this.heap.ints.set(values, at / 4);
    return at;
  }

  embed(out: DeviceBuffer, table: Weight, tokenIds: Int32Array): void {
    const t = asWeight(table);
    const o = asBuffer(out);
    for (let i = 0; i < tokenIds.length; i++) {
      const id = tokenIds[i]!;
      if (id < 0 || id >= t.rows) throw new Error(`embed: token id ${id} out of range [0, ${t.rows})`);
      const dst = o.ptr + i * t.cols * 4;
      if (t.quant !== null) {
        this.k.dequant_row(t.quant.kind, dst, t.quant.wq, t.quant.ws, t.quant.wm, id, t.cols, t.quant.zeroPoint);
      } else {
        const src = t.f32Ptr + id * t.colsPadded * 4;
        this.heap.bytes.copyWithin(dst, src, src + t.cols * 4);
      }
    }
  }

  rmsNorm(out: DeviceBuffer, x: DeviceBuffer, weight: Weight, numRows: number, dim: number, eps: number): void {
    const w = asWeight(weight);
    if (w.quant !== null) throw new Error("rmsNorm: the norm weight must be a float tensor");
    const args = [asBuffer(out).ptr, asBuffer(x).ptr, w.f32Ptr, numRows, dim, 0];
    // rows are independent: a prefill chunk's rows go to the threads (each row's bits are the same either way)
    if (numRows * dim >= MIN_PARALLEL_ROWS_ELEMENTS && this.pool.numThreads > 1) this.pool.run(PoolOp.RmsNorm, args, numRows, new Map([[5, eps]]));
    else this.k.rms_norm(args[0]!, args[1]!, args[2]!, numRows, dim, eps);
  }

  matmul(out: DeviceBuffer, w: Weight, x: DeviceBuffer, numRows: number): void {
    const wt = asWeight(w);
    const xp = asBuffer(x).ptr;
    if (wt.quant !== null) {
      this.matmulQuantized([asBuffer(out).ptr], [wt], xp, numRows);
      return;
    }
    const o = asBuffer(out).ptr;
    const { rows, cols } = wt;
    const rowGroups = Math.ceil(rows / 4);
    const args = [o, wt.f32Ptr, xp, rows, cols, numRows];
    if (rows * cols * numRows >= MIN_PARALLEL_MACS && this.pool.numThreads > 1) this.pool.run(PoolOp.MatmulF32, args, rowGroups);
    else this.k.matmul_f32(o, wt.f32Ptr, xp, rows, cols, numRows, 0, rowGroups, this.threadScratch.ptr);
  }

  /**
   * Weights that read one input (q, k, v; gate, up): the input is quantized once and all their row groups go to the
   * threads as one op (small matmuls were a fixed cost per dispatch in decode). Each row's bits are matmul's.
   */
  matmulShared(outs: readonly DeviceBuffer[], ws: readonly Weight[], x: DeviceBuffer, numRows: number): void {
    const weights = ws.map(asWeight);
    const cols = weights[0]?.cols ?? 0;
    if (weights.length !== outs.length || weights.length > MAX_GROUP_WEIGHTS || weights.some((w) => w.quant === null || w.cols !== cols)) {
      ws.forEach((w, i) => this.matmul(outs[i]!, w, x, numRows));
      return;
    }
    this.matmulQuantized(outs.map((o) => asBuffer(o).ptr), weights, asBuffer(x).ptr, numRows);
  }

  /**
   * Weights that each read their own input (a decode step's routed experts' down projections): each input quantized
   * on its own, then all the weights' row groups as one pool op (k dispatches were k fixed costs per layer, as
   * matmulShared's were). Each row's bits are matmul's.
   */
  matmulEach(outs: readonly DeviceBuffer[], ws: readonly Weight[], xs: readonly DeviceBuffer[], numRows: number): void {
    const weights = ws.map(asWeight);
    const cols = weights[0]?.cols ?? 0;
    if (weights.length !== outs.length || weights.length !== xs.length || weights.length > MAX_GROUP_WEIGHTS || weights.some((w) => w.quant === null || w.cols !== cols)) {
      ws.forEach((w, i) => this.matmul(outs[i]!, w, xs[i]!, numRows));
      return;
    }
    this.matmulQuantized(outs.map((o) => asBuffer(o).ptr), weights, xs.map((x) => asBuffer(x).ptr), numRows);
  }

  /** A prefill's routed experts, each projection's groups as one pool op (expert-matmul.ts). */
  matmulGrouped(outs: readonly DeviceBuffer[], ws: readonly (readonly Weight[])[], x: DeviceBuffer, offsets: Int32Array, biases: readonly (readonly Weight[])[] | null = null): void {
    this.grouped ??= { k: this.k, pool: this.pool, heap: this.heap, level: this.level, regions: new RegionScratch(this.heap), table: new Scratch(this.heap), threadScratch: () => this.threadScratch.ptr, tileScratch: () => this.setThreadScratch(TILE_SCRATCH_BYTES / 4), matmul: (o, w, xb, n) => this.matmul(o, w, xb, n), addBias: (o, b, n) => this.addBias(o, b, n) };
    groupedMatmul(this.grouped, outs.map(asBuffer), ws.map((p) => p.map(asWeight)), asBuffer(x), offsets, biases?.map((p) => p.map(asWeight)) ?? null);
  }

  /** the activations scratch of matmulEach's input i (input 0 shares matmulShared's) */
  private eachScratch(i: number): Scratch {
    if (i === 0) return this.activations;
    while (this.eachActivations.length < i) this.eachActivations.push(new Scratch(this.heap));
    return this.eachActivations[i - 1]!;
  }

  /**
   * outs[i] = x . weights[i]^T for quantized weights of the same cols (up to MAX_GROUP_WEIGHTS): x quantized once
   * (or, given one input per weight, each quantized on its own), then all the weights' row groups as the work units of
   * one pool op (or on this thread when the work is small).
   */
  private matmulQuantized(outs: readonly number[], weights: readonly WasmWeight[], xp: number | readonly number[], numRows: number): void {
    const cols = weights[0]!.cols;
    const quantize = (scratch: Scratch, x: number, ws: readonly WasmWeight[]) => quantizeActivations({ k: this.k, pool: this.pool, level: this.level, scratch }, x, numRows, cols, ws.map((w) => w.quant!.kind));
    const acts = typeof xp === "number" ? [quantize(this.activations, xp, weights)] : weights.map((w, i) => quantize(this.eachScratch(i), xp[i]!, [w]));
    const actsOf = (i: number) => acts[typeof xp === "number" ? 0 : i]!;
    // the 8-row tiles' rows of a segment, widened (KIND_I8) or unpacked (Q4_0): kernels/matmul-tile8.ts widenPair, unpackPair
    if (acts.some((a) => a.quads16 !== 0 || a.quads !== 0)) this.setThreadScratch(TILE_SCRATCH_BYTES / 4);
    const table = new Int32Array(GROUP_HEADER_INTS + weights.length * GROUP_ROW_INTS); // pool-ops.ts GROUP_HEADER, GROUP_ROW
    table[GROUP_HEADER.numWeights] = weights.length;
    table[GROUP_HEADER.cols] = cols;
    table[GROUP_HEADER.numTokens] = numRows;
    let units = 0;
    weights.forEach((w, i) => {
      const q = w.quant!;
      const { acts, da, sa, qs, quads } = activationArgs(actsOf(i), q.kind);
      const row = table.subarray(GROUP_HEADER_INTS + i * GROUP_ROW_INTS);
      row[GROUP_ROW.kind] = q.kind;
      row[GROUP_ROW.out] = outs[i]!;
      row[GROUP_ROW.wq] = q.wq;
      row[GROUP_ROW.ws] = q.ws;
      row[GROUP_ROW.wm] = q.wm;
      row[GROUP_ROW.rows] = w.rows;
      row[GROUP_ROW.zeroPoint] = q.zeroPoint;
      row[GROUP_ROW.acts] = acts;
      row[GROUP_ROW.sa] = sa;
      row[GROUP_ROW.qs] = qs;
      row[GROUP_ROW.quads] = quads;
      row[GROUP_ROW.firstUnit] = units;
      row[GROUP_ROW.da] = da;
      units += Math.ceil(w.rows / 4);
    });
    if (units * 4 * cols * numRows >= MIN_PARALLEL_MACS && this.pool.numThreads > 1) this.pool.run(PoolOp.MatmulQuant, [], units, undefined, table);
    else matmulTableRange(this.k, table, 0, 0, units, this.threadScratch.ptr);
  }

  addBias(x: DeviceBuffer, bias: Weight, numRows: number): void {
    const b = asWeight(bias);
    if (b.quant !== null) throw new Error("addBias: the bias must be a float tensor");
    this.k.add_bias(asBuffer(x).ptr, b.f32Ptr, numRows, b.rows * b.cols);
  }

  rope(x: DeviceBuffer, positions: Int32Array, numHeads: number, headDim: number, angles: RopeAngles, neox: boolean): void {
    this.k.rope(asBuffer(x).ptr, this.ropeTableFor(positions, angles), positions.length, numHeads, headDim, angles.ropeDim, neox ? 1 : 0);
  }

  /** The cos/sin table of these positions: every layer of a step asks for the same one, so it is computed once. */
  private ropeTableFor(positions: Int32Array, angles: RopeAngles): number {
    const same = (t: RopeTable) => t.angles === angles && t.positions.length === positions.length && t.positions.every((p, i) => p === positions[i]);
    const hit = this.ropeTables.find(same);
    if (hit !== undefined) return hit.scratch.ptr;
    // replace the older table; the newer stays for the other angle table (gemma3's sliding and global layers)
    const t = this.ropeTables.shift()!;
    const half = angles.ropeDim / 2;
    const thetas = this.ropeThetaScratch.ensure(half * 8);
    new Float64Array(this.heap.memory.buffer, thetas, half).set(angles.thetas.subarray(0, half));
    const at = t.scratch.ensure(positions.length * angles.ropeDim * 4);
    this.k.rope_table(at, this.putInts(positions), positions.length, angles.ropeDim, thetas, angles.mscale);
    this.ropeTables.push({ scratch: t.scratch, positions: positions.slice(), angles });
    return at;
  }

  kvStore(layer: number, k: DeviceBuffer, v: DeviceBuffer, slots: Int32Array): void {
    const kv = this.cache();
    const s = this.putInts(slots);
    const { numKvHeads, headDim, blockSize } = kv.shape;
    const store = kv.shape.dtype === "q8" ? this.k.kv_store_q8 : this.k.kv_store_f16;
    store(kvPartAddress(kv, layer, 0), kvPartAddress(kv, layer, 1), asBuffer(k).ptr, asBuffer(v).ptr, s, slots.length, numKvHeads, headDim, blockSize);
  }

  attention(out: DeviceBuffer, q: DeviceBuffer, layer: number, numHeads: number, sequences: readonly AttentionSequence[], slidingWindow = 0, bidirectional = false, sinks: Weight | null = null): void {
    const kv = this.cache();
    const sk = sinks === null ? 0 : asWeight(sinks);
    if (sk !== 0 && (sk.quant !== null || sk.rows * sk.cols !== numHeads)) throw new Error(`attention: the sinks must be ${numHeads} floats, one per head`);
    const { numKvHeads, headDim, blockSize } = kv.shape;
    if (numHeads % numKvHeads !== 0) throw new Error(`attention: ${numHeads} heads do not share ${numKvHeads} KV heads evenly`);
    const groupSize = numHeads / numKvHeads;
    const plan = planAttentionTasks(sequences, { numKvHeads, blockSize, segmentKeys: this.segmentKeys, tileRows: this.tileRows, slidingWindow, bidirectional });
    this.setThreadScratch(this.k.attention_scratch_floats(groupSize, headDim));
    const base = this.ints.ensure(plan.numInts * 4);
    const table = writeAttentionTasks(plan, sequences, base); // attention-tasks.ts lays the ints out
    this.heap.ints.set(table.ints, base / 4);
    const partials = plan.numPartials > 0 ? this.attentionPartials.ensure(plan.numPartials * groupSize * (headDim + 2) * 4) : 0;
    const o = asBuffer(out).ptr;
    const args = [o, asBuffer(q).ptr, kvPartAddress(kv, layer, 0), kvPartAddress(kv, layer, 1), base,
      base + table.tasksAt * 4, partials, numHeads, numKvHeads, headDim, blockSize, 0,
      bidirectional ? 0 : slidingWindow, table.firstKeysAt >= 0 ? base + table.firstKeysAt * 4 : 0, sk === 0 ? 0 : sk.f32Ptr];
    this.pool.run(kv.shape.dtype === "q8" ? PoolOp.AttentionQ8 : PoolOp.Attention, args, plan.numTasks, new Map([[11, 1 / Math.sqrt(headDim)]]));
    if (plan.numMerges > 0) this.pool.run(PoolOp.AttentionMerge, [o, partials, base + table.mergesAt * 4, numHeads, numKvHeads, headDim, sk === 0 ? 0 : sk.f32Ptr], plan.numMerges);
  }

  siluMul(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number): void {
    const args = [asBuffer(out).ptr, asBuffer(gate).ptr, asBuffer(up).ptr, n];
    if (n >= MIN_PARALLEL_SILU && this.pool.numThreads > 1) this.pool.run(PoolOp.SiluMul, args, Math.ceil(n / SILU_UNIT));
    else this.k.silu_mul(args[0]!, args[1]!, args[2]!, n);
  }

  geluMul(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number): void {
    const args = [asBuffer(out).ptr, asBuffer(gate).ptr, asBuffer(up).ptr, n];
    if (n >= MIN_PARALLEL_SILU && this.pool.numThreads > 1) this.pool.run(PoolOp.GeluMul, args, Math.ceil(n / SILU_UNIT));
    else this.k.gelu_mul(args[0]!, args[1]!, args[2]!, n);
  }

  swigluOai(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, n: number, alpha: number, limit: number): void {
    const args = [asBuffer(out).ptr, asBuffer(gate).ptr, asBuffer(up).ptr, n];
    if (n >= MIN_PARALLEL_SILU && this.pool.numThreads > 1) this.pool.run(PoolOp.SwigluOai, args, Math.ceil(n / SILU_UNIT), new Map([[4, alpha], [5, limit]]));
    else this.k.swiglu_oai(args[0]!, args[1]!, args[2]!, n, alpha, limit);
  }

  scale(x: DeviceBuffer, s: number, n: number): void {
    this.k.scale(asBuffer(x).ptr, s, n);
  }

  add(out: DeviceBuffer, a: DeviceBuffer, b: DeviceBuffer, n: number): void {
    this.k.add(asBuffer(out).ptr, asBuffer(a).ptr, asBuffer(b).ptr, n);
  }

  /** LoRA's per-row update (kernels/lora.ts): rows over the threads for a long step, else on this thread */
  loraDelta(out: DeviceBuffer, x: DeviceBuffer, numRows: number, nIn: number, nOut: number, rowSlots: Int32Array, slots: readonly (LoraPairBuffers | null)[]): void {
    if (rowSlots.length < numRows) throw new Error(`loraDelta: ${rowSlots.length} row slots for ${numRows} rows`);
    let maxRank = 0;
    for (const s of slots) if (s !== null) maxRank = Math.max(maxRank, s.rank);
    if (maxRank === 0) return;
    const slotBytes = slots.length * 16;
    const tmpFloats = this.k.lora_group_rows() * (maxRank + nOut);
    const base = this.loraScratch.ensure(numRows * 4 + slotBytes + tmpFloats * 4);
    const rowsAt = base;
    const tableAt = base + numRows * 4;
    const tmpAt = tableAt + slotBytes;
    const ints = this.heap.ints;
    const floats = this.heap.floats;
    ints.set(rowSlots.subarray(0, numRows), rowsAt / 4);
    for (let i = 0; i < slots.length; i++) {
      const s = slots[i]!;
      const at = tableAt / 4 + i * 4;
      ints[at] = s === null ? 0 : asBuffer(s.a).ptr;
      ints[at + 1] = s === null ? 0 : asBuffer(s.bt).ptr;
      ints[at + 2] = s === null ? 0 : s.rank;
      floats[at + 3] = s === null ? 0 : s.scale;
    }
    const o = asBuffer(out).ptr;
    const xp = asBuffer(x).ptr;
    if (numRows > 1 && numRows * maxRank * (nIn + nOut) >= MIN_PARALLEL_LORA_MACS && this.pool.numThreads > 1) {
      this.setThreadScratch(tmpFloats);
      // units of GROUP rows, so a chunk's groups are the same as one thread's would be (bits do not depend on them anyway)
      this.pool.run(PoolOp.LoraDelta, [o, xp, rowsAt, tableAt, nIn, nOut, numRows], Math.ceil(numRows / this.k.lora_group_rows()));
    } else {
      this.k.lora_delta(o, xp, rowsAt, 0, numRows, tableAt, nIn, nOut, tmpAt);
    }
  }

  scatterRows(dst: DeviceBuffer, src: DeviceBuffer, rowIds: Int32Array, cols: number): void {
    const floats = this.heap.floats;
    const s = asBuffer(src).ptr / 4;
    const d = asBuffer(dst).ptr / 4;
    rowIds.forEach((id, i) => floats.copyWithin(d + id * cols, s + i * cols, s + (i + 1) * cols));
  }

  /** on the calling thread (kernels/moe-experts.ts): k * cols multiply-adds per row, small beside the experts' matmuls */
  weightedRowSum(out: DeviceBuffer, src: DeviceBuffer, weights: Float32Array, numRows: number, k: number, cols: number): void {
    const at = this.ints.ensure(numRows * k * 4);
    this.heap.floats.set(weights.subarray(0, numRows * k), at / 4);
    this.k.weighted_row_sum(asBuffer(out).ptr, asBuffer(src).ptr, at, numRows, k, cols);
  }

  gatherRows(dst: DeviceBuffer, src: DeviceBuffer, rowIds: Int32Array, cols: number): void {
    const floats = this.heap.floats;
    const s = asBuffer(src).ptr / 4;
    const d = asBuffer(dst).ptr / 4;
    // two buffers: each row copied in place (a prefill chunk gathers every expert's rows: no per-row allocation)
    if (d !== s) {
      rowIds.forEach((id, i) => floats.copyWithin(d + i * cols, s + id * cols, s + (id + 1) * cols));
      return;
    }
    const rows = Array.from(rowIds, (id) => floats.slice(s + id * cols, s + (id + 1) * cols)); // dst is src
    rows.forEach((row, i) => floats.set(row, d + i * cols));
  }

  /** Reads the whole buffer once with v128 loads on this thread (the bandwidth yardstick of bench/kernels.ts). */
  streamRead(buffer: DeviceBuffer): number {
    const b = asBuffer(buffer);
    return this.k.stream_read(b.ptr, Math.floor((b.length * 4) / 64) * 64);
  }

  /** Bytes the kernels stream per use of a weight (after repacking). */
  weightBytes(w: Weight): number {
    return asWeight(w).allocations.reduce((sum, [, bytes]) => sum + bytes, 0);
  }

  /** Frees a weight's memory (the model is being unloaded). */
  freeWeight(w: Weight): void {
    for (const [ptr, bytes] of asWeight(w).allocations) this.heap.free(ptr, bytes);
  }

  dispose(): void {
    this.pool.stop();
    this.kv = null;
  }
}

export interface WasmBackendOptions {
  /** kernel threads including the caller; default: the number of cores */
  readonly threads?: number;
  /** kernel build; default: the best one this runtime validates */
  readonly simd?: SimdLevel;
}

/**
 * One backend per memory on one thread pool: `numMemories` shared memories, a kernel instance on each, the pool's
 * threads with an instance on each. One memory is the whole backend; several are the parts of split-wasm-backend.ts.
 */
export async function createWasmBackends(options: WasmBackendOptions, numMemories: number): Promise<{ backends: WasmBackend[]; heaps: WasmHeap[] }> {
  const threads = options.threads ?? navigator.hardwareConcurrency;
  if (!Number.isInteger(threads) || threads < 1 || threads > 256) throw new Error(`--threads: ${threads} is not a thread count (1..256)`);
  const { module, level } = await loadKernelModule(options.simd);
  const heaps = Array.from({ length: numMemories }, () => new WasmHeap());
  const kernels = heaps.map((heap) => {
    const k = new WebAssembly.Instance(module, { env: { memory: heap.memory } }).exports as unknown as KernelExports;
    heap.setBase(k.heap_base());
    return k;
  });
  const starting = ThreadPool.start(module, heaps, kernels, threads); // workers boot meanwhile
  warmUpKernels(kernels[0]!, heaps[0]!);
  const pool = await starting;
  return { backends: heaps.map((heap, i) => new WasmBackend(level, heap, kernels[i]!, pool.forMemory(i))), heaps };
}

/** Loads the kernels, starts the thread pool and returns the backend (one memory). */
export async function createWasmBackend(options: WasmBackendOptions = {}): Promise<WasmBackend> {
  return (await createWasmBackends(options, 1)).backends[0]!;
}
