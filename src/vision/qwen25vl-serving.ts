/**
 * Qwen2.5-VL in the vision encoder's thread (vision-worker.ts): the projector read, the encoder on the kernels, and
 * per image the smart-resized tile encoded into a cols x rows grid of embeddings, which the engine places with M-RoPE
 * positions (MultimodalInput.mropeGrid). In the prompt, the chat template's <|vision_start|><|image_pad|><|vision_end|>
 * keeps its begin and end, and the <|image_pad|> becomes one placeholder per embedding row (llama.cpp mtmd.cpp's
 * img_beg / img_end around the image's tokens).
 */
import type { Backend } from "../backend/backend.ts";
import type { GgufFile } from "../gguf/gguf-file.ts";
import { err, ok, type Result } from "../util/result.ts";
import type { RgbImage } from "./image-resize.ts";
import type { ImageMarkers } from "./projector-markers.ts";
import { Qwen25vlBackendEncoder } from "./qwen25vl-backend-encoder.ts";
import { QWEN25VL_PROJECTOR, readQwen25vlConfig, readQwen25vlWeights } from "./qwen25vl-mmproj.ts";
import { preprocessQwen25vl, qwen25vlTargetSize } from "./qwen25vl-preprocess.ts";
import type { VisionInfo } from "./vision-protocol.ts";

/** the template writes begin and end itself: <|image_pad|> alone is replaced by the rows */
export const QWEN25VL_MARKERS: ImageMarkers = { templateMarker: "<|image_pad|>", begin: "", soft: "<|image_pad|>", end: "", attendAhead: false };

export interface Qwen25vlServing {
  readonly info: VisionInfo;
  /** what the preprocessing depends on, for the image hash */
  readonly processorKey: string;
  embed(img: RgbImage): Promise<Float32Array>;
  /** the token grid of an image of this size (the smart resize's size / 28) */
  grid(width: number, height: number): { cols: number; rows: number };
}

/** Whether a projector file is Qwen2.5-VL's. */
export function isQwen25vlProjector(file: GgufFile): boolean {
  return file.metadata.get("clip.projector_type")?.value === QWEN25VL_PROJECTOR;
}

/** The projector on a backend, or one line saying why not. */
export function loadQwen25vlServing(file: GgufFile, backend: () => Promise<Backend>): Promise<Result<Qwen25vlServing>> {
  const config = readQwen25vlConfig(file);
  if (!config.ok) return Promise.resolve(config);
  const weights = readQwen25vlWeights(file, config.value);
  if (!weights.ok) return Promise.resolve(weights);
  const c = config.value;
  return backend().then((b) => {
    const encoder = new Qwen25vlBackendEncoder(c, weights.value, b);
    const align = c.patchSize * c.merge;
    return ok({
      // tokensPerImage 0: the count follows each image's size ((width / 28) x (height / 28) after the smart resize)
      info: { projector: QWEN25VL_PROJECTOR, tokensPerImage: 0, rowsFollowImage: true, projectionDim: c.projectionDim, imageSize: 0, markers: QWEN25VL_MARKERS },
      processorKey: JSON.stringify({ projector: QWEN25VL_PROJECTOR, min: c.minPixels, max: c.maxPixels, mean: c.imageMean, std: c.imageStd }),
      embed: (img: RgbImage) => encoder.embed(preprocessQwen25vl(img, c)),
      grid(width: number, height: number) {
        const size = qwen25vlTargetSize(width, height, align, c.minPixels, c.maxPixels);
        return { cols: size.width / align, rows: size.height / align };
      },
    });
  }, (e: unknown) => err(`the vision encoder's kernels did not start: ${e instanceof Error ? e.message : String(e)}`));
}
