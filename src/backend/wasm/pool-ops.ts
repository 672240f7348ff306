/**
 * The operations the thread pool runs, and the shared control block every thread reads. An op's work units (row
 * groups of 4 for matmuls, (tile of query rows, KV head, key segment) tasks for attention, rows for rmsNorm, quads
 * of tokens for the activation quantization) are cut into chunks that threads claim one at a time
 * from a ticket counter, so a thread the OS has descheduled does not hold the others up: whoever is running takes
 * the remaining chunks (the caller may end up doing all of them). Results never depend on who ran which chunk.
 *
 * Control block, i32 [CONTROL_INTS] at a fixed address in the shared memory:
 *   [0] generation (bumped by the caller to start an op)   [1] chunks completed   [2] op   [3] number of threads
 *   [6] error flag   [7] ticket = (generation & 0xffff) << 16 | next chunk   [8 ..] op arguments (f32 args as bits)
 *   [40] number of chunks   [41] number of work units   [42] the memory the op runs in (its kernel instance)
 *   [48 ..] per memory: per-thread scratch base, scratch stride (bytes)   [64 ..] MatmulQuant's table (GROUP_ROW rows)
 * A model larger than one wasm32 memory spreads over several (split-wasm-backend.ts): every thread instantiates the
 * kernels once per memory, and an op's addresses are offsets in the memory named at [42]. The block is in memory 0.
 * Everything an op reads lives here or in the kernels' memory: a thread's view of the memory's buffer is the size
 * the memory had when the view was made (a grown shared memory gets a new, longer buffer), so JS reads only this block.
 */
import type { KernelExports } from "./kernel-module.ts";

export const CTL = {
  generation: 0, completed: 1, op: 2, numThreads: 3, error: 6, ticket: 7, args: 8,
  numChunks: 40, numUnits: 41, memory: 42, scratch: 48, groupTable: 64,
} as const;

/** wasm32 memories one pool serves (8 x 4 GiB): the scratch slots [48, 64) hold a (base, stride) pair each */
export const MAX_MEMORIES = 8;

export enum PoolOp {
  MatmulQuant = 1,
  MatmulF32 = 2,
  Attention = 3,
  SiluMul = 4,
  AttentionMerge = 5,
  AttentionQ8 = 6,
  GeluMul = 7,
  Exit = 9,
  QuantizeActivations = 10,
  RmsNorm = 11,
  SwigluOai = 12,
  LoraDelta = 13,
  MatmulExperts = 14,
  QuantizeBatch = 15,
}

/**
 * MatmulQuant's table (i32): a header with the arguments the weights share, then one row per weight with its own
 * matmul_quant arguments and where its row groups start among the op's work units (the weights' row groups, one
 * after another; one weight, or several sharing an input).
 */
export const GROUP_HEADER = { numWeights: 0, cols: 1, numTokens: 2 } as const;
export const GROUP_HEADER_INTS = 3;
/** da per weight: the K-quants read the input's q8_K scales, the other kinds its q8_0 ones (quantizeTokens' rules) */
export const GROUP_ROW = { kind: 0, out: 1, wq: 2, ws: 3, wm: 4, rows: 5, zeroPoint: 6, acts: 7, sa: 8, qs: 9, quads: 10, firstUnit: 11, da: 12 } as const;
export const GROUP_ROW_INTS = 13;
/** weights one MatmulQuant op takes (q, k, v; a decode step's routed experts' gate and up: 2 x 8 for Qwen3-30B-A3B) */
export const MAX_GROUP_WEIGHTS = 16;
export const CONTROL_INTS = CTL.groupTable + GROUP_HEADER_INTS + MAX_GROUP_WEIGHTS * GROUP_ROW_INTS;

/** matmul_quant's scratch after its first 64 bytes: a segment of an 8-row tile's rows (kernels/matmul-quant.ts SEGMENT_GROUPS). */
export const TILE_SCRATCH_BYTES = 16 << 10;

