/**
 * The operations the thread pool runs, and the shared control block both sides read. Every thread runs the same
 * function over its own share of the work units (row groups of 4 for matmuls, (row, head) tasks for attention).
 *
 * Control block, i32 [CONTROL_INTS] at a fixed address in the shared memory:
 *   [0] generation (bumped by the caller to start an op)   [1] threads finished   [2] op   [3] number of threads
 *   [4] per-thread scratch base   [5] scratch stride (bytes)   [6] error flag   [8 ..] op arguments (f32 args as bits)
 */
import type { KernelExports } from "./kernel-module.ts";

export const CONTROL_INTS = 64;
export const CTL = { generation: 0, done: 1, op: 2, numThreads: 3, scratchBase: 4, scratchStride: 5, error: 6, args: 8 } as const;

export enum PoolOp {
  MatmulQuant = 1,
  MatmulF32 = 2,
  Attention = 3,
  Exit = 9,
}

/** [start, end) of `total` units for thread `tid` of `numThreads`. */
export function share(total: number, tid: number, numThreads: number): [number, number] {
  return [Math.floor((total * tid) / numThreads), Math.floor((total * (tid + 1)) / numThreads)];
}

/** Runs thread `tid`'s share of the op in the control block. */
export function runShare(k: KernelExports, ctl: Int32Array, ctlF: Float32Array, tid: number): void {
  const n = ctl[CTL.numThreads]!;
  const a = CTL.args;
  const scratch = (ctl[CTL.scratchBase]! >>> 0) + tid * ctl[CTL.scratchStride]!;
  switch (ctl[CTL.op]! as PoolOp) {
    case PoolOp.MatmulQuant: {
      const [start, end] = share(ctl[a + 12]!, tid, n);
      if (start < end) {
        k.matmul_quant(ctl[a]!, ctl[a + 1]!, ctl[a + 2]!, ctl[a + 3]!, ctl[a + 4]!, ctl[a + 5]!, ctl[a + 6]!, ctl[a + 7]!,
          ctl[a + 8]!, ctl[a + 9]!, ctl[a + 10]!, start, end, scratch);
      }
      return;
    }
    case PoolOp.MatmulF32: {
      const [start, end] = share(ctl[a + 6]!, tid, n);
      if (start < end) k.matmul_f32(ctl[a]!, ctl[a + 1]!, ctl[a + 2]!, ctl[a + 3]!, ctl[a + 4]!, ctl[a + 5]!, start, end, scratch);
      return;
    }
    case PoolOp.Attention: {
      const [start, end] = share(ctl[a + 9]!, tid, n);
      if (start < end) {
        k.attention_f16(ctl[a]!, ctl[a + 1]!, ctl[a + 2]!, ctl[a + 3]!, ctl[a + 4]!, ctl[a + 5]!, ctl[a + 6]!, ctl[a + 7]!,
          ctl[a + 8]!, ctlF[a + 10]!, scratch + 64, start, end);
      }
      return;
    }
    case PoolOp.Exit:
      return;
  }
}
