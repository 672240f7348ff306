/**
 * Where an image's embeddings go in the prompt, per projector (llama.cpp mtmd.cpp, the mtmd_context constructor's
 * img_beg / img_end, and the HF chat template's image marker): the template writes `templateMarker` for each image
 * part, and each one becomes `begin`, one `soft` placeholder per embedding row, `end`. The soft placeholders share one
 * token id; the prefix cache tells images apart by their content hash.
 */
import type { ProjectorType } from "./clip-names.ts";

export interface ImageMarkers {
  /** the text the chat template writes for one image part */
  readonly templateMarker: string;
  readonly begin: string;
  /** the placeholder token of each embedding row (Gemma 3's processor: <image_soft_token>) */
  readonly soft: string;
  readonly end: string;
  /** the image's rows see each other both ways (llama.cpp mtmd_decode_use_non_causal) */
  readonly attendAhead: boolean;
}

export const PROJECTOR_MARKERS: Readonly<Record<ProjectorType, ImageMarkers>> = {
  gemma3: { templateMarker: "<start_of_image>", begin: "<start_of_image>", soft: "<image_soft_token>", end: "<end_of_image>", attendAhead: true },
  // the tiles' own markers are the image's layout (idefics3-tiles.ts idefics3Layout); causal like the text
  idefics3: { templateMarker: "<image>", begin: "<fake_token_around_image>", soft: "<image>", end: "<fake_token_around_image>", attendAhead: false },
};
