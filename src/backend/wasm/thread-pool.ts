/**
 * Persistent kernel threads on the one shared memory. The caller is thread 0: `run` writes the op into the control
 * block, bumps the generation and wakes the workers, runs its own share, then waits (spin, then Atomics.wait) until
 * every worker has counted itself done. With one thread there are no workers and `run` is a plain call.
 * @example const pool = await ThreadPool.start(module, heap, kernels, 2); pool.run(PoolOp.MatmulF32, args);
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import type { KernelExports } from "./kernel-module.ts";
import { CONTROL_INTS, CTL, PoolOp, runShare } from "./pool-ops.ts";
import type { PoolWorkerInit } from "./pool-worker.ts";
import type { WasmHeap } from "./wasm-memory.ts";

/** Spin this many polls before sleeping in Atomics.wait: a futex wake costs tens of us, an op a few hundred. */
const SPIN_ITERATIONS = 20000;

/**
 * Where the worker's code is. From source: next to this file. Inside a `bun build --compile` binary every entry point
 * sits under /$bunfs/root at its path relative to the entry points' common folder (src/ for build.ts's list, so
 * backend/wasm/pool-worker.js), and import.meta.url names the binary itself, so look the file up there.
 */
function workerUrl(): string {
  if (!import.meta.url.includes("$bunfs")) return new URL("./pool-worker.ts", import.meta.url).href;
  const root = dirname(Bun.main);
  const candidates = ["backend/wasm/pool-worker.js", "src/backend/wasm/pool-worker.js", "wasm/pool-worker.js", "pool-worker.js"];
  for (const rel of candidates) if (existsSync(join(root, rel))) return join(root, rel);
  throw new Error(`wasm backend: the kernel thread code is not in this binary (looked for ${candidates.join(", ")} under ${root}); build with build.ts`);
}

export class ThreadPool {
  private constructor(
    private readonly kernels: KernelExports,
    private readonly workers: Worker[],
    private readonly ctl: Int32Array,
    private readonly ctlF: Float32Array,
  ) {}

  get numThreads(): number {
    return this.workers.length + 1;
  }

  static async start(module: WebAssembly.Module, heap: WasmHeap, kernels: KernelExports, numThreads: number): Promise<ThreadPool> {
    const control = heap.alloc(CONTROL_INTS * 4);
    const ctl = new Int32Array(heap.memory.buffer, control, CONTROL_INTS);
    const ctlF = new Float32Array(heap.memory.buffer, control, CONTROL_INTS);
    ctl.fill(0);
    ctl[CTL.numThreads] = numThreads;
    const workers: Worker[] = [];
    const ready: Promise<void>[] = [];
    const url = numThreads > 1 ? workerUrl() : "";
    for (let tid = 1; tid < numThreads; tid++) {
      const worker = new Worker(url);
      ready.push(new Promise((resolve, reject) => {
        worker.onmessage = () => resolve();
        worker.onerror = (e) => reject(new Error(`wasm backend: kernel thread ${tid} failed to start: ${e.message}`));
      }));
      const init: PoolWorkerInit = { module, memory: heap.memory, control, tid, spinIterations: SPIN_ITERATIONS };
      worker.postMessage(init);
      workers.push(worker);
    }
    await Promise.all(ready);
    return new ThreadPool(kernels, workers, ctl, ctlF);
  }

  setScratch(base: number, strideBytes: number): void {
    this.ctl[CTL.scratchBase] = base;
    this.ctl[CTL.scratchStride] = strideBytes;
  }

  /** Runs `op` on every thread; args are i32 (addresses, counts) except the f32 slots listed in floatArgs. */
  run(op: PoolOp, args: readonly number[], floatArgs: ReadonlyMap<number, number> = new Map()): void {
    const { ctl, ctlF } = this;
    ctl[CTL.op] = op;
    for (let i = 0; i < args.length; i++) ctl[CTL.args + i] = args[i]!;
    for (const [i, v] of floatArgs) ctlF[CTL.args + i] = v;
    const numWorkers = this.workers.length;
    if (numWorkers > 0) {
      Atomics.store(ctl, CTL.done, 0);
      Atomics.add(ctl, CTL.generation, 1);
      Atomics.notify(ctl, CTL.generation);
    }
    runShare(this.kernels, ctl, ctlF, 0);
    if (numWorkers === 0) return;
    let spins = 0;
    for (;;) {
      const done = Atomics.load(ctl, CTL.done);
      if (done >= numWorkers) break;
      if (++spins > SPIN_ITERATIONS) Atomics.wait(ctl, CTL.done, done, 1000);
    }
    if (ctl[CTL.error] !== 0) {
      ctl[CTL.error] = 0;
      throw new Error(`wasm backend: a kernel thread trapped during op ${PoolOp[op]}`);
    }
  }

  /** Stops the workers (they leave their loop on the Exit op) and terminates them. */
  stop(): void {
    if (this.workers.length > 0) this.run(PoolOp.Exit, []);
    for (const w of this.workers) w.terminate();
    this.workers.length = 0;
  }
}
