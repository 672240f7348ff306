/**
 * A kernel thread: instantiates the kernel module on each shared memory (one, or several for a model larger than one
 * wasm32 memory; the control block is in the first), then loops on the control block
 * (pool-ops.ts): wait for a new generation (spin a little, then Atomics.wait), claim and run chunks until none is
 * left. No postMessage per op. Listed as an entry point of the compiled binary in build.ts.
 */
import type { KernelExports } from "./kernel-module.ts";
import { CONTROL_INTS, CTL, PoolOp, workChunks } from "./pool-ops.ts";

export interface PoolWorkerInit {
  readonly module: WebAssembly.Module;
  /** the kernels' memories; the control block is in memories[0] */
  readonly memories: readonly WebAssembly.Memory[];
  /** byte address of the control block */
  readonly control: number;
  readonly tid: number;
  readonly spinIterations: number;
}

declare const self: Worker;

self.onmessage = (event: MessageEvent<PoolWorkerInit>) => {
  const { module, memories, control, tid, spinIterations } = event.data;
  const kernels = memories.map((memory) => new WebAssembly.Instance(module, { env: { memory } }).exports as unknown as KernelExports);
  const ctl = new Int32Array(memories[0]!.buffer, control, CONTROL_INTS);
  const ctlF = new Float32Array(memories[0]!.buffer, control, CONTROL_INTS);
  let seen = Atomics.load(ctl, CTL.generation);
  self.postMessage("ready");
  for (;;) {
    let spins = 0;
    while (Atomics.load(ctl, CTL.generation) === seen) {
      if (++spins > spinIterations) {
        Atomics.wait(ctl, CTL.generation, seen);
        spins = 0;
      }
    }
    seen = Atomics.load(ctl, CTL.generation);
    if (ctl[CTL.op] === PoolOp.Exit) break;
    workChunks(kernels, ctl, ctlF, tid, seen);
  }
  self.postMessage("exited");
};
