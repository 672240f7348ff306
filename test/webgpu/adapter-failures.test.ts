/**
 * What happens when WebGPU is missing or breaks: no adapter gives one WebGpuUnavailableError line and exit code 2 (also through the
 * real `fennec generate --device webgpu`) within seconds, never a hang; a device lost while in use resolves
 * `backend.lost` and makes later calls throw that reason, without crashing the process.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { GgmlType, WEIGHT_TYPES, byteSize } from "../../src/tensor/dtypes.ts";
import { createWebGpuBackend } from "../../src/backend/webgpu/webgpu-backend.ts";
import { readGolden } from "../helpers/default-model-files.ts";

setDefaultTimeout(60_000);
const ROOT = join(import.meta.dir, "../..");

// what src/cli.ts does with the CliError `generate` turns it into, around createBackend({ kind: "webgpu" })
const PROBE = `
import { createBackend } from "./src/backend/create-backend.ts";
import { WebGpuUnavailableError } from "./src/backend/webgpu/dawn-device.ts";
try {
  const b = await createBackend({ kind: "webgpu" });
  process.stdout.write("adapter " + b.name + "\\n");
  b.dispose();
} catch (e) {
  if (!(e instanceof WebGpuUnavailableError)) throw e;
  process.stderr.write("fennec: " + e.message + "\\n");
  process.exit(2);
}`;

test("no Vulkan driver: one 'no WebGPU adapter' line and exit code 2, within seconds", async () => {
  const started = performance.now();
  const proc = Bun.spawn([process.execPath, "-e", PROBE], {
    cwd: ROOT,
    env: { ...process.env, VK_ICD_FILENAMES: "/nonexistent/icd.json", VK_DRIVER_FILES: "/nonexistent/icd.json" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill(), 30_000);
  const code = await proc.exited;
  clearTimeout(timer);
  const stderr = await new Response(proc.stderr).text();
  // Dawn's own Vulkan warnings come first; fennec's verdict is exactly one line
  const ours = stderr.split("\n").filter((l) => l.startsWith("fennec:"));
  expect(ours).toEqual(["fennec: no WebGPU adapter: install a Vulkan driver (see scripts/install-vulkan.sh)"]);
  expect(code).toBe(2);
  expect(performance.now() - started).toBeLessThan(30_000);
});

test("the real CLI: `fennec generate --device webgpu` without a driver is one line and exit code 2", async () => {
  const proc = Bun.spawn([process.execPath, "src/cli.ts", "generate", "--device", "webgpu", "--max-tokens", "2"], {
    cwd: ROOT,
    env: { ...process.env, VK_ICD_FILENAMES: "/nonexistent/icd.json", VK_DRIVER_FILES: "/nonexistent/icd.json" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill(), 60_000);
  expect(await proc.exited).toBe(2);
  clearTimeout(timer);
  const ours = (await new Response(proc.stderr).text()).split("\n").filter((l) => l.startsWith("fennec:"));
  expect(ours).toEqual(["fennec: no WebGPU adapter: install a Vulkan driver (see scripts/install-vulkan.sh)"]);
});

test("the real CLI with the driver: greedy `fennec generate --device webgpu` gives the golden ids", async () => {
  const golden = readGolden();
  const proc = Bun.spawn([process.execPath, "src/cli.ts", "generate", "--device", "webgpu", "--max-tokens", "24", "--temperature", "0", "--json"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  expect(await proc.exited).toBe(0);
  const out = JSON.parse(await new Response(proc.stdout).text()) as { token_ids: number[] };
  expect(out.token_ids).toEqual(golden.greedyFromBos.ids.slice(0, 24));
});

test("with the driver present the same probe finds the adapter", async () => {
  const proc = Bun.spawn([process.execPath, "-e", PROBE], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  expect(await proc.exited).toBe(0);
  expect(await new Response(proc.stdout).text()).toBe("adapter webgpu\n");
});

test("device loss: `lost` resolves with the reason, later calls throw it, nothing crashes", async () => {
  const lines: string[] = [];
  const backend = await createWebGpuBackend({ log: (l) => lines.push(l) });
  const f32 = WEIGHT_TYPES.find((w) => w.type === GgmlType.F32)!;
  const data = new Uint8Array(byteSize(f32, 8 * 4));
  f32.quantize(Float32Array.from({ length: 32 }, (_, i) => i), data, 32);
  const w = backend.loadWeight({ name: "w", type: GgmlType.F32, rows: 8, cols: 4, data });
  const x = backend.alloc(4);
  const out = backend.alloc(8);
  backend.write(x, Float32Array.from([1, 0, 0, 0]));
  backend.matmul(out, w, x, 1);
  expect(Array.from(await backend.read(out, 8))).toEqual([0, 4, 8, 12, 16, 20, 24, 28]);

  backend.matmul(out, w, x, 1); // recorded, not yet submitted when the device goes
  backend.device.destroy();
  const reason = await backend.lost;
  expect(reason).toStartWith("webgpu device lost (destroyed)");
  expect(lines).toEqual([`fennec: ${reason}`]);
  expect(() => backend.matmul(out, w, x, 1)).toThrow(reason);
  await expect(backend.read(out, 8)).rejects.toThrow(reason);
  backend.dispose();
});
