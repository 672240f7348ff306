/**
 * How `serve` takes images: the projector file, where image URLs may come from, and how many per prompt (vLLM's
 * MultiModalConfig and the media connector's flags, llama.cpp's --mmproj). Built by command-line/media-flags.ts.
 */

export interface MediaSettings {
  /** --mmproj (llama.cpp): the projector GGUF; null: none (text only) unless one is found beside the model */
  readonly mmproj: string | null;
  /** --no-mmproj (llama.cpp): never look for a projector beside the model */
  readonly noMmproj: boolean;
  /** --allowed-media-domains: http(s) image URLs only from these hosts; null: any host (vLLM's default) */
  readonly allowedMediaDomains: readonly string[] | null;
  /** --allowed-local-media-path: file:// image URLs only under this directory; null: no local files */
  readonly allowedLocalMediaPath: string | null;
  /** --limit-mm-per-prompt: at most this many images in one prompt (vLLM's default: 999 per modality) */
  readonly maxImagesPerPrompt: number;
  /** VLLM_IMAGE_FETCH_TIMEOUT: seconds an image URL has to answer (vLLM's default 5) */
  readonly fetchTimeoutS: number;
  /** bytes one encoded image may have, fetched or in a data URL */
  readonly maxImageBytes: number;
  /** --mm-processor-cache-gb: bytes of image embeddings the encoder cache keeps (0: none) */
  readonly encoderCacheBytes: number;
}

/** vLLM's limit per modality when --limit-mm-per-prompt leaves it out */
export const DEFAULT_MAX_ITEMS_PER_PROMPT = 999;
/** OpenAI's limit on one image input: 20 MB */
export const DEFAULT_MAX_IMAGE_BYTES = 20 * 1024 * 1024;

export const DEFAULT_MEDIA_SETTINGS: MediaSettings = {
  mmproj: null, noMmproj: false, allowedMediaDomains: null, allowedLocalMediaPath: null,
  maxImagesPerPrompt: DEFAULT_MAX_ITEMS_PER_PROMPT, fetchTimeoutS: 5, maxImageBytes: DEFAULT_MAX_IMAGE_BYTES,
  // vLLM's mm_processor_cache_gb default
  encoderCacheBytes: 4 * 2 ** 30,
};
