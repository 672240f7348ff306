/**
 * The vision encoder's thread: loads the projector once, then per request decodes each image (header checked first),
 * looks it up in the encoder cache by content hash, and encodes the misses (preprocess, the reference encoder), so
 * decoding and encoding never hold up the HTTP thread or the engine's steps.
 */
import { readGguf } from "../gguf/reader.ts";
import { decodeImage } from "./image-decode.ts";
import { EncoderCache, imageHash } from "./encoder-cache.ts";
import { readVisionConfig, readVisionWeights, type VisionConfig } from "./mmproj.ts";
import { imageLayout, preprocessImage, tilesImages } from "./preprocess.ts";
import { PROJECTOR_MARKERS } from "./projector-markers.ts";
import { BackendVisionEncoder } from "./backend-encoder.ts";
import { createBackend } from "../backend/create-backend.ts";
import type { EncodedImage, FromVision, ToVision } from "./vision-protocol.ts";
import { isQwen25vlProjector, loadQwen25vlServing, type Qwen25vlServing } from "./qwen25vl-serving.ts";

declare const self: Worker;

// the f32 matrices are dropped once the kernels hold them (the reference encoder is the tests' oracle, not run here)
let model: { config: VisionConfig; processorKey: string; kernels: BackendVisionEncoder } | null = null;
let cache = new EncoderCache(0);
/** a Qwen2.5-VL projector instead (qwen25vl-serving.ts) */
let qwen: Qwen25vlServing | null = null;
let queue: Promise<void> = Promise.resolve();

const reply = (message: FromVision, transfer: Transferable[] = []): void => self.postMessage(message, transfer);

async function init(path: string, cacheBytes: number): Promise<void> {
  const file = readGguf(path);
  if (!file.ok) return reply({ type: "initError", message: file.error });
  if (isQwen25vlProjector(file.value)) {
    const loaded = await loadQwen25vlServing(file.value, () => createBackend({ kind: "wasm", threads: Math.min(2, navigator.hardwareConcurrency) }));
    if (!loaded.ok) return reply({ type: "initError", message: loaded.error });
    qwen = loaded.value;
    cache = new EncoderCache(cacheBytes);
    return reply({ type: "ready", info: qwen.info });
  }
  const config = readVisionConfig(file.value);
  if (!config.ok) return reply({ type: "initError", message: config.error });
  const weights = readVisionWeights(file.value, config.value);
  if (!weights.ok) return reply({ type: "initError", message: weights.error });
  const c = config.value;
  // what the preprocessing depends on goes into every image's hash (vLLM hashes the processor kwargs with the item)
  const processorKey = JSON.stringify({ projector: c.projector, imageSize: c.imageSize, mean: c.imageMean, std: c.imageStd, resize: c.resizeAlgo, ...(c.longestEdge !== undefined ? { longestEdge: c.longestEdge } : {}) });
  // the kernels run the encoder; the plain reference encoder stays the oracle of the tests
  let kernels: BackendVisionEncoder;
  try {
    kernels = new BackendVisionEncoder(c, weights.value, await createBackend({ kind: "wasm", threads: Math.min(2, navigator.hardwareConcurrency) }));
  } catch (e) {
    return reply({ type: "initError", message: `the vision encoder's kernels did not start: ${e instanceof Error ? e.message : String(e)}` });
  }
  model = { config: c, processorKey, kernels };
  cache = new EncoderCache(cacheBytes);
  reply({ type: "ready", info: { projector: c.projector, tokensPerImage: c.tokensPerImage, rowsFollowImage: tilesImages(c), projectionDim: c.projectionDim, imageSize: c.imageSize, markers: PROJECTOR_MARKERS[c.projector] } });
}

async function encode(message: Extract<ToVision, { type: "encode" }>): Promise<void> {
  const m = model;
  if (qwen !== null) return encodeQwen(qwen, message);
  if (m === null) return reply({ type: "refused", id: message.id, index: 0, message: "the vision encoder is not loaded" });
  const out: EncodedImage[] = [];
  for (const [index, bytes] of message.images.entries()) {
    const img = await decodeImage(bytes, message.limits);
    if (!img.ok) return reply({ type: "refused", id: message.id, index, message: img.error });
    const { width, height, data } = img.value;
    const hash = imageHash(width, height, data, m.processorKey);
    // a tiled image's layout depends on its size only, so a cached image gets it again without its pixels
    let layout;
    try {
      layout = imageLayout(width, height, m.config);
    } catch (e) {
      return reply({ type: "refused", id: message.id, index, message: e instanceof Error ? e.message : String(e) });
    }
    const hit = cache.get(hash);
    if (hit !== undefined) {
      out.push({ hash, embeddings: hit, cacheHit: true, width, height, ...(layout !== undefined ? { layout } : {}) });
      continue;
    }
    const blocks: Float32Array[] = [];
    for (const tile of preprocessImage(img.value, m.config)) blocks.push(await m.kernels.embedTile(tile));
    const embeddings = new Float32Array(blocks.reduce((n, b) => n + b.length, 0)); // [tiles x tokens][projectionDim]
    blocks.reduce((at, b) => (embeddings.set(b, at), at + b.length), 0);
    cache.set(hash, embeddings);
    out.push({ hash, embeddings, cacheHit: false, width, height, ...(layout !== undefined ? { layout } : {}) });
  }
  reply({ type: "encoded", id: message.id, images: out });
}

async function encodeQwen(q: Qwen25vlServing, message: Extract<ToVision, { type: "encode" }>): Promise<void> {
  const out: EncodedImage[] = [];
  for (const [index, bytes] of message.images.entries()) {
    const img = await decodeImage(bytes, message.limits);
    if (!img.ok) return reply({ type: "refused", id: message.id, index, message: img.error });
    const { width, height, data } = img.value;
    const hash = imageHash(width, height, data, q.processorKey);
    // the cache holds the embeddings; the grid follows from the image's size
    const hit = cache.get(hash);
    const embeddings = hit ?? (await q.embed(img.value));
    if (hit === undefined) cache.set(hash, embeddings);
    out.push({ hash, embeddings, cacheHit: hit !== undefined, width, height, grid: q.grid(width, height) });
  }
  reply({ type: "encoded", id: message.id, images: out });
}

self.onmessage = (event: MessageEvent<ToVision>) => {
  const message = event.data;
  if (message.type === "init") void init(message.mmprojPath, message.cacheBytes).catch((e: unknown) => reply({ type: "initError", message: e instanceof Error ? e.message : String(e) }));
  // one request at a time: the kernels' buffers and KV cache are shared
  else queue = queue.then(() => encode(message)).catch((e: unknown) => reply({ type: "refused", id: message.id, index: 0, message: `the vision encoder failed: ${e instanceof Error ? e.message : String(e)}` }));
};