/** Elements per work unit of SiluMul (exp-heavy: worth spreading over the threads during prefill). */
export const SILU_UNIT = 1024;

/** QuantizeActivations' arguments (i32): the f32 input, its shape, and the outputs of quantize_q8 / widen_q8 / splat_q8 /
 * splat_q8_i16; `rule`: QuantizeRule. */
export const QUANTIZE_ARGS = { x: 0, numTokens: 1, cols: 2, qa: 3, da: 4, sa32: 5, sa16: 6, ps32: 7, ps16: 8, qa16: 9, quads: 10, quads16: 11, rule: 12 } as const;

/**
 * How a matmul input is quantized, by the weights that read it (llama.cpp ggml-cpu.c type_traits_cpu's vec_dot_type):
 * Q8_0 per 32 values (quantize_q8) for the 32-value types, Q8_K per 256 (quantize_q8k) for Q4_K / Q5_K / Q6_K. Q8_K
 * writes qa, da (its d per 32), sa32 (bsums per 32, i32), ps16 and after the whole input's ps16 its compact pairs
 * (pc16 [numTokens, cols / 16] i32, where matmul_quant reads them: q8kPairsAt); sa16, ps32, qa16 and quads16 are unused.
 */
export enum QuantizeRule {
  Q8_0 = 0,
  Q8_K = 1,
}

/**
 * Tokens [from, to) of a matmul input quantized (wasm-backend.ts quantizeActivations' layout; qa16 / quads 0 when
 * unused). `from` is a multiple of 4 and so is `to` unless it is the end, so splat_q8 writes whole quads. The pool
 * runs it over units of 4 tokens; the caller runs it whole for a few tokens.
 */
export function quantizeTokens(k: KernelExports, a: ArrayLike<number>, at: number, from: number, to: number): void {
  const cols = a[at + QUANTIZE_ARGS.cols]!;
  const n = to - from;
  const groups32 = from * (cols >> 5);
  const qa = a[at + QUANTIZE_ARGS.qa]! + from * cols;
  if (a[at + QUANTIZE_ARGS.rule] === QuantizeRule.Q8_K) {
    const ps16 = a[at + QUANTIZE_ARGS.ps16]!;
    k.quantize_q8k(a[at + QUANTIZE_ARGS.x]! + from * cols * 4, n, cols, qa, a[at + QUANTIZE_ARGS.da]! + groups32 * 4,
      a[at + QUANTIZE_ARGS.sa32]! + groups32 * 4, ps16 + groups32 * 32, q8kPairsAt(ps16, a[at + QUANTIZE_ARGS.numTokens]!, cols) + groups32 * 8);
  } else {
    k.quantize_q8(a[at + QUANTIZE_ARGS.x]! + from * cols * 4, n, cols, qa, a[at + QUANTIZE_ARGS.da]! + groups32 * 4,
      a[at + QUANTIZE_ARGS.sa32]! + groups32 * 4, a[at + QUANTIZE_ARGS.sa16]! + groups32 * 8, a[at + QUANTIZE_ARGS.ps32]! + groups32 * 16,
      a[at + QUANTIZE_ARGS.ps16]! + groups32 * 32); // 16-byte pair-sum vectors per 32 and per 16 values
  }
  const qa16 = a[at + QUANTIZE_ARGS.qa16]!;
  if (qa16 !== 0) k.widen_q8(qa, n * cols, qa16 + from * cols * 2);
  // quads: [numTokens / 4, cols / 4, 4, 16] bytes of vectors, then quad_sums' [numTokens / 4, cols / 32, 32] bytes
  const quads = a[at + QUANTIZE_ARGS.quads]!;
  // a lone token's vectors packed (splat_q8_one: matmul_quant reads them so when numTokens is 1), no quad_sums
  if (quads !== 0 && a[at + QUANTIZE_ARGS.numTokens] === 1) k.splat_q8_one(qa, cols, quads);
  else if (quads !== 0) {
    k.splat_q8(qa, n, cols, quads + (from >> 2) * cols * 16);
    const sumsAt = (a[at + QUANTIZE_ARGS.numTokens]! >> 2) * cols * 16 + (from >> 2) * (cols >> 5) * QUAD_SUMS_BYTES;
    k.quad_sums(a[at + QUANTIZE_ARGS.da]! + groups32 * 4, a[at + QUANTIZE_ARGS.sa32]! + groups32 * 4, n, cols, quads + sumsAt);
  }
  const quads16 = a[at + QUANTIZE_ARGS.quads16]!;
  // a lone token's vectors packed (splat_q8_signed_one: matmul_quant reads them so when numTokens is 1)
  if (quads16 !== 0 && a[at + QUANTIZE_ARGS.numTokens] === 1) k.splat_q8_signed_one(qa, cols, quads16);
  else if (quads16 !== 0) k.splat_q8_i16(qa, n, cols, quads16 + (from >> 2) * cols * QUAD_I16_BYTES_PER_COLUMN); // no quad_sums
}

