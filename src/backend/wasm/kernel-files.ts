/**
 * The three kernel builds, embedded as files: during development these are paths under build/, inside the compiled
 * binary they are /$bunfs paths. Built by `bun run build.ts` (asc; see kernel-build.ts).
 */
import scalarPath from "../../../build/kernels-scalar.wasm" with { type: "file" };
import simdPath from "../../../build/kernels-simd.wasm" with { type: "file" };
import relaxedPath from "../../../build/kernels-relaxed-simd.wasm" with { type: "file" };

export const KERNEL_FILES = {
  scalar: scalarPath,
  simd: simdPath,
  "relaxed-simd": relaxedPath,
} as const;
