/**
 * The WebGPU row of test/conformance/backend.test.ts: the same cases as the WASM builds, on the adapter present
 * (lavapipe in CI). Skipped, with the reason, where no adapter opens (the probe has its own timeout).
 * The probe also compiles every shader once (warmUp), here at import, outside the suite's 5-second test timeouts:
 * lavapipe compiles at first dispatch, seconds per shader with a cold Mesa cache.
 */
import type { Backend } from "../../src/backend/backend.ts";
import { openDawnDevice } from "../../src/backend/webgpu/dawn-device.ts";
import { createWebGpuBackend } from "../../src/backend/webgpu/webgpu-backend.ts";

async function probe(): Promise<string | null> {
  try {
    const { device } = await openDawnDevice({ timeoutMs: 20_000 });
    device.destroy();
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
  const backend = await createWebGpuBackend({ timeoutMs: 20_000, log: () => {} });
  try {
    await backend.warmUp();
  } finally {
    backend.dispose();
  }
  return null;
}

const reason = await probe();

export const WEBGPU_CONFORMANCE_ENTRY = {
  name: "webgpu",
  create: (): Promise<Backend> => createWebGpuBackend({ timeoutMs: 20_000, log: () => {} }),
  unavailable: (): string | null => reason,
};