/**
 * Where quantize_q8k's compact pairs (pc16) of an input of numTokens x cols start: right after its ps16 (cols bytes
 * per token), where matmul_quant reads them for Q6_K's single tokens (kernels/matmul-k-tiles.ts u6Tile1).
 */
export function q8kPairsAt(ps16: number, numTokens: number, cols: number): number {
  return ps16 + numTokens * cols;
}

/** Bytes of kernels/quantize.ts quad_sums' block (a quad of tokens, 32 columns). */
export const QUAD_SUMS_BYTES = 32;

/** Bytes of a matmul input's 4-token-tile vectors (splat_q8 then quad_sums) for numTokens x cols. */
export function quadsBytes(numTokens: number, cols: number): number {
  return (numTokens >> 2) * (cols * 16 + (cols >> 5) * QUAD_SUMS_BYTES);
}

/** Bytes per column of a quad of tokens in kernels/quantize.ts splat_q8_i16's layout (QUAD_CHUNK_BYTES_I16 / 4). */
const QUAD_I16_BYTES_PER_COLUMN = 32;

/** Bytes of Q8_0's 4-token-tile vectors (splat_q8_i16) for numTokens x cols. */
export function quads16Bytes(numTokens: number, cols: number): number {
  return (numTokens >> 2) * cols * QUAD_I16_BYTES_PER_COLUMN;
}

/** [start, end) of `total` units for part `index` of `numParts`. */
export function share(total: number, index: number, numParts: number): [number, number] {
  return [Math.floor((total * index) / numParts), Math.floor((total * (index + 1)) / numParts)];
}

/** The ticket value that opens generation `generation` at chunk 0. */
export function openTicket(generation: number): number {
  return (generation & 0xffff) << 16;
}

/**
 * Work units [start, end) of the MatmulQuant table at ints[at ..]: each weight's row groups in that range. The pool
 * runs it on the table in the control block; the caller runs it whole on its own copy when the work is too small to
 * wake the threads.
 */
export function matmulTableRange(k: KernelExports, table: Int32Array, at: number, start: number, end: number, scratch: number): void {
  const cols = table[at + GROUP_HEADER.cols]!;
  const numTokens = table[at + GROUP_HEADER.numTokens]!;
  for (let i = 0; i < table[at + GROUP_HEADER.numWeights]!; i++) {
    const row = at + GROUP_HEADER_INTS + i * GROUP_ROW_INTS;
    const first = table[row + GROUP_ROW.firstUnit]!;
    const rows = table[row + GROUP_ROW.rows]!;
    const from = Math.max(start, first);
    const to = Math.min(end, first + Math.ceil(rows / 4));
    if (from >= to) continue;
    k.matmul_quant(table[row + GROUP_ROW.kind]!, table[row + GROUP_ROW.out]!, table[row + GROUP_ROW.wq]!, table[row + GROUP_ROW.ws]!,
      table[row + GROUP_ROW.wm]!, table[row + GROUP_ROW.acts]!, table[row + GROUP_ROW.da]!, table[row + GROUP_ROW.sa]!, rows, cols, numTokens,
      table[row + GROUP_ROW.zeroPoint]!, table[row + GROUP_ROW.qs]!, table[row + GROUP_ROW.quads]!, from - first, to - first, scratch);
  }
}

