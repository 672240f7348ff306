/**
 * Ollama's `images` (api/types.go Message.Images and GenerateRequest.Images: a list of base64 strings, the bytes of
 * each image) as the chat path's image_url parts, placed before the message's text as Ollama does (server/prompt.go
 * chatPrompt writes each image's tag ahead of the content). The projector, --limit-mm-per-prompt and the media rules
 * apply on the chat path, whose errors name `messages[i].images[k]` / `images[k]`. Framework-free; throws ApiError (400).
 * @example ollamaImageParts(["iVBORw0KGgo..."], "messages[0].images") // [{ type: "image_url", ... }]
 */
import { ApiError } from "../errors.ts";
import { dialectImagePart } from "../openai/chat-completion/image-inputs.ts";

/** standard base64 with padding, as Go's encoding/json reads a []byte */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The image_url parts of an `images` list (none when it is absent or empty). */
export function ollamaImageParts(images: unknown, where: string): ReturnType<typeof dialectImagePart>[] {
  if (images === undefined || images === null) return [];
  if (!Array.isArray(images)) throw new ApiError("badRequest", `${where} must be a list of base64-encoded images`, where);
  return images.map((image: unknown, k) => {
    const param = `${where}[${k}]`;
    if (typeof image !== "string" || image === "" || image.length % 4 !== 0 || !BASE64.test(image)) {
      throw new ApiError("badRequest", `${param}: an image must be the image file's bytes in standard base64 (no data: prefix)`, param);
    }
    // the decoder reads the format from the bytes (PNG, JPEG, WebP, GIF); the data URL only carries them
    return dialectImagePart(`data:image/*;base64,${image}`, param);
  });
}
