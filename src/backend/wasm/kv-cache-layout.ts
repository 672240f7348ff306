/**
 * The WASM backend's KV cache in its heap: [numLayers, K|V, numBlocks, block] with a block of f16
 * [numKvHeads, blockSize, headDim], or for the 8-bit cache its int8 rows then one f32 scale per token
 * (kernels/kv-store.ts); its size per token, and copying whole blocks out and in (the KV offload tier).
 * @example kvCacheBytesPerToken({ numLayers: 32, numKvHeads: 8, headDim: 128, dtype: "f16" }) // 131072
 */
import type { KvCacheShape } from "../backend.ts";

/** An allocated cache: its shape, base address and the bytes of one layer's K (or V) and of one block of it. */
export interface KvState {
  readonly shape: KvCacheShape;
  readonly base: number;
  readonly layerPartBytes: number;
  readonly blockBytes: number;
}

/** K (or V) of one position in one layer, for allocKvCache and `fennec inspect`: f16 values, or int8 values and
 * the token's f32 scale (the 8-bit cache) */
export function kvBytesPerPositionPerLayerPart(shape: Pick<KvCacheShape, "numKvHeads" | "headDim" | "dtype">): number {
  const kvDim = shape.numKvHeads * shape.headDim;
  return shape.dtype === "q8" ? kvDim + 4 : kvDim * 2;
}

/** KV cache bytes one token position takes over all layers, K and V. */
export function kvCacheBytesPerToken(shape: Pick<KvCacheShape, "numLayers" | "numKvHeads" | "headDim" | "dtype">): number {
  return 2 * shape.numLayers * kvBytesPerPositionPerLayerPart(shape);
}

/** Address of one layer's K (part 0) or V (part 1). */
export function kvPartAddress(kv: KvState, layer: number, part: 0 | 1): number {
  return kv.base + (layer * 2 + part) * kv.layerPartBytes;
}

/** The bytes of blocks `blockIds` over every layer, K then V: [ids, layer, K|V, block bytes]. */
export function copyKvBlocksOut(kv: KvState, bytes: Uint8Array, blockIds: Int32Array): Uint8Array {
  const out = new Uint8Array(blockIds.length * kv.shape.numLayers * 2 * kv.blockBytes); // [ids, layer, K|V, numKvHeads, blockSize, headDim] f16
  let o = 0;
  for (const id of blockIds) {
    for (let l = 0; l < kv.shape.numLayers; l++) {
      for (const part of [0, 1] as const) {
        const at = kvPartAddress(kv, l, part) + id * kv.blockBytes;
        out.set(bytes.subarray(at, at + kv.blockBytes), o);
        o += kv.blockBytes;
      }
    }
  }
  return out;
}

/** copyKvBlocksOut's bytes written back into blocks `blockIds`. */
export function copyKvBlocksIn(kv: KvState, bytes: Uint8Array, blockIds: Int32Array, data: Uint8Array): void {
  const need = blockIds.length * kv.shape.numLayers * 2 * kv.blockBytes;
  if (data.length !== need) throw new Error(`importKvBlocks: ${data.length} bytes, expected ${need}`);
  let o = 0;
  for (const id of blockIds) {
    for (let l = 0; l < kv.shape.numLayers; l++) {
      for (const part of [0, 1] as const) {
        bytes.set(data.subarray(o, o + kv.blockBytes), kvPartAddress(kv, l, part) + id * kv.blockBytes);
        o += kv.blockBytes;
      }
    }
  }
}