/** QuantizeBatch's table (in the group table's slots): the number of inputs, then per input QUANTIZE_ARGS and its first unit */
export const QUANTIZE_BATCH_INTS = 14;
export const MAX_QUANTIZE_BATCH = Math.floor((GROUP_HEADER_INTS + MAX_GROUP_WEIGHTS * GROUP_ROW_INTS - 1) / QUANTIZE_BATCH_INTS);

/**
 * Units [start, end) of QuantizeBatch: several small matmul inputs (a prefill's routed experts' rows, expert-matmul.ts)
 * quantized in one op, each input's quads of tokens its units, one input after another.
 */
function quantizeBatchRange(k: KernelExports, ctl: Int32Array, start: number, end: number): void {
  for (let i = 0; i < ctl[CTL.groupTable]!; i++) {
    const at = CTL.groupTable + 1 + i * QUANTIZE_BATCH_INTS;
    const first = ctl[at + QUANTIZE_BATCH_INTS - 1]!;
    const numTokens = ctl[at + QUANTIZE_ARGS.numTokens]!;
    const from = Math.max(start, first);
    const to = Math.min(end, first + Math.ceil(numTokens / 4));
    if (from < to) quantizeTokens(k, ctl, at, (from - first) * 4, Math.min((to - first) * 4, numTokens));
  }
}

