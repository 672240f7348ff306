/**
 * Images in chat messages: `image_url` parts loaded (data URLs; http(s) URLs from --allowed-media-domains with a size
 * limit and VLLM_IMAGE_FETCH_TIMEOUT; file:// URLs only under --allowed-local-media-path, as vLLM's MediaConnector),
 * encoded on the vision thread, and placed in the tokenized prompt where the chat template wrote each image's marker
 * (llama.cpp mtmd_tokenize: begin, one placeholder per embedding row, end). Dialects call `imagePartsOf` /
 * `loadImageUrl` / `encodeImages` with their own parts. Framework-free; throws ApiError (400) naming the part.
 */
import { realpathSync, statSync } from "node:fs";
import { sep } from "node:path";
import type { MediaSettings } from "../../../config/media-settings.ts";
import type { MultimodalInput } from "../../../engine/protocol.ts";
import type { Tokenizer } from "../../../tokenizer/tokenizer.ts";
import type { EncodedImage, ImageLayoutPiece, VisionEncoder } from "../../../vision/vision-client.ts";
import { ApiError } from "../../errors.ts";
import type { ChatMessageBody } from "../schemas.ts";

/** What the server holds to take images: the encoder thread's client and the media flags. */
export interface VisionServing {
  readonly encoder: VisionEncoder;
  readonly media: MediaSettings;
  /** per encoded request: images asked for and found in the encoder cache (vllm:mm_cache_queries / _hits) */
  readonly onCacheCounts?: (queries: number, hits: number) => void;
}

/** One image part of a conversation: its URL and the request parameter that names it. */
export interface ImagePart {
  readonly url: string;
  readonly param: string;
}

/** the dialect's own path of an image part made by dialectImagePart (errors name what the client sent) */
const DIALECT_PARAMS = new WeakMap<object, string>();

/**
 * A dialect's image (Responses input_image, an Anthropic image block, an Ollama image) as the image_url part this path
 * reads; its errors name `param`, the image's path in that dialect's request.
 */
export function dialectImagePart(url: string, param: string): { type: "image_url"; image_url: { url: string } } {
  const part = { type: "image_url" as const, image_url: { url } };
  DIALECT_PARAMS.set(part, param);
  return part;
}

/** The image_url parts of the messages, in prompt order; any other non-text part type is refused. */
export function imagePartsOf(messages: readonly ChatMessageBody[]): ImagePart[] {
  const parts: ImagePart[] = [];
  messages.forEach((m, i) => {
    if (!Array.isArray(m.content)) return;
    m.content.forEach((part, j) => {
      if (part.type !== "image_url") return;
      const url = part.image_url?.url;
      if (typeof url !== "string" || url === "") throw new ApiError("badRequest", `messages[${i}].content[${j}]: an image_url part needs image_url.url`, `messages[${i}].content[${j}].image_url`);
      parts.push({ url, param: DIALECT_PARAMS.get(part) ?? `messages[${i}].content[${j}].image_url.url` });
    });
  });
  return parts;
}

/** the `{type: "image"}` parts made here: the only image parts the template may see (a client's own are refused) */
const TEMPLATE_IMAGE_PARTS = new WeakSet<object>();

/** The messages with each image_url part as the `{type: "image"}` part chat templates render as their marker. */
export function withTemplateImageParts(messages: readonly ChatMessageBody[]): ChatMessageBody[] {
  const imagePart = () => {
    const part = { type: "image" };
    TEMPLATE_IMAGE_PARTS.add(part);
    return part;
  };
  return messages.map((m) => (!Array.isArray(m.content) ? m : { ...m, content: m.content.map((p) => (p.type === "image_url" ? imagePart() : p)) }));
}

/** a part withTemplateImageParts made from an image_url part, whose image is encoded */
export const isTemplateImagePart = (part: object): boolean => TEMPLATE_IMAGE_PARTS.has(part);

const bad = (param: string, message: string): ApiError => new ApiError("badRequest", message, param);

