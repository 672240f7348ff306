/**
 * The messages between the main thread (vision-client.ts) and the vision encoder's thread (vision-worker.ts): images
 * in as encoded bytes, one embedding block per image out, or one line saying why an image cannot be used.
 */
import type { DecodeLimits } from "./image-decode.ts";
import type { ImageMarkers } from "./projector-markers.ts";

/** What the server needs to know of a loaded projector. */
export interface VisionInfo {
  readonly projector: string;
  /** soft tokens (embedding rows) per image: Gemma 3's 256; a tiled projector's per tile (SmolVLM's 64); 0 where it
   * follows the image's size (Qwen2.5-VL) */
  readonly tokensPerImage: number;
  /** the rows (and markers) an image takes follow its size (Qwen2.5-VL's grid, SmolVLM's tiles): counting them means
   * preprocessing the image */
  readonly rowsFollowImage?: boolean;
  /** width of each row: the language model's embedding width */
  readonly projectionDim: number;
  readonly imageSize: number;
  /** where the embeddings go in the prompt */
  readonly markers: ImageMarkers;
}

/** A piece of a tiled image's place in the prompt: text (special tokens parsed) or the next tile's embedding rows. */
export type ImageLayoutPiece = { readonly text: string } | { readonly rows: number };

/** One image's embeddings and its content hash (vLLM's mm_hash: the decoded pixels and the processor settings). */
export interface EncodedImage {
  readonly hash: string;
  /** [tokensPerImage][projectionDim]; a tiled image: every tile's rows in layout order */
  readonly embeddings: Float32Array;
  /** a tiled image (Idefics3): its tiles' markers and rows in prompt order, in place of begin, rows, end */
  readonly layout?: readonly ImageLayoutPiece[];
  /** found in the encoder cache: not encoded again */
  readonly cacheHit: boolean;
  readonly width: number;
  readonly height: number;
  /** M-RoPE projectors (Qwen2.5-VL): the embeddings' token grid, cols x rows, row-major */
  readonly grid?: { readonly cols: number; readonly rows: number };
}

export type ToVision =
  | { readonly type: "init"; readonly mmprojPath: string; readonly cacheBytes: number }
  | { readonly type: "encode"; readonly id: number; readonly images: readonly Uint8Array[]; readonly limits: DecodeLimits };

export type FromVision =
  | { readonly type: "ready"; readonly info: VisionInfo }
  | { readonly type: "initError"; readonly message: string }
  | { readonly type: "encoded"; readonly id: number; readonly images: readonly EncodedImage[] }
  /** image `index` of the request cannot be used: the message names why */
  | { readonly type: "refused"; readonly id: number; readonly index: number; readonly message: string };
