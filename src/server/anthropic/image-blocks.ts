/**
 * Anthropic image blocks (docs.claude.com "Vision": source base64 with media_type, or url) as the chat path's
 * image_url parts (vLLM vllm/entrypoints/anthropic/serving.py turns them into image_url parts the same way): the
 * projector, --limit-mm-per-prompt and the media rules apply there, and its errors name the block's path. A media_type
 * the data's leading bytes contradict is refused, as Anthropic does; images by file_id (its Files API) are refused. Framework-free; throws ApiError (400).
 * @example imageBlockPart({ type: "image", source: { type: "url", url: "https://..." } }, "messages[0].content[0]")
 */
import { ApiError } from "../errors.ts";
import { dialectImagePart } from "../openai/chat-completion/image-inputs.ts";

/** The media types Anthropic takes for base64 images. */
export const IMAGE_MEDIA_TYPES = ["image/jpeg", "image/png", "image/gif", "image/webp"] as const;

/** Each media type's leading bytes (RIFF....WEBP: bytes 8-11 checked apart), to hold media_type to the data. */
const MAGIC: Readonly<Record<(typeof IMAGE_MEDIA_TYPES)[number], readonly number[]>> = {
  "image/png": [0x89, 0x50, 0x4e, 0x47],
  "image/jpeg": [0xff, 0xd8, 0xff],
  "image/gif": [0x47, 0x49, 0x46, 0x38],
  "image/webp": [0x52, 0x49, 0x46, 0x46],
};

/** The media type the data's first bytes say, or null when they are none of the four (the decoder names that). */
function sniffedType(data: string): string | null {
  const head = Buffer.from(data.slice(0, 16), "base64");
  const found = IMAGE_MEDIA_TYPES.find((type) => MAGIC[type].every((b, i) => head[i] === b));
  if (found === "image/webp" && head.subarray(8, 12).toString("latin1") !== "WEBP") return null;
  return found ?? null;
}

const bad = (path: string, message: string): ApiError => new ApiError("badRequest", `${path}: ${message}`, path);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function onlyKeys(source: Record<string, unknown>, allowed: readonly string[], path: string): void {
  for (const key of Object.keys(source)) {
    if (key !== "type" && !allowed.includes(key)) throw bad(`${path}.${key}`, "Extra inputs are not permitted");
  }
}

/** An image block's source as an image_url part (a data URL for base64 data). */
export function imageBlockPart(block: Readonly<Record<string, unknown>>, path: string): { type: "image_url"; image_url: { url: string } } {
  const source = block["source"];
  const spath = `${path}.source`;
  if (!isObject(source)) throw bad(spath, "Input should be an object");
  switch (source["type"]) {
    case "base64": {
      onlyKeys(source, ["media_type", "data"], spath);
      const mediaType = source["media_type"];
      if (typeof mediaType !== "string" || !(IMAGE_MEDIA_TYPES as readonly string[]).includes(mediaType)) {
        throw bad(`${spath}.media_type`, `Input should be ${IMAGE_MEDIA_TYPES.map((t) => `'${t}'`).join(", ")}`);
      }
      const data = source["data"];
      if (typeof data !== "string" || data === "") throw bad(`${spath}.data`, "Input should be a non-empty base64 string");
      // Anthropic's own check: the declared type must be the data's
      const sniffed = sniffedType(data);
      if (sniffed !== null && sniffed !== mediaType) throw bad(spath, `Image does not match the provided media type ${mediaType} (the data is ${sniffed})`);
      return dialectImagePart(`data:${mediaType};base64,${data}`, `${spath}.data`);
    }
    case "url": {
      onlyKeys(source, ["url"], spath);
      if (typeof source["url"] !== "string" || source["url"] === "") throw bad(`${spath}.url`, "Input should be a valid URL");
      return dialectImagePart(source["url"], `${spath}.url`);
    }
    case "file":
      throw bad(`${spath}.type`, "images by file_id are not supported (fennec has no Files API); send the image as base64 or by url");
    default:
      throw bad(`${spath}.type`, "Input should be 'base64' or 'url'");
  }
}
