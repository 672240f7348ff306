/**
 * serve's vision side: the projector named by --mmproj, or the one mmproj*.gguf beside a local model file (as
 * llama.cpp's -hf finds a repository's mmproj file), loaded on the vision encoder's thread and checked against the
 * language model's width; its encoder-cache counts go to /metrics.
 */
import { existsSync, readdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { MediaSettings } from "../config/media-settings.ts";
import type { VisionServing } from "../server/openai/chat-completion/image-inputs.ts";
import { RuntimeFailure } from "../util/cli-error.ts";
import { VisionEncoder } from "../vision/vision-client.ts";

const PROJECTOR_FILE = /^mmproj.*\.gguf$/i;

/**
 * --mmproj, else the only mmproj*.gguf in the model file's folder when that folder holds one model (a repository's
 * layout, as -hf downloads it; in a folder of several models no projector says which model it belongs to), else null.
 */
export function projectorPath(media: MediaSettings, model: string | null): string | null {
  if (media.mmproj !== null) return media.mmproj;
  if (media.noMmproj || model === null || !model.endsWith(".gguf") || !existsSync(model)) return null;
  const dir = dirname(model);
  const files = readdirSync(dir).filter((f) => f.toLowerCase().endsWith(".gguf") && f !== basename(model));
  const projectors = files.filter((f) => PROJECTOR_FILE.test(f));
  const otherModels = files.filter((f) => !PROJECTOR_FILE.test(f) && !/-0000[2-9]-of-\d+\.gguf$/i.test(f));
  return projectors.length === 1 && otherModels.length === 0 ? join(dir, projectors[0]!) : null;
}

/**
 * The started encoder, or null for a text-only model. A bad --mmproj fails the start with one line; a projector only
 * found beside the model that does not load or fit is left out with one warning line (the model serves text).
 */
export async function startVisionServing(media: MediaSettings, model: string | null, modelDim: number, log: (line: string, level?: "WARNING") => void,
  onCacheCounts: (queries: number, hits: number) => void): Promise<VisionServing | null> {
  const path = projectorPath(media, model);
  if (path === null) return null;
  const fail = (message: string): null => {
    if (media.mmproj !== null) throw new RuntimeFailure(message);
    log(`${message}; serving text only (--mmproj FILE names a projector)`, "WARNING");
    return null;
  };
  if (!existsSync(path)) return fail(`--mmproj ${path}: no such file`);
  const started = await VisionEncoder.start(path, { cacheBytes: media.encoderCacheBytes });
  if (!started.ok) return fail(`vision projector ${path}: ${started.error}`);
  const encoder = started.value;
  const { info } = encoder;
  if (info.projectionDim !== modelDim) {
    encoder.dispose();
    return fail(`vision projector ${path} projects to width ${info.projectionDim}, the model's embeddings are ${modelDim} wide: it belongs to another model`);
  }
  log(`vision projector ${path}${media.mmproj === null ? " (found beside the model; --no-mmproj to leave it out)" : ""}: ${info.projector}, ${info.tokensPerImage > 0 ? `${info.imageSize} px images, ${info.tokensPerImage} tokens each` : "image tokens by each image's size"}; image_url parts are taken (at most ${media.maxImagesPerPrompt} per prompt)`);
  return { encoder, media, onCacheCounts };
}
