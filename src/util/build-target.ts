/**
 * The release targets: one `bun build --compile` target per row, the binary `dist/fennec-<target>`. build.ts
 * writes the chosen target into the binary (FENNEC_TARGET, a compile-time define), so `fennec --version` names
 * the build it is; from source the target is "source" with the runtime's platform.
 * @example const name = currentTarget(); // "linux-arm64" inside dist/fennec-linux-arm64
 */

export const BUILD_TARGETS = {
  /** x86-64 with AVX2 (Haswell, 2013, and newer): Bun's default build */
  "linux-x64": { bun: "bun-linux-x64-modern", arch: "x64" },
  /** x86-64 without AVX2 (older or emulated CPUs): Bun's baseline build */
  "linux-x64-baseline": { bun: "bun-linux-x64-baseline", arch: "x64" },
  /** 64-bit ARM (Graviton, Ampere, Raspberry Pi 4/5, Jetson) */
  "linux-arm64": { bun: "bun-linux-arm64", arch: "arm64" },
} as const;
export type BuildTarget = keyof typeof BUILD_TARGETS;

declare const FENNEC_TARGET: string | undefined;

/** The target this binary was built for; `source (linux-x64)` when run from the sources. */
export function currentTarget(): string {
  return typeof FENNEC_TARGET === "string" ? FENNEC_TARGET : `source (${process.platform}-${process.arch})`;
}
