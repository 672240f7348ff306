/**
 * Development-only: compiles kernels/*.ts into build/kernels-<level>.wasm with asc (from node_modules) when a build
 * is missing or older than the sources. `bun test` and `bun run src/cli.ts` in a fresh clone then work without running
 * build.ts first; the compiled binary never calls this (it carries its kernels). The asc flags mirror build.ts
 * (KERNEL_BUILDS and compileKernels there).
 * @example ensureKernelBuilds(); // then read build/kernels-relaxed-simd.wasm
 */
import { existsSync, mkdirSync, readdirSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..", "..");

export const KERNEL_FEATURES = {
  scalar: ["threads"],
  simd: ["threads", "simd"],
  "relaxed-simd": ["threads", "simd", "relaxed-simd"],
} as const;

export type KernelLevel = keyof typeof KERNEL_FEATURES;

export function kernelBuildPath(level: KernelLevel): string {
  return join(root, "build", `kernels-${level}.wasm`);
}

/** Builds every level whose wasm is missing or stale; throws a one-line error when asc is unavailable or fails. */
export function ensureKernelBuilds(): void {
  const kernelsDir = join(root, "kernels");
  if (!existsSync(kernelsDir)) return; // not a source checkout: nothing to build from
  const newestSource = Math.max(...readdirSync(kernelsDir).map((f) => statSync(join(kernelsDir, f)).mtimeMs));
  mkdirSync(join(root, "build"), { recursive: true });
  for (const [level, features] of Object.entries(KERNEL_FEATURES)) {
    const out = kernelBuildPath(level as KernelLevel);
    if (existsSync(out) && statSync(out).mtimeMs >= newestSource) continue;
    const asc = join(root, "node_modules", ".bin", "asc");
    if (!existsSync(asc)) throw new Error(`wasm backend: ${out} is missing and asc is not installed (run npm install, then bun run build.ts)`);
    const tmp = `${out}.${process.pid}.tmp`;
    const proc = Bun.spawnSync([asc, join(kernelsDir, "index.ts"), "-O3", "--noAssert", "--runtime", "stub", "--importMemory",
      "--sharedMemory", "--initialMemory", "1", "--maximumMemory", "65536", ...features.flatMap((f) => ["--enable", f]), "-o", tmp], { cwd: root });
    if (proc.exitCode !== 0) throw new Error(`wasm backend: asc failed for the ${level} kernels: ${proc.stderr.toString().trim().split("\n")[0]}`);
    renameSync(tmp, out); // atomic: processes running in parallel never read a half-written wasm
  }
}
