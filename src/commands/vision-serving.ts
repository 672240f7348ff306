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

/** --mmproj, else the only mmproj*.gguf in the model file's folder, else null. */
export function projectorPath(media: MediaSettings, model: string | null): string | null {
  if (media.mmproj !== null) return media.mmproj;
  if (media.noMmproj || model === null || !model.endsWith(".gguf") || !existsSync(model)) return null;
  const dir = dirname(model);
  const found = readdirSync(dir).filter((f) => /^mmproj.*\.gguf$/i.test(f) && f !== basename(model));
  return found.length === 1 ? join(dir, found[0]!) : null;
}

/** The started encoder, or null for a text-only model; a bad projector fails the start with one line. */
export async function startVisionServing(media: MediaSettings, model: string | null, modelDim: number, log: (line: string) => void,
  onCacheCounts: (queries: number, hits: number) => void): Promise<VisionServing | null> {
  const path = projectorPath(media, model);
  if (path === null) return null;
  if (!existsSync(path)) throw new RuntimeFailure(`--mmproj ${path}: no such file`);
  const started = await VisionEncoder.start(path, { cacheBytes: media.encoderCacheBytes });
  if (!started.ok) throw new RuntimeFailure(`vision projector ${path}: ${started.error}`);
  const encoder = started.value;
  const { info } = encoder;
  if (info.projectionDim !== modelDim) {
    encoder.dispose();
    throw new RuntimeFailure(`vision projector ${path} projects to width ${info.projectionDim}, the model's embeddings are ${modelDim} wide: it belongs to another model`);
  }
  log(`vision projector ${path}${media.mmproj === null ? " (found beside the model; --no-mmproj to leave it out)" : ""}: ${info.projector}, ${info.imageSize} px images, ${info.tokensPerImage} tokens each; image_url parts are taken (at most ${media.maxImagesPerPrompt} per prompt)`);
  return { encoder, media, onCacheCounts };
}
