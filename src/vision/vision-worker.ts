/**
 * The vision encoder's thread: loads the projector once, then per request decodes each image (header checked first),
 * looks it up in the encoder cache by content hash, and encodes the misses (preprocess, the reference encoder), so
 * decoding and encoding never hold up the HTTP thread or the engine's steps.
 */
import { readGguf } from "../gguf/reader.ts";
import { decodeImage } from "./image-decode.ts";
import { EncoderCache, imageHash } from "./encoder-cache.ts";
import { readVisionConfig, readVisionWeights, type VisionConfig, type VisionWeights } from "./mmproj.ts";
import { preprocessImage } from "./preprocess.ts";
import { PROJECTOR_MARKERS } from "./projector-markers.ts";
import { embedImagesReference } from "./reference-encoder.ts";
import type { EncodedImage, FromVision, ToVision } from "./vision-protocol.ts";

declare const self: Worker;

let model: { config: VisionConfig; weights: VisionWeights; processorKey: string } | null = null;
let cache = new EncoderCache(0);

const reply = (message: FromVision, transfer: Transferable[] = []): void => self.postMessage(message, transfer);

function init(path: string, cacheBytes: number): void {
  const file = readGguf(path);
  if (!file.ok) return reply({ type: "initError", message: file.error });
  const config = readVisionConfig(file.value);
  if (!config.ok) return reply({ type: "initError", message: config.error });
  const weights = readVisionWeights(file.value, config.value);
  if (!weights.ok) return reply({ type: "initError", message: weights.error });
  const c = config.value;
  // what the preprocessing depends on goes into every image's hash (vLLM hashes the processor kwargs with the item)
  const processorKey = JSON.stringify({ projector: c.projector, imageSize: c.imageSize, mean: c.imageMean, std: c.imageStd, resize: c.resizeAlgo });
  model = { config: c, weights: weights.value, processorKey };
  cache = new EncoderCache(cacheBytes);
  reply({ type: "ready", info: { projector: c.projector, tokensPerImage: c.tokensPerImage, projectionDim: c.projectionDim, imageSize: c.imageSize, markers: PROJECTOR_MARKERS[c.projector] } });
}

async function encode(message: Extract<ToVision, { type: "encode" }>): Promise<void> {
  const m = model;
  if (m === null) return reply({ type: "refused", id: message.id, index: 0, message: "the vision encoder is not loaded" });
  const out: EncodedImage[] = [];
  for (const [index, bytes] of message.images.entries()) {
    const img = await decodeImage(bytes, message.limits);
    if (!img.ok) return reply({ type: "refused", id: message.id, index, message: img.error });
    const { width, height, data } = img.value;
    const hash = imageHash(width, height, data, m.processorKey);
    const hit = cache.get(hash);
    if (hit !== undefined) {
      out.push({ hash, embeddings: hit, cacheHit: true, width, height });
      continue;
    }
    const blocks = embedImagesReference(preprocessImage(img.value, m.config), m.config, m.weights);
    const embeddings = new Float32Array(blocks.reduce((n, b) => n + b.length, 0)); // [tiles x tokens][projectionDim]
    blocks.reduce((at, b) => (embeddings.set(b, at), at + b.length), 0);
    cache.set(hash, embeddings);
    out.push({ hash, embeddings, cacheHit: false, width, height });
  }
  reply({ type: "encoded", id: message.id, images: out });
}

self.onmessage = (event: MessageEvent<ToVision>) => {
  const message = event.data;
  if (message.type === "init") init(message.mmprojPath, message.cacheBytes);
  else void encode(message).catch((e: unknown) => reply({ type: "refused", id: message.id, index: 0, message: `the vision encoder failed: ${e instanceof Error ? e.message : String(e)}` }));
};
