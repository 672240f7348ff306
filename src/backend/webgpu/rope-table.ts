/**
 * The WebGPU backend's RoPE tables: per angle table (model/rope-scaling.ts), the [numPositions, ropeDim / 2] (cos, sin)
 * pairs times mscale, computed in f64 as the reference backend does and uploaded once; a longer sequence grows the
 * table by doubling.
 */
import type { RopeAngles } from "../backend.ts";

export interface RopeTable {
  readonly buffer: GPUBuffer;
  readonly numPositions: number;
}

/** warmUp's rope: 8 dims, base 10000 */
export const WARM_UP_ROPE: RopeAngles = { ropeDim: 8, thetas: Float64Array.from({ length: 4 }, (_, i) => Math.pow(10000, -i / 4)), mscale: 1 };

/** [size, ropeDim / 2, (cos, sin)] x mscale for positions 0 .. size - 1 */
export function ropeCosSin(angles: RopeAngles, size: number): Float32Array<ArrayBuffer> {
  const half = angles.ropeDim / 2;
  const cs = new Float32Array(size * half * 2);
  for (let pos = 0; pos < size; pos++) {
    for (let i = 0; i < half; i++) {
      const theta = pos * angles.thetas[i]!;
      cs[(pos * half + i) * 2] = Math.cos(theta) * angles.mscale;
      cs[(pos * half + i) * 2 + 1] = Math.sin(theta) * angles.mscale;
    }
  }
  return cs;
}

/** The table size for `numPositions`: at least 1,024, doubled until it holds them. */
export function ropeTableSize(numPositions: number): number {
  return Math.max(1024, 2 ** Math.ceil(Math.log2(numPositions)));
}
