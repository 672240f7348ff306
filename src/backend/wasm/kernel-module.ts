/**
 * Picks and compiles a kernel build: the best one this runtime validates (relaxed SIMD > SIMD > scalar), or the one
 * asked for. Also the typed view of the kernels' exports (the ABI of kernels/index.ts).
 * @example const { module, level } = await loadKernelModule(); // level: "relaxed-simd" on Bun 1.4
 */
export type SimdLevel = "scalar" | "simd" | "relaxed-simd";

/** Exports of kernels/index.ts; addresses are byte offsets in the shared memory. */
export interface KernelExports {
  heap_base(): number;
  simd_level(): number;
  quantize_q8(x: number, numTokens: number, cols: number, qa: number, da: number, sa32: number, sa16: number, qs32: number, qs16: number): void;
  widen_q8(qa: number, n: number, out: number): void;
  splat_q8(qa: number, numTokens: number, cols: number, out: number): void;
  matmul_quant(kind: number, out: number, wq: number, ws: number, wm: number, qa: number, da: number, sa: number,
    rows: number, cols: number, numTokens: number, zeroPoint: number, qs: number, quads: number, groupStart: number, groupEnd: number, tmp: number): void;
  matmul_f32(out: number, w: number, x: number, rows: number, cols: number, numTokens: number, groupStart: number, groupEnd: number, tmp: number): void;
  kv_store_f16(kLayer: number, vLayer: number, k: number, v: number, slots: number, numRows: number, numKvHeads: number, headDim: number, blockSize: number): void;
  attention_f16(out: number, q: number, kLayer: number, vLayer: number, rowInfo: number, tasks: number, partials: number,
    numHeads: number, numKvHeads: number, headDim: number, blockSize: number, scale: number, scratch: number, taskStart: number, taskEnd: number): void;
  attention_segment_keys(): number;
  attention_merge(out: number, partials: number, merges: number, numHeads: number, numKvHeads: number, headDim: number, taskStart: number, taskEnd: number): void;
  rms_norm(out: number, x: number, w: number, numRows: number, dim: number, eps: number): void;
  rope_table(table: number, positions: number, numRows: number, ropeDim: number, freqBase: number): void;
  rope(x: number, table: number, numRows: number, numHeads: number, headDim: number, ropeDim: number, neox: number): void;
  silu_mul(out: number, gate: number, up: number, n: number): void;
  add(out: number, a: number, b: number, n: number): void;
  add_bias(x: number, bias: number, numRows: number, n: number): void;
  dequant_row(kind: number, dst: number, wq: number, ws: number, wm: number, row: number, cols: number, zeroPoint: number): void;
  stream_read(ptr: number, numBytes: number): number;
}

/** Feature probes: the smallest modules using one instruction of each level (hand-assembled bytes). */
const PROBES: Readonly<Record<SimdLevel, Uint8Array>> = {
  scalar: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]),
  // (func (result v128) v128.const 0)
  simd: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 22, 1, 20, 0, 253, 12,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11]),
  // (func (result v128) v128.const 0 v128.const 0 v128.const 0 i32x4.relaxed_dot_i8x16_i7x16_add_s)
  "relaxed-simd": new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 61, 1, 59, 0,
    253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    253, 147, 2, 11]),
};

/** Whether this runtime can run a level (shared memory is required by all builds). */
export function supportsLevel(level: SimdLevel): boolean {
  if (typeof SharedArrayBuffer === "undefined") return false;
  return WebAssembly.validate(PROBES[level]);
}

export function bestLevel(): SimdLevel {
  for (const level of ["relaxed-simd", "simd"] as const) if (supportsLevel(level)) return level;
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
