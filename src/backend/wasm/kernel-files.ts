/**
 * The three kernel builds, embedded as files: during development these are paths under build/, inside the compiled
 * binary they are /$bunfs paths (one per row of simd-levels.ts). Built by `bun run build.ts` (asc; see kernel-build.ts).
 */
import scalarPath from "../../../build/kernels-scalar.wasm" with { type: "file" };
import simdPath from "../../../build/kernels-simd.wasm" with { type: "file" };
import relaxedPath from "../../../build/kernels-relaxed-simd.wasm" with { type: "file" };
import type { SimdLevel } from "./simd-levels.ts";

/** one file per row of KERNEL_BUILDS (simd-levels.ts); a static import each, so the bundler embeds them */
export const KERNEL_FILES: Readonly<Record<SimdLevel, string>> = {
  scalar: scalarPath,
  simd: simdPath,
  "relaxed-simd": relaxedPath,
};
