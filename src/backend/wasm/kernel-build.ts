/**
 * How the kernels are compiled, once for build.ts and for development: kernels/*.ts -> build/kernels-<level>.wasm
 * with asc (from node_modules). ensureKernelBuilds rebuilds a level when its wasm is missing or older than the
 * sources, so `bun test` and `bun run src/cli.ts` in a fresh clone work without running build.ts first; the compiled
 * binary never calls it (it carries its kernels).
 * @example ensureKernelBuilds(); // then read build/kernels-relaxed-simd.wasm
 */
import { existsSync, mkdirSync, readdirSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";
import { KERNEL_BUILDS, SIMD_LEVELS, type SimdLevel } from "./simd-levels.ts";

const root = join(import.meta.dir, "..", "..", "..");
const kernelsDir = join(root, "kernels");

export function kernelBuildPath(level: SimdLevel): string {
  return join(root, "build", `kernels-${level}.wasm`);
}

/** The asc command line that compiles the `level` build into `out` (run from the repository root). */
export function ascCommand(level: SimdLevel, out: string): string[] {
  return [join(root, "node_modules", ".bin", "asc"), join(kernelsDir, "index.ts"), "-O3", "--noAssert", "--runtime", "stub",
    "--importMemory", "--sharedMemory", "--initialMemory", "1", "--maximumMemory", "65536",
    ...KERNEL_BUILDS[level].features.flatMap((f) => ["--enable", f]), "-o", out];
}

/** Builds every level whose wasm is missing or stale; throws a one-line error when asc is unavailable or fails. */
export function ensureKernelBuilds(): void {
  if (!existsSync(kernelsDir)) return; // not a source checkout: nothing to build from
  const newestSource = Math.max(...readdirSync(kernelsDir).map((f) => statSync(join(kernelsDir, f)).mtimeMs));
  mkdirSync(join(root, "build"), { recursive: true });
  for (const level of SIMD_LEVELS) {
    const out = kernelBuildPath(level);
    if (existsSync(out) && statSync(out).mtimeMs >= newestSource) continue;
    const command = ascCommand(level, `${out}.${process.pid}.tmp`);
    if (!existsSync(command[0]!)) throw new Error(`wasm backend: ${out} is missing and asc is not installed (run npm install, then bun run build.ts)`);
    const proc = Bun.spawnSync(command, { cwd: root });
    if (proc.exitCode !== 0) throw new Error(`wasm backend: asc failed for the ${level} kernels: ${proc.stderr.toString().trim().split("\n")[0]}`);
    renameSync(command.at(-1)!, out); // atomic: processes running in parallel never read a half-written wasm
  }
}
