/**
 * Persistent kernel threads on the shared memories (one, or several for a model larger than one wasm32 memory:
 * every thread has a kernel instance per memory). The caller is thread 0: `run` writes the op and its memory into
 * the control block (in memory 0), opens its chunk ticket, bumps the generation and wakes the workers, claims chunks
 * itself like any worker, then waits (spin, then Atomics.wait) until every chunk is complete. With one thread there
 * are no workers. A backend drives one memory through `forMemory(i)`; the threads and barriers are shared.
 * @example const pool = await ThreadPool.start(module, [heap], [kernels], 2); pool.forMemory(0).run(PoolOp.MatmulF32, args, units);
 */
import { workerEntryUrl } from "../../util/compiled-entry.ts";
import type { KernelExports } from "./kernel-module.ts";
import { CONTROL_INTS, CTL, MAX_MEMORIES, openTicket, PoolOp, workChunks } from "./pool-ops.ts";
import type { PoolWorkerInit } from "./pool-worker.ts";
import type { WasmHeap } from "./wasm-memory.ts";

/** Spin this many polls before sleeping in Atomics.wait: a futex wake costs tens of us, an op a few hundred. */
const SPIN_ITERATIONS = 20000;
/** An op's work is cut into this many chunks per thread: an op ends with its last chunk, so the other threads idle
 * about half a chunk at its end (at 4 per thread, 1/16 of every prefill matmul on 2 threads), and a thread the OS
 * deschedules holds up at most one chunk. */
const CHUNKS_PER_THREAD = 16;

/** The pool as one memory's backend sees it: ops whose addresses are offsets in that memory. */
export class MemoryPool {
  constructor(private readonly pool: ThreadPool, readonly memory: number) {}

  get numThreads(): number {
    return this.pool.numThreads;
  }

  setScratch(base: number, strideBytes: number): void {
    this.pool.setScratch(this.memory, base, strideBytes);
  }

  run(op: PoolOp, args: readonly number[], numUnits: number, floatArgs?: ReadonlyMap<number, number>, table?: Int32Array): void {
    this.pool.run(this.memory, op, args, numUnits, floatArgs, table);
  }

  /** Stops the shared threads (every memory's backend may call it; the second call does nothing). */
  stop(): void {
    this.pool.stop();
  }
}

export class ThreadPool {
  private constructor(
    /** one instance per memory, on this thread */
    private readonly kernels: readonly KernelExports[],
    private readonly workers: Worker[],
    private readonly ctl: Int32Array,
    private readonly ctlF: Float32Array,
  ) {}

  get numThreads(): number {
    return this.workers.length + 1;
  }

  /** `heaps[i]` and `kernels[i]` (this thread's instance on it) per memory; the control block goes in heaps[0]. */
  static async start(module: WebAssembly.Module, heaps: readonly WasmHeap[], kernels: readonly KernelExports[], numThreads: number): Promise<ThreadPool> {
    if (heaps.length < 1 || heaps.length > MAX_MEMORIES || kernels.length !== heaps.length) throw new Error(`wasm backend: ${heaps.length} memories (1..${MAX_MEMORIES} with one kernel instance each)`);
    const heap = heaps[0]!;
    const control = heap.alloc(CONTROL_INTS * 4);
    const ctl = new Int32Array(heap.memory.buffer, control, CONTROL_INTS);
    const ctlF = new Float32Array(heap.memory.buffer, control, CONTROL_INTS);
    ctl.fill(0);
    ctl[CTL.numThreads] = numThreads;
    const workers: Worker[] = [];
    const ready: Promise<void>[] = [];
    const url = numThreads > 1 ? workerEntryUrl(import.meta.url, "./pool-worker.ts", "backend/wasm/pool-worker.js") : "";
    for (let tid = 1; tid < numThreads; tid++) {
      const worker = new Worker(url);
      ready.push(new Promise((resolve, reject) => {
        worker.onmessage = () => resolve();
        worker.onerror = (e) => reject(new Error(`wasm backend: kernel thread ${tid} failed to start: ${e.message}`));
      }));
      const init: PoolWorkerInit = { module, memories: heaps.map((h) => h.memory), control, tid, spinIterations: SPIN_ITERATIONS };
      worker.postMessage(init);
      workers.push(worker);
    }
    await Promise.all(ready);
    for (const w of workers) (w as Worker & { unref(): void }).unref(); // a backend nobody disposed must not keep the process alive
    return new ThreadPool(kernels, workers, ctl, ctlF);
  }

  get numMemories(): number {
    return this.kernels.length;
  }

  forMemory(memory: number): MemoryPool {
    if (!(memory >= 0 && memory < this.kernels.length)) throw new Error(`wasm backend: no memory ${memory} in a pool of ${this.kernels.length}`);
    return new MemoryPool(this, memory);
  }

  setScratch(memory: number, base: number, strideBytes: number): void {
    this.ctl[CTL.scratch + 2 * memory] = base;
    this.ctl[CTL.scratch + 2 * memory + 1] = strideBytes;
  }

  /**
   * Runs `op` over `numUnits` work units of `memory` on every thread that is running (the caller included) and
   * returns when all are done; args are i32 (addresses, counts) except the f32 slots listed in floatArgs; `table`
   * (MatmulQuant's) is copied to the control block's table slots.
   */
  run(memory: number, op: PoolOp, args: readonly number[], numUnits: number, floatArgs: ReadonlyMap<number, number> = new Map(), table?: Int32Array): void {
    const { ctl, ctlF } = this;
    ctl[CTL.op] = op;
    ctl[CTL.memory] = memory;
    if (table !== undefined) ctl.set(table, CTL.groupTable);
    for (let i = 0; i < args.length; i++) ctl[CTL.args + i] = args[i]!;
    for (const [i, v] of floatArgs) ctlF[CTL.args + i] = v;
    const numChunks = Math.max(1, Math.min(numUnits, this.numThreads * CHUNKS_PER_THREAD, 0xffff));
    ctl[CTL.numChunks] = numChunks;
    ctl[CTL.numUnits] = numUnits;
    Atomics.store(ctl, CTL.completed, 0);
    const generation = (ctl[CTL.generation]! + 1) | 0;
    Atomics.store(ctl, CTL.ticket, openTicket(generation));
    Atomics.store(ctl, CTL.generation, generation);
    if (this.workers.length > 0) Atomics.notify(ctl, CTL.generation);
    workChunks(this.kernels, ctl, ctlF, 0, generation);
    let spins = 0;
    for (;;) {
      const completed = Atomics.load(ctl, CTL.completed);
      if (completed >= numChunks) break;
      if (++spins > SPIN_ITERATIONS) Atomics.wait(ctl, CTL.completed, completed, 1000);
    }
    if (ctl[CTL.error] !== 0) {
      ctl[CTL.error] = 0;
      throw new Error(`wasm backend: a kernel trapped during op ${PoolOp[op]}`);
    }
  }

  /** Stops the workers (they leave their loop on the Exit op) and terminates them. */
  stop(): void {
    if (this.workers.length > 0) {
      this.ctl[CTL.op] = PoolOp.Exit;
      Atomics.add(this.ctl, CTL.generation, 1);
      Atomics.notify(this.ctl, CTL.generation);
    }
    for (const w of this.workers) w.terminate();
    this.workers.length = 0;
  }
}
