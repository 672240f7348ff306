/**
 * The Idefics3 projector's pixel shuffle (space to depth), as llama.cpp's clip_graph::build_patch_merge_permute does it
 * for PROJECTOR_TYPE_IDEFICS3 (tools/mtmd/models/siglip.cpp; HF Idefics3Connector.pixel_shuffle): each s x s block of
 * the side x side patch grid becomes one token whose features are the block's patches, row by row, each `dim` wide.
 * The mm.model.fc matmul after it is the encoders' own (reference-encoder.ts, backend-encoder.ts).
 */

/**
 * x [side * side][dim] (patch p = y * side + x) to [(side / s)^2][dim * s * s]: token ty * (side / s) + tx holds, at
 * feature (dy * s + dx) * dim + e, patch (ty * s + dy, tx * s + dx)'s feature e.
 */
export function pixelShuffle(x: Float32Array, side: number, dim: number, s: number): Float32Array {
  if (side % s !== 0 || x.length !== side * side * dim) throw new Error(`pixel shuffle: a ${side} x ${side} grid of width ${dim} does not merge by ${s}`);
  const out = new Float32Array(x.length); // [(side / s)^2][dim * s * s]
  const outSide = side / s;
  let at = 0;
  for (let ty = 0; ty < outSide; ty++) {
    for (let tx = 0; tx < outSide; tx++) {
      for (let dy = 0; dy < s; dy++) {
        for (let dx = 0; dx < s; dx++) {
          const from = ((ty * s + dy) * side + tx * s + dx) * dim;
          out.set(x.subarray(from, from + dim), at);
          at += dim;
        }
      }
    }
  }
  return out;
}
