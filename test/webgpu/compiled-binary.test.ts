/**
 * `bun build --compile` carries the WebGPU path: the Dawn addon is required by a literal path (dawn-device.ts), so the
 * bundler embeds it and the binary runs a shader from a directory with no node_modules in reach.
 */
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

setDefaultTimeout(120_000);
const ROOT = join(import.meta.dir, "../..");
const dir = mkdtempSync(join(tmpdir(), "fennec-webgpu-bin-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a compiled binary runs a WebGPU matmul from elsewhere, the addon inside it", async () => {
  const binary = join(dir, "probe");
  const build = Bun.spawnSync([process.execPath, "build", "--compile", "test/webgpu/fixtures/compiled-probe.ts", "--outfile", binary], { cwd: ROOT, stderr: "pipe" });
  expect(build.exitCode).toBe(0);
  const dawnBytes = statSync(join(ROOT, "node_modules/webgpu/dist/linux-x64/dawn.node")).size;
  expect(statSync(binary).size).toBeGreaterThan(dawnBytes);
  const run = Bun.spawn([binary], { cwd: dir, env: { PATH: "/usr/bin:/bin", HOME: dir }, stdout: "pipe", stderr: "pipe" });
  expect(await run.exited).toBe(0);
  // [[1, 2], [3, 4]] . [10, 1]
  expect(await new Response(run.stdout).text()).toBe("webgpu 12,34\n");
});
