/**
 * Picks and compiles a kernel build: the best one this runtime validates (relaxed SIMD > SIMD > scalar), or the one
 * asked for. Also the typed view of the kernels' exports (the ABI of kernels/index.ts).
 * @example const { module, level } = await loadKernelModule(); // level: "relaxed-simd" on Bun 1.4
 */
import { KERNEL_BUILDS, SIMD_LEVELS, type SimdLevel } from "./simd-levels.ts";

/** Exports of kernels/index.ts; addresses are byte offsets in the shared memory. */
export interface KernelExports {
  heap_base(): number;
  simd_level(): number;
  quantize_q8(x: number, numTokens: number, cols: number, qa: number, da: number, sa32: number, sa16: number, ps32: number, ps16: number): void;
  quantize_q8k(x: number, numTokens: number, cols: number, qa: number, da: number, bs32: number, ps16: number, pc16: number): void;
  widen_q8(qa: number, n: number, out: number): void;
  splat_q8(qa: number, numTokens: number, cols: number, out: number): void;
  splat_q8_i16(qa: number, numTokens: number, cols: number, out: number): void;
  splat_q8_one(qa: number, cols: number, out: number): void;
  splat_q8_signed_one(qa: number, cols: number, out: number): void;
  quad_sums(da: number, sa32: number, numTokens: number, cols: number, out: number): void;
  matmul_quant(kind: number, out: number, wq: number, ws: number, wm: number, qa: number, da: number, sa: number,
    rows: number, cols: number, numTokens: number, zeroPoint: number, qs: number, quads: number, groupStart: number, groupEnd: number, tmp: number): void;
  matmul_f32(out: number, w: number, x: number, rows: number, cols: number, numTokens: number, groupStart: number, groupEnd: number, tmp: number): void;
  kv_store_f16(kLayer: number, vLayer: number, k: number, v: number, slots: number, numRows: number, numKvHeads: number, headDim: number, blockSize: number): void;
  attention_f16(out: number, q: number, kLayer: number, vLayer: number, rowInfo: number, tasks: number, partials: number,
    numHeads: number, numKvHeads: number, headDim: number, blockSize: number, scale: number, window: number, firstKeys: number, sinks: number, scratch: number, taskStart: number, taskEnd: number): void;
  kv_store_q8(kLayer: number, vLayer: number, k: number, v: number, slots: number, numRows: number, numKvHeads: number, headDim: number, blockSize: number): void;
  attention_q8(out: number, q: number, kLayer: number, vLayer: number, rowInfo: number, tasks: number, partials: number,
    numHeads: number, numKvHeads: number, headDim: number, blockSize: number, scale: number, window: number, firstKeys: number, sinks: number, scratch: number, taskStart: number, taskEnd: number): void;
  attention_segment_keys(): number;
  attention_tile_rows(): number;
  attention_scratch_floats(groupSize: number, headDim: number): number;
  attention_merge(out: number, partials: number, merges: number, numHeads: number, numKvHeads: number, headDim: number, sinks: number, taskStart: number, taskEnd: number): void;
  rms_norm(out: number, x: number, w: number, numRows: number, dim: number, eps: number): void;
  rope_table(table: number, positions: number, numRows: number, ropeDim: number, thetas: number, mscale: number): void;
  rope(x: number, table: number, numRows: number, numHeads: number, headDim: number, ropeDim: number, neox: number): void;
  silu_mul(out: number, gate: number, up: number, n: number): void;
  gelu_mul(out: number, gate: number, up: number, n: number): void;
  swiglu_oai(out: number, gate: number, up: number, n: number, alpha: number, limit: number): void;
  scale(x: number, s: number, n: number): void;
  add(out: number, a: number, b: number, n: number): void;
  add_bias(x: number, bias: number, numRows: number, n: number): void;
  lora_delta(out: number, x: number, rowSlots: number, rowStart: number, rowEnd: number, slotTable: number, nIn: number, nOut: number, tmp: number): void;
  lora_group_rows(): number;
  matmul_experts(table: number, numEntries: number, cols: number, start: number, end: number, tmp: number): void;
  weighted_row_sum(out: number, src: number, weights: number, numRows: number, k: number, cols: number): void;
  dequant_row(kind: number, dst: number, wq: number, ws: number, wm: number, row: number, cols: number, zeroPoint: number): void;
  stream_read(ptr: number, numBytes: number): number;
}

/** the table's levels, fastest first (the table lists them slowest first) */
const SIMD_LEVELS_BEST_FIRST: readonly SimdLevel[] = [...SIMD_LEVELS].reverse();

/** Whether this runtime can run a level (shared memory is required by all builds). */
export function supportsLevel(level: SimdLevel): boolean {
  if (typeof SharedArrayBuffer === "undefined") return false;
  return WebAssembly.validate(KERNEL_BUILDS[level].probe);
}

export function bestLevel(): SimdLevel {
  for (const level of SIMD_LEVELS_BEST_FIRST) if (supportsLevel(level)) return level;
  return "scalar";
}

/**
 * Compiles the chosen build; throws a one-line error when the runtime lacks the level or the kernels cannot be found.
 * From source the wasm files are read from build/ (built on demand by kernel-build.ts); inside the compiled binary
 * they are the embedded files of kernel-files.ts.
 */
export async function loadKernelModule(level: SimdLevel = bestLevel()): Promise<{ module: WebAssembly.Module; level: SimdLevel }> {
  if (!supportsLevel(level)) throw new Error(`wasm backend: this runtime does not support the ${level} kernel build`);
  let path: string;
  if (import.meta.url.includes("$bunfs")) {
    path = (await import("./kernel-files.ts")).KERNEL_FILES[level];
  } else {
    const { ensureKernelBuilds, kernelBuildPath } = await import("./kernel-build.ts");
    ensureKernelBuilds();
    path = kernelBuildPath(level);
  }
  const bytes = await Bun.file(path).arrayBuffer();
  return { module: await WebAssembly.compile(bytes), level };
}
