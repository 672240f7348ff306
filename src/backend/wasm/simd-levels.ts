/**
 * The kernel builds, one table (slowest first): each level's asc features (kernel-build.ts compiles one wasm per row)
 * and the probe module that tells whether this runtime can run it (kernel-module.ts: WebAssembly.validate). The
 * embedded files are kernel-files.ts (one static import per row, so the bundler sees them).
 * @example for (const level of SIMD_LEVELS) console.log(level, KERNEL_BUILDS[level].features);
 */
export type SimdLevel = "scalar" | "simd" | "relaxed-simd";

export interface KernelBuild {
  /** asc --enable flags */
  readonly features: readonly string[];
  /** the smallest module using one instruction of the level (hand-assembled bytes) */
  readonly probe: Uint8Array;
}

export const KERNEL_BUILDS: Readonly<Record<SimdLevel, KernelBuild>> = {
  scalar: { features: ["threads"], probe: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]) },
  simd: {
    features: ["threads", "simd"],
    // (func (result v128) v128.const 0)
    probe: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 22, 1, 20, 0, 253, 12,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11]),
  },
  "relaxed-simd": {
    features: ["threads", "simd", "relaxed-simd"],
    // (func (result v128) v128.const 0 v128.const 0 v128.const 0 i32x4.relaxed_dot_i8x16_i7x16_add_s)
    probe: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 61, 1, 59, 0,
      253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      253, 147, 2, 11]),
  },
};

/** every level, slowest first */
export const SIMD_LEVELS = Object.keys(KERNEL_BUILDS) as readonly SimdLevel[];
