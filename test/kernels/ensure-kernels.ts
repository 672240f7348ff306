/**
 * Tests need build/kernels-*.wasm and `bun test` does not run build.ts: build them here when missing or older than
 * kernels/*.ts (the backend's loader does the same on demand; calling this first keeps the build out of test timings).
 * Other suites that run models on the wasm backend call this too.
 * @example await ensureKernels();
 */
import { ensureKernelBuilds } from "../../src/backend/wasm/kernel-build.ts";

export async function ensureKernels(): Promise<void> {
  ensureKernelBuilds();
}
