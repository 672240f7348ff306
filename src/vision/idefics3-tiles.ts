/**
 * SmolVLM / Idefics3 images as llama.cpp's mtmd cuts them (tools/mtmd/mtmd-image.cpp
 * mtmd_image_preprocessor_idefics3, the preproc_image_size path; HF Idefics3ImageProcessor resize_for_vision_encoder):
 * resize keeping the aspect ratio so the longest edge is `longestEdge` (the other side truncated, then made even), resize
 * again so both sides are whole tiles (rounded up), cut that into image_size tiles row by row, and resize it to one
 * image_size overview (preprocess.ts normalises each with the projector's mean and std). Then where each tile's embeddings go in
 * the prompt (mtmd.cpp, MTMD_SLICE_TMPL_IDEFICS3 in the mtmd_context constructor and mtmd_tokenize's slice loop).
 */
import { resizeRgb, type RgbImage } from "./image-resize.ts";
import type { VisionConfig } from "./mmproj.ts";
import type { ImageLayoutPiece } from "./vision-protocol.ts";

/** How an image is tiled: grid columns and rows, and the sizes of the two resizes. */
export interface Idefics3Grid {
  readonly cols: number;
  readonly rows: number;
  /** the aspect-preserving resize to the longest edge */
  readonly resized: { readonly width: number; readonly height: number };
}

function longestEdgeOf(c: VisionConfig): number {
  if (c.longestEdge === undefined) throw new Error(`an ${c.projector} projector without clip.vision.preproc_image_size`);
  return c.longestEdge;
}

/** The grid of an image of width x height (depends on the size only, so a cached image's layout needs no pixels). */
export function idefics3Grid(width: number, height: number, c: VisionConfig): Idefics3Grid {
  const edge = longestEdgeOf(c);
  const aspect = width / height;
  let w: number, h: number;
  // C's int cast truncates; an odd side is made even (img_tool sizes in mtmd_image_preprocessor_idefics3)
  if (width >= height) {
    w = edge;
    h = Math.trunc(edge / aspect);
    h += h % 2;
  } else {
    h = edge;
    w = Math.trunc(edge * aspect);
    w += w % 2;
  }
  if (w <= 0 || h <= 0) throw new Error(`an image of ${width}x${height} pixels is too narrow to resize to a longest edge of ${edge}`);
  const t = c.imageSize;
  return { cols: Math.ceil(w / t), rows: Math.ceil(h / t), resized: { width: w, height: h } };
}

/** The encoder's images: the tiles row by row, then the overview (the order of the prompt's embeddings). */
export function idefics3Tiles(img: RgbImage, c: VisionConfig): RgbImage[] {
  const grid = idefics3Grid(img.width, img.height, c);
  const t = c.imageSize;
  const resized = resizeRgb(img, grid.resized.width, grid.resized.height, c.resizeAlgo);
  const refinedWidth = grid.cols * t;
  const refined = resizeRgb(resized, refinedWidth, grid.rows * t, c.resizeAlgo);
  const tiles: RgbImage[] = [];
  for (let ty = 0; ty < grid.rows; ty++) {
    for (let tx = 0; tx < grid.cols; tx++) {
      const data = new Uint8Array(t * t * 3); // [t][t][3]
      for (let y = 0; y < t; y++) {
        const from = ((ty * t + y) * refinedWidth + tx * t) * 3;
        data.set(refined.data.subarray(from, from + t * 3), y * t * 3);
      }
      tiles.push({ width: t, height: t, data });
    }
  }
  tiles.push(resizeRgb(refined, t, t, c.resizeAlgo));
  return tiles;
}


/**
 * Each tile as `<fake_token_around_image><row_R_col_C>` and its rows, "\n" after every row of tiles but the last, then
 * the overview as "\n\n<fake_token_around_image><global-img>", its rows, `<fake_token_around_image>` (HF
 * Idefics3Processor's _prompt_split_image, which the chat template's `<image>` stands for).
 */
export function idefics3Layout(grid: Idefics3Grid, rowsPerTile: number): ImageLayoutPiece[] {
  const out: ImageLayoutPiece[] = [];
  for (let r = 1; r <= grid.rows; r++) {
    for (let col = 1; col <= grid.cols; col++) out.push({ text: `<fake_token_around_image><row_${r}_col_${col}>` }, { rows: rowsPerTile });
    if (r < grid.rows) out.push({ text: "\n" });
  }
  out.push({ text: "\n\n<fake_token_around_image><global-img>" }, { rows: rowsPerTile }, { text: "<fake_token_around_image>" });
  return out;
}
