/**
 * Anthropic image blocks (docs.claude.com "Vision": source base64 with media_type, or url) as the chat path's
 * image_url parts (vLLM vllm/entrypoints/anthropic/serving.py turns them into image_url parts the same way): the
 * projector, --limit-mm-per-prompt and the media rules apply there, and its errors name the block's path. Images by
 * file_id (Anthropic's Files API) are refused. Framework-free; throws ApiError (400).
 * @example imageBlockPart({ type: "image", source: { type: "url", url: "https://..." } }, "messages[0].content[0]")
 */
import { ApiError } from "../errors.ts";
import { dialectImagePart } from "../openai/chat-completion/image-inputs.ts";

/** The media types Anthropic takes for base64 images. */
export const IMAGE_MEDIA_TYPES = ["image/jpeg", "image/png", "image/gif", "image/webp"] as const;

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
