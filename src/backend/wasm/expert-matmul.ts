/**
 * A prefill's routed experts as one pool op per projection (ggml-cpu.c ggml_compute_forward_mul_mat_id): the rows
 * routed to each expert, gathered one group after another, are quantized group by group (each group's quads start
 * at its first row, as a matmul of its rows alone has them), then every (expert weight, its rows) pair is an entry of
 * one table whose row groups of 4 are the op's work units (kernels/moe-experts.ts), so the threads split the work by
 * expert and rows in one dispatch instead of one dispatch per expert. Each entry's bits are matmul's on its rows.
 * @example groupedMatmul(ctx, [gatePtr, upPtr], [gates, ups], xPtr, offsets);
 */
import type { KernelExports } from "./kernel-module.ts";
import { GROUP_ROW, MAX_QUANTIZE_BATCH, PoolOp, QUANTIZE_ARGS, QUANTIZE_BATCH_INTS } from "./pool-ops.ts";
import { activationArgs, quantizeActivations, type QuantizedActivations } from "./quantized-activations.ts";
import { Scratch } from "./scratch.ts";
import type { SimdLevel } from "./simd-levels.ts";
import type { MemoryPool } from "./thread-pool.ts";
import type { WasmHeap } from "./wasm-memory.ts";
import { WasmBuffer, type WasmWeight } from "./wasm-weight.ts";

/** i32 per table entry: GROUP_ROW's fields, then the entry's token count and bias (kernels/moe-experts.ts ENTRY_INTS) */
const ENTRY_INTS = 15;
const ENTRY_TOKENS = 13;
const ENTRY_BIAS = 14;
/** Below this many multiply-adds the op runs on the calling thread (wasm-backend.ts MIN_PARALLEL_MACS) */
const MIN_PARALLEL_MACS = 1 << 16;

/**
 * Scratch handed out region after region (one per group's quantized rows): all of a call's regions live until its
 * op has run. A region past the end moves the whole scratch to a larger block; `moved` then tells the caller to
 * quantize again from the first group (the scratch only grows, so this happens on the first large chunks).
 */
export class RegionScratch extends Scratch {
  private used = 0;
  moved = false;

  reset(): void {
    this.used = 0;
    this.moved = false;
  }

  override ensure(numBytes: number): number {
    const bytes = Math.ceil(numBytes / 64) * 64;
    if (this.used + bytes > this.bytes) {
      const before = this.ptr;
      super.ensure(Math.max(2 * this.bytes, this.used + bytes));
      if (this.used > 0 && this.ptr !== before) this.moved = true;
    }
    const at = this.ptr + this.used;
    this.used += bytes;
    return at;
  }
}

/** What groupedMatmul runs on (the WASM backend's kernels, pool and scratch). */
export interface GroupedMatmulContext {
  readonly k: KernelExports;
  readonly pool: MemoryPool;
  readonly heap: WasmHeap;
  readonly level: SimdLevel;
  /** the groups' quantized rows */
  readonly regions: RegionScratch;
  /** the entries' table */
  readonly table: Scratch;
  /** the calling thread's scratch (64 bytes, then the tiles' segment where a kind needs it) */
  readonly threadScratch: () => number;
  /** asks for the tiles' per-thread scratch (wasm-backend.ts setThreadScratch(TILE_SCRATCH_BYTES / 4)) */
  readonly tileScratch: () => void;
  /** the backend's matmul and addBias, for weights the table cannot take (f32, or of other cols) */
  readonly matmul: (out: WasmBuffer, w: WasmWeight, x: WasmBuffer, numRows: number) => void;
  readonly addBias: (x: WasmBuffer, bias: WasmWeight, numRows: number) => void;
}

/**
 * outs[j] rows [offsets[g], offsets[g + 1]) = x's same rows . ws[j][g]^T (+ biases[j][g]), for every group g and
 * projection j, as one pool op (or on this thread when small). Weights that are not all quantized with the same cols
 * run one matmul (and addBias) each.
 */
