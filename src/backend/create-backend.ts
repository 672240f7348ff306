/**
 * The one place a backend is chosen: the model runner and the engine call this with the parsed CLI options.
 * @example const backend = await createBackend({ kind: "wasm", threads: 2 });
 */
import type { Backend } from "./backend.ts";
import { ReferenceBackend } from "./reference.ts";
import type { MemoryPlan } from "./wasm/memory-plan.ts";
import type { SimdLevel } from "./wasm/simd-levels.ts";

export type BackendKind = "reference" | "wasm" | "webgpu";

export interface BackendOptions {
  readonly kind: BackendKind;
  /** kernel threads (wasm); default: the number of cores */
  readonly threads?: number;
  /** force a kernel build (wasm); default: the best one this runtime validates */
  readonly simd?: SimdLevel;
  /** where the model's layers go when it needs more than one wasm32 memory (wasm/memory-plan.ts); default: one memory */
  readonly memoryPlan?: MemoryPlan;
}

export async function createBackend(options: BackendOptions): Promise<Backend> {
  switch (options.kind) {
    case "reference":
      return new ReferenceBackend();
    case "wasm": {
      if (options.memoryPlan !== undefined && options.memoryPlan.numMemories > 1) {
        const { createSplitWasmBackend } = await import("./wasm/split-wasm-backend.ts");
        return createSplitWasmBackend({ threads: options.threads, simd: options.simd }, options.memoryPlan);
      }
      const { createWasmBackend } = await import("./wasm/wasm-backend.ts");
      return createWasmBackend({ threads: options.threads, simd: options.simd });
    }
    case "webgpu": {
      // throws WebGpuUnavailableError (one line; exit 2 at the CLI) when there is no adapter or the device fails
      const { createWebGpuBackend } = await import("./webgpu/webgpu-backend.ts");
      return createWebGpuBackend();
    }
  }
}

/** The placement of a model over wasm32 memories and the sizes it is planned from (for the engine's start-up). */
export { planMemories, WASM32_MEMORY_BYTES, type MemoryPlan, type PlannedWeight } from "./wasm/memory-plan.ts";
export { kvCacheBytesPerToken } from "./wasm/kv-cache-layout.ts";
