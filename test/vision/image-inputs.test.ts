/**
 * The server's image parts (server/openai/chat-completion/image-inputs.ts): vLLM's local-file rule (only under
 * --allowed-local-media-path, links resolved), data URL bounds, and the template markers expanded to begin, one
 * placeholder per embedding row, end, with the engine's multimodal inputs at those positions.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_MEDIA_SETTINGS } from "../../src/config/media-settings.ts";
import { imagePartsOf, loadImageUrl, placeImages, type VisionServing } from "../../src/server/openai/chat-completion/image-inputs.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import type { VisionEncoder } from "../../src/vision/vision-client.ts";
import { PROJECTOR_MARKERS } from "../../src/vision/projector-markers.ts";

const dir = mkdtempSync(join(tmpdir(), "fennec-image-inputs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const allowed = join(dir, "allowed");
mkdirSync(allowed);
writeFileSync(join(allowed, "a.png"), new Uint8Array([1, 2, 3]));
writeFileSync(join(dir, "secret.png"), new Uint8Array([9]));
symlinkSync(join(dir, "secret.png"), join(allowed, "escape.png"));
const media = { ...DEFAULT_MEDIA_SETTINGS, allowedLocalMediaPath: allowed, maxImageBytes: 8 };
const part = (url: string) => ({ url, param: "messages[0].content[0].image_url.url" });

describe("image URLs", () => {
  test("file:// under --allowed-local-media-path is read; outside it, or through a link out of it, is refused", async () => {
    expect([...await loadImageUrl(part(`file://${join(allowed, "a.png")}`), media)]).toEqual([1, 2, 3]);
    await expect(loadImageUrl(part(`file://${join(dir, "secret.png")}`), media)).rejects.toThrow("must be a subpath of `--allowed-local-media-path`");
    await expect(loadImageUrl(part(`file://${join(allowed, "escape.png")}`), media)).rejects.toThrow("must be a subpath of `--allowed-local-media-path`");
    await expect(loadImageUrl(part(`file://${join(allowed, "none.png")}`), media)).rejects.toThrow("does not exist");
  });

  test("data URLs: base64 images only, within the size limit", async () => {
    expect([...await loadImageUrl(part("data:image/png;base64,AQID"), media)]).toEqual([1, 2, 3]);
    await expect(loadImageUrl(part(`data:image/png;base64,${"A".repeat(40)}`), media)).rejects.toThrow("more than the limit of 8 bytes");
    await expect(loadImageUrl(part("data:image/png,rawtext"), media)).rejects.toThrow("must be base64");
  });

  test("image_url parts are found in prompt order with the parameter that names them", () => {
    const parts = imagePartsOf([
      { role: "system", content: "s" },
      { role: "user", content: [{ type: "text", text: "a" }, { type: "image_url", image_url: { url: "u1" } }] },
      { role: "user", content: [{ type: "image_url", image_url: { url: "u2" } }] },
    ]);
    expect(parts).toEqual([{ url: "u1", param: "messages[1].content[1].image_url.url" }, { url: "u2", param: "messages[2].content[0].image_url.url" }]);
  });
});

describe("placing images at the template's markers", () => {
  // a tokenizer whose special tokens are single ids: <start_of_image> 5, <end_of_image> 6, no <image_soft_token>
  const ids: Record<string, number[]> = { "<start_of_image>": [5], "<end_of_image>": [6], "<image_soft_token>": [1, 2] };
  const tokenizer = { encode: (text: string) => ids[text] ?? [] } as unknown as Tokenizer;
  const vision = { encoder: { info: { markers: PROJECTOR_MARKERS.gemma3, tokensPerImage: 2, projectionDim: 3 } } as unknown as VisionEncoder, media: DEFAULT_MEDIA_SETTINGS } satisfies VisionServing;
  const image = (hash: string) => ({ hash, embeddings: new Float32Array(6), cacheHit: false, width: 1, height: 1 });

  test("each marker becomes begin, a placeholder per row (begin's id: the vocab has no soft token), end", () => {
    const placed = placeImages(tokenizer, [2, 5, 9, 5, 7], [image("a"), image("b")], vision);
    expect(placed.promptTokenIds).toEqual([2, 5, 5, 5, 6, 9, 5, 5, 5, 6, 7]);
    expect(placed.multimodal.map(({ identifier, offset, length, attendAhead }) => ({ identifier, offset, length, attendAhead }))).toEqual([
      { identifier: "a", offset: 2, length: 2, attendAhead: true },
      { identifier: "b", offset: 7, length: 2, attendAhead: true },
    ]);
  });

  test("a marker count that is not the image count is a 400 saying so", () => {
    expect(() => placeImages(tokenizer, [2, 9], [image("a")], vision)).toThrow("the chat template wrote 0 image marker(s) <start_of_image> for 1 image(s)");
  });
});