/** A response body read up to `max` bytes; past that the read stops and the request is refused. */
async function boundedBody(response: Response, max: number, param: string): Promise<Uint8Array> {
  const declared = Number(response.headers.get("content-length") ?? NaN);
  if (declared > max) throw bad(param, `the image at this URL is ${declared} bytes, more than the limit of ${max}`);
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = response.body?.getReader();
  if (reader === undefined) return new Uint8Array(0);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > max) {
      await reader.cancel();
      throw bad(param, `the image at this URL is more than the limit of ${max} bytes`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  chunks.reduce((at, c) => (out.set(c, at), at + c.length), 0);
  return out;
}

/** The bytes of one image URL, or a 400 naming the part and what is wrong. */
export async function loadImageUrl(part: ImagePart, media: MediaSettings): Promise<Uint8Array> {
  const { url, param } = part;
  if (url.startsWith("data:")) {
    const comma = url.indexOf(",");
    const meta = comma < 0 ? "" : url.slice(5, comma);
    if (comma < 0 || !meta.endsWith(";base64")) throw bad(param, "a data URL image must be base64: data:image/<format>;base64,<data>");
    if (!meta.startsWith("image/")) throw bad(param, `a data URL of type "${meta.slice(0, -7) || "(none)"}" is not an image`);
    const text = url.slice(comma + 1);
    if (Math.floor((text.length * 3) / 4) > media.maxImageBytes) throw bad(param, `the image is more than the limit of ${media.maxImageBytes} bytes`);
    return new Uint8Array(Buffer.from(text, "base64"));
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw bad(param, "the image URL is not a URL: give a data URL, an http(s) URL or a file:// URL");
  }
  if (parsed.protocol === "file:") return loadLocalFile(parsed, param, media);
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw bad(param, `image URLs must be data:, http(s): or file:, got ${parsed.protocol}`);
  const domains = media.allowedMediaDomains;
  if (domains !== null && !domains.includes(parsed.hostname)) {
    throw bad(param, `The URL must be from one of the allowed domains: ${JSON.stringify(domains)}. Input URL domain: ${parsed.hostname}`);
  }
  let response: Response;
  try {
    response = await fetch(parsed, { signal: AbortSignal.timeout(media.fetchTimeoutS * 1000) });
  } catch (e) {
    const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError");
    throw bad(param, timedOut ? `the image URL did not answer within ${media.fetchTimeoutS} s (VLLM_IMAGE_FETCH_TIMEOUT)` : `the image URL could not be fetched: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw bad(param, `the image URL answered HTTP ${response.status}`);
  }
  return boundedBody(response, media.maxImageBytes, param);
}

/** vLLM's local-file rule: only with --allowed-local-media-path, and only files under it (links resolved). */
async function loadLocalFile(url: URL, param: string, media: MediaSettings): Promise<Uint8Array> {
  const allowed = media.allowedLocalMediaPath;
  if (allowed === null) throw bad(param, "Cannot load local files without `--allowed-local-media-path`.");
  let path: string;
  let root: string;
  try {
    path = realpathSync(decodeURIComponent(url.pathname));
    root = realpathSync(allowed);
  } catch {
    throw bad(param, `the local image ${decodeURIComponent(url.pathname)} does not exist`);
  }
  if (path !== root && !path.startsWith(root.endsWith(sep) ? root : root + sep)) {
    throw bad(param, `The file path ${path} must be a subpath of \`--allowed-local-media-path\` ${root}.`);
  }
  const size = statSync(path).size;
  if (size > media.maxImageBytes) throw bad(param, `the image is ${size} bytes, more than the limit of ${media.maxImageBytes}`);
  return new Uint8Array(await Bun.file(path).arrayBuffer());
}

/** The parts' images loaded and encoded (the encoder cache answers repeats), or a 400 naming the first bad one. */
export async function encodeImages(vision: VisionServing, parts: readonly ImagePart[]): Promise<readonly EncodedImage[]> {
  const bytes = await Promise.all(parts.map((p) => loadImageUrl(p, vision.media)));
  const encoded = await vision.encoder.encode(bytes);
  if (!encoded.ok) {
    const part = parts[encoded.error.index] ?? parts[0]!;
    throw bad(part.param, `${part.param}: ${encoded.error.message}`);
  }
  vision.onCacheCounts?.(encoded.value.length, encoded.value.filter((i) => i.cacheHit).length);
  return encoded.value;
}

/** The single token id of a marker, or null when this tokenizer does not have it as one token. */
function maybeMarkerId(tokenizer: Tokenizer, text: string): number | null {
  const ids = tokenizer.encode(text, { addSpecial: false, parseSpecial: true });
  return ids.length === 1 ? ids[0]! : null;
}

/** The single token id of a marker, or a 400 when this tokenizer does not have it as one token. */
function markerId(tokenizer: Tokenizer, text: string): number {
  const id = maybeMarkerId(tokenizer, text);
  if (id === null) throw new ApiError("badRequest", `this model's tokenizer has no single token ${text}, which the projector's images need`, "messages");
  return id;
}

/**
 * A tiled image (Idefics3) at the end of `out`: each text piece tokenized on its own with special tokens parsed (mtmd.cpp
 * add_text per marker), each rows piece the next tile's embedding rows as one multimodal input.
 */
function placeTiledImage(
  tokenizer: Tokenizer, image: EncodedImage, layout: readonly ImageLayoutPiece[], projectionDim: number, soft: number,
  attendAhead: boolean, out: number[], multimodal: MultimodalInput[],
): void {
  const totalRows = layout.reduce((n, p) => n + ("rows" in p ? p.rows : 0), 0);
  if (totalRows * projectionDim !== image.embeddings.length) throw new ApiError("badRequest", `an image gave ${image.embeddings.length / projectionDim} embedding rows, its tiles take ${totalRows}`, "messages");
  let row = 0;
  let tile = 0;
  for (const piece of layout) {
    if ("text" in piece) {
      out.push(...tokenizer.encode(piece.text, { addSpecial: false, parseSpecial: true }));
      continue;
    }
    const embeddings = image.embeddings.subarray(row * projectionDim, (row + piece.rows) * projectionDim);
    multimodal.push({ identifier: `${image.hash}/${tile++}`, offset: out.length, length: piece.rows, embeddings, attendAhead });
    for (let r = 0; r < piece.rows; r++) out.push(soft);
    row += piece.rows;
  }
}

/**
 * The prompt with each image's marker token expanded to begin, one placeholder per row, end (llama.cpp mtmd_tokenize
 * for the projector), and the engine's multimodal inputs at those positions. The template must have written exactly
 * one marker per image.
 */
export function placeImages(tokenizer: Tokenizer, promptIds: readonly number[], images: readonly EncodedImage[], vision: VisionServing): { promptTokenIds: number[]; multimodal: MultimodalInput[] } {
  const { markers, tokensPerImage, projectionDim } = vision.encoder.info;
  const marker = markerId(tokenizer, markers.templateMarker);
  // "" where the template writes them itself (Qwen2.5-VL's <|vision_start|> and <|vision_end|>)
  const [begin, end] = [markers.begin === "" ? null : markerId(tokenizer, markers.begin), markers.end === "" ? null : markerId(tokenizer, markers.end)];
  // llama.cpp's converter leaves the soft token out of the GGUF vocabulary (it is past the text pieces); the rows only
  // need an id the engine accepts, their input is the image's embeddings
  const soft = maybeMarkerId(tokenizer, markers.soft) ?? begin ?? marker;
  const found = promptIds.filter((id) => id === marker).length;
  if (found !== images.length) {
    throw new ApiError("badRequest", `the chat template wrote ${found} image marker(s) ${markers.templateMarker} for ${images.length} image(s); each image needs one (an image part in a message the template drops, or the marker typed as text?)`, "messages");
  }
  const out: number[] = [];
  const multimodal: MultimodalInput[] = [];
  let next = 0;
  for (const id of promptIds) {
    if (id !== marker) {
      out.push(id);
      continue;
    }
    const image = images[next++]!;
    if (image.layout !== undefined) {
      placeTiledImage(tokenizer, image, image.layout, projectionDim, soft, markers.attendAhead, out, multimodal);
      continue;
    }
    const rows = image.embeddings.length / projectionDim;
    // tokensPerImage 0: the count follows the image (Qwen2.5-VL), which then gives its grid
    if (tokensPerImage > 0 ? rows !== tokensPerImage : image.grid === undefined || image.grid.cols * image.grid.rows !== rows) {
      throw new ApiError("badRequest", `an image gave ${rows} embedding rows, the projector makes ${tokensPerImage > 0 ? tokensPerImage : "its grid's"}`, "messages");
    }
    if (begin !== null) out.push(begin);
    multimodal.push({
      identifier: image.hash, offset: out.length, length: rows, embeddings: image.embeddings, attendAhead: markers.attendAhead,
      ...(image.grid !== undefined ? { mropeGrid: image.grid } : {}),
    });
    for (let r = 0; r < rows; r++) out.push(soft);
    if (end !== null) out.push(end);
  }
  return { promptTokenIds: out, multimodal };
}
