/**
 * Tests need build/kernels-*.wasm; `bun test` does not run the build, so build them here when missing or older than
 * kernels/*.ts. The asc flags mirror build.ts (KERNEL_BUILDS and compileKernels there). Other suites that run models on
 * the wasm backend call this too.
 * @example await ensureKernels();
 */
import { existsSync, mkdirSync, readdirSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..");
const BUILDS = [
  { name: "scalar", features: ["threads"] },
  { name: "simd", features: ["threads", "simd"] },
  { name: "relaxed-simd", features: ["threads", "simd", "relaxed-simd"] },
] as const;

export async function ensureKernels(): Promise<void> {
  const kernelsDir = join(root, "kernels");
  const newestSource = Math.max(...readdirSync(kernelsDir).map((f) => statSync(join(kernelsDir, f)).mtimeMs));
  mkdirSync(join(root, "build"), { recursive: true });
  for (const build of BUILDS) {
    const out = join(root, "build", `kernels-${build.name}.wasm`);
    if (existsSync(out) && statSync(out).mtimeMs >= newestSource) continue;
    const enable = build.features.flatMap((f) => ["--enable", f]);
    const proc = Bun.spawnSync([join(root, "node_modules/.bin/asc"), join(kernelsDir, "index.ts"), "-O3", "--noAssert",
      "--runtime", "stub", "--importMemory", "--sharedMemory", "--initialMemory", "1", "--maximumMemory", "65536",
      ...enable, "-o", `${out}.${process.pid}.tmp`], { cwd: root });
    if (proc.exitCode !== 0) throw new Error(`asc failed for ${build.name}: ${proc.stderr.toString()}`);
    renameSync(`${out}.${process.pid}.tmp`, out); // atomic: test files running in parallel never read a half-written wasm
  }
}