/** Runs units [start, end) of the op in the control block on thread `tid`'s scratch. */
function runRange(k: KernelExports, ctl: Int32Array, ctlF: Float32Array, tid: number, start: number, end: number): void {
  const a = CTL.args;
  const memory = ctl[CTL.memory]!;
  const scratch = (ctl[CTL.scratch + 2 * memory]! >>> 0) + tid * ctl[CTL.scratch + 2 * memory + 1]!;
  switch (ctl[CTL.op]! as PoolOp) {
    case PoolOp.MatmulQuant:
      matmulTableRange(k, ctl, CTL.groupTable, start, end, scratch);
      return;
    case PoolOp.MatmulF32:
      k.matmul_f32(ctl[a]!, ctl[a + 1]!, ctl[a + 2]!, ctl[a + 3]!, ctl[a + 4]!, ctl[a + 5]!, start, end, scratch);
      return;
    case PoolOp.Attention:
      k.attention_f16(ctl[a]!, ctl[a + 1]!, ctl[a + 2]!, ctl[a + 3]!, ctl[a + 4]!, ctl[a + 5]!, ctl[a + 6]!, ctl[a + 7]!,
        ctl[a + 8]!, ctl[a + 9]!, ctl[a + 10]!, ctlF[a + 11]!, ctl[a + 12]!, ctl[a + 13]!, ctl[a + 14]!, scratch + 64, start, end);
      return;
    case PoolOp.AttentionQ8:
      k.attention_q8(ctl[a]!, ctl[a + 1]!, ctl[a + 2]!, ctl[a + 3]!, ctl[a + 4]!, ctl[a + 5]!, ctl[a + 6]!, ctl[a + 7]!,
        ctl[a + 8]!, ctl[a + 9]!, ctl[a + 10]!, ctlF[a + 11]!, ctl[a + 12]!, ctl[a + 13]!, ctl[a + 14]!, scratch + 64, start, end);
      return;
    case PoolOp.AttentionMerge:
      k.attention_merge(ctl[a]!, ctl[a + 1]!, ctl[a + 2]!, ctl[a + 3]!, ctl[a + 4]!, ctl[a + 5]!, ctl[a + 6]!, start, end);
      return;
    case PoolOp.SiluMul: {
      // units of SILU_UNIT elements: args out, gate, up, n
      const from = start * SILU_UNIT;
      const to = Math.min(end * SILU_UNIT, ctl[a + 3]!);
      if (from < to) k.silu_mul(ctl[a]! + from * 4, ctl[a + 1]! + from * 4, ctl[a + 2]! + from * 4, to - from);
      return;
    }
    case PoolOp.GeluMul: {
      // the same units and arguments as SiluMul
      const from = start * SILU_UNIT;
      const to = Math.min(end * SILU_UNIT, ctl[a + 3]!);
      if (from < to) k.gelu_mul(ctl[a]! + from * 4, ctl[a + 1]! + from * 4, ctl[a + 2]! + from * 4, to - from);
      return;
    }
    case PoolOp.SwigluOai: {
      // the same units as SiluMul; args out, gate, up, n, alpha (f32), limit (f32)
      const from = start * SILU_UNIT;
      const to = Math.min(end * SILU_UNIT, ctl[a + 3]!);
      if (from < to) k.swiglu_oai(ctl[a]! + from * 4, ctl[a + 1]! + from * 4, ctl[a + 2]! + from * 4, to - from, ctlF[a + 4]!, ctlF[a + 5]!);
      return;
    }
    case PoolOp.QuantizeActivations:
      // units of 4 tokens (whole quads for splat_q8)
      quantizeTokens(k, ctl, a, start * 4, Math.min(end * 4, ctl[a + QUANTIZE_ARGS.numTokens]!));
      return;
    case PoolOp.RmsNorm: {
      // units of rows: args out, x, w, numRows, dim, eps (f32)
      const dim = ctl[a + 4]!;
      k.rms_norm(ctl[a]! + start * dim * 4, ctl[a + 1]! + start * dim * 4, ctl[a + 2]!, end - start, dim, ctlF[a + 5]!);
      return;
    }
    case PoolOp.LoraDelta: {
      // units of the kernel's row groups: args out, x, rowSlots, slotTable, nIn, nOut, numRows; its tmp in the thread's scratch
      const group = k.lora_group_rows();
      k.lora_delta(ctl[a]!, ctl[a + 1]!, ctl[a + 2]!, start * group, Math.min(end * group, ctl[a + 6]!), ctl[a + 3]!, ctl[a + 4]!, ctl[a + 5]!, scratch + 64);
      return;
    }
    case PoolOp.MatmulExperts:
      // units: the entries' row groups; args table, numEntries, cols (kernels/moe-experts.ts; the table in the kernels' memory)
      k.matmul_experts(ctl[a]!, ctl[a + 1]!, ctl[a + 2]!, start, end, scratch);
      return;
    case PoolOp.QuantizeBatch:
      quantizeBatchRange(k, ctl, start, end);
      return;
    case PoolOp.Exit:
      return;
  }
}

/**
 * Claims and runs chunks of generation `generation` until none is left, on the kernel instance of the op's memory
 * (`kernels[i]` runs on memory i). A thread that wakes after its generation has ended finds a ticket of another
 * generation and returns without touching anything.
 */
export function workChunks(kernels: readonly KernelExports[], ctl: Int32Array, ctlF: Float32Array, tid: number, generation: number): void {
  const stamp = generation & 0xffff;
  for (;;) {
    const ticket = Atomics.load(ctl, CTL.ticket);
    if (ticket >>> 16 !== stamp) return;
    const chunk = ticket & 0xffff;
    const numChunks = ctl[CTL.numChunks]!;
    if (chunk >= numChunks) return;
    if (Atomics.compareExchange(ctl, CTL.ticket, ticket, ticket + 1) !== ticket) continue;
    // the claimed chunk keeps the op (and its arguments) alive until it is counted complete
    const [start, end] = share(ctl[CTL.numUnits]!, chunk, numChunks);
    try {
      runRange(kernels[ctl[CTL.memory]!]!, ctl, ctlF, tid, start, end);
    } catch {
      Atomics.store(ctl, CTL.error, 1);
    }
    if (Atomics.add(ctl, CTL.completed, 1) + 1 === numChunks) Atomics.notify(ctl, CTL.completed);
  }
}