export function groupedMatmul(ctx: GroupedMatmulContext, outBuffers: readonly WasmBuffer[], ws: readonly (readonly WasmWeight[])[], xb: WasmBuffer, offsets: Int32Array, biases: readonly (readonly WasmWeight[])[] | null): void {
  const numGroups = offsets.length - 1;
  const cols = ws[0]?.[0]?.cols ?? 0;
  if (ws.length !== outBuffers.length || ws.some((p) => p.length !== numGroups)) throw new Error(`matmulGrouped: ${ws.length} projections of ${ws.map((p) => p.length).join(", ")} weights for ${outBuffers.length} outputs and ${numGroups} groups`);
  if (biases !== null && (biases.length !== ws.length || biases.some((p, j) => p.length !== numGroups || p.some((b, g) => b.quant !== null || b.rows * b.cols !== ws[j]![g]!.rows)))) {
    throw new Error("matmulGrouped: the biases must be float tensors of each weight's rows, one per weight");
  }
  if (numGroups < 1) return;
  const outs = outBuffers.map((o) => o.ptr);
  const x = xb.ptr;
  if (ws.some((p) => p.some((w) => w.quant === null || w.cols !== cols))) {
    for (let g = 0; g < numGroups; g++) {
      const first = offsets[g]!;
      const n = offsets[g + 1]! - first;
      if (n === 0) continue;
      ws.forEach((p, j) => {
        const out = new WasmBuffer(outs[j]! + first * p[g]!.rows * 4, n * p[g]!.rows);
        ctx.matmul(out, p[g]!, new WasmBuffer(x + first * p[g]!.cols * 4, n * p[g]!.cols), n);
        if (biases !== null) ctx.addBias(out, biases[j]![g]!, n);
      });
    }
    return;
  }
  const acts = quantizeGroups(ctx, ws, x, offsets, cols);
  const numEntries = numGroups * ws.length;
  const base = ctx.table.ensure(numEntries * ENTRY_INTS * 4);
  const table = ctx.heap.ints.subarray(base / 4, base / 4 + numEntries * ENTRY_INTS);
  let units = 0;
  let entries = 0;
  let macs = 0;
  for (let g = 0; g < numGroups; g++) {
    const a = acts[g];
    if (a === null || a === undefined) continue;
    const first = offsets[g]!;
    const n = offsets[g + 1]! - first;
    ws.forEach((p, j) => {
      const w = p[g]!;
      const q = w.quant!;
      const args = activationArgs(a, q.kind);
      const e = entries++ * ENTRY_INTS;
      table[e + GROUP_ROW.kind] = q.kind;
      table[e + GROUP_ROW.out] = outs[j]! + first * w.rows * 4;
      table[e + GROUP_ROW.wq] = q.wq;
      table[e + GROUP_ROW.ws] = q.ws;
      table[e + GROUP_ROW.wm] = q.wm;
      table[e + GROUP_ROW.rows] = w.rows;
      table[e + GROUP_ROW.zeroPoint] = q.zeroPoint;
      table[e + GROUP_ROW.acts] = args.acts;
      table[e + GROUP_ROW.sa] = args.sa;
      table[e + GROUP_ROW.qs] = args.qs;
      table[e + GROUP_ROW.quads] = args.quads;
      table[e + GROUP_ROW.firstUnit] = units;
      table[e + GROUP_ROW.da] = args.da;
      table[e + ENTRY_TOKENS] = n;
      table[e + ENTRY_BIAS] = biases === null ? 0 : biases[j]![g]!.f32Ptr;
      units += Math.ceil(w.rows / 4);
      macs += w.rows * cols * n;
    });
  }
  if (entries === 0) return;
  if (acts.some((a) => a !== null && (a.quads16 !== 0 || a.quads !== 0))) ctx.tileScratch();
  if (macs >= MIN_PARALLEL_MACS && ctx.pool.numThreads > 1) ctx.pool.run(PoolOp.MatmulExperts, [base, entries, cols], units);
  else ctx.k.matmul_experts(base, entries, cols, 0, units, ctx.threadScratch());
}

/**
 * Each group's rows quantized for its weights' kinds, in regions of their own (null: an empty group). The groups that
 * quantizeActivations would spread over the threads one op each are collected and run MAX_QUANTIZE_BATCH to an op
 * (pool-ops.ts QuantizeBatch): a chunk's 128 experts were as many small dispatches.
 */
function quantizeGroups(ctx: GroupedMatmulContext, ws: readonly (readonly WasmWeight[])[], x: number, offsets: Int32Array, cols: number): (QuantizedActivations | null)[] {
  const pending: number[][] = [];
  // stands in for the pool: keeps each spread quantization's arguments (QUANTIZE_ARGS) for the batches below
  const collect = { numThreads: ctx.pool.numThreads, run: (_op: PoolOp, args: readonly number[]) => pending.push([...args]) } as unknown as MemoryPool;
  for (;;) {
    ctx.regions.reset();
    pending.length = 0;
    const acts = Array.from({ length: offsets.length - 1 }, (_, g) => {
      const n = offsets[g + 1]! - offsets[g]!;
      if (n <= 0) return null;
      return quantizeActivations({ k: ctx.k, pool: collect, level: ctx.level, scratch: ctx.regions }, x + offsets[g]! * cols * 4, n, cols, ws.map((p) => p[g]!.quant!.kind));
    });
    if (ctx.regions.moved) continue;
    for (let i = 0; i < pending.length; i += MAX_QUANTIZE_BATCH) {
      const batch = pending.slice(i, i + MAX_QUANTIZE_BATCH);
      const table = new Int32Array(1 + batch.length * QUANTIZE_BATCH_INTS);
      table[0] = batch.length;
      let units = 0;
      batch.forEach((args, j) => {
        table.set(args, 1 + j * QUANTIZE_BATCH_INTS);
        table[1 + j * QUANTIZE_BATCH_INTS + QUANTIZE_BATCH_INTS - 1] = units;
        units += Math.ceil(args[QUANTIZE_ARGS.numTokens]! / 4);
      });
      ctx.pool.run(PoolOp.QuantizeBatch, [], units, undefined, table);
    }
    return acts;
  }
}
