/**
 * Images through every dialect's own shape (app.handle on the fake orchestrator, whose chat template writes "@" for
 * each image part and whose tokenizer makes every character one token): Responses `input_image`, Anthropic `image`
 * blocks (base64 and url) and Ollama's `images` (/api/chat and /api/generate) reach the chat path's image parts, in
 * place, with the bytes the client sent; the engine gets each image's rows at its marker; --limit-mm-per-prompt and a
 * bad image answer 400 in the dialect's shape, naming the image by its path in that dialect's request. The vision
 * encoder is a stand-in (the real one needs a projector file; the compiled binary's test runs it:
 * test/e2e/dialect-images.test.ts): it refuses bytes without PNG's magic and remembers hashes as its cache does.
 */
import { describe, expect, test } from "bun:test";
import { DEFAULT_MEDIA_SETTINGS } from "../../src/config/media-settings.ts";
import type { VisionServing } from "../../src/server/openai/chat-completion/image-inputs.ts";
import type { VisionEncoder } from "../../src/vision/vision-client.ts";
import { testServer, type Json } from "./helpers.ts";

const TEMPLATE = "{% for m in messages %}{{ m.role }}:{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}"
  + "{% if p.type == 'image' %}@{% elif p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}{% endif %}|{% endfor %}"
  + "{% if add_generation_prompt %}assistant:{% endif %}";
const ROWS = 3;
const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47];
const png = (seed: number) => new Uint8Array([...PNG_MAGIC, 13, 10, 26, 10, seed]);
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");
const NOT_AN_IMAGE = b64(new Uint8Array([1, 2, 3, 4, 5, 6]));

/** The stand-in encoder: what it was given, and the cache counts the server reported. */
function visionServer() {
  const received: number[][] = [];
  const seen = new Set<string>();
  const counts = { queries: 0, hits: 0 };
  const encoder = {
    info: { projector: "gemma3", tokensPerImage: ROWS, projectionDim: 2, imageSize: 4, markers: { templateMarker: "@", begin: "[", soft: "~", end: "]", attendAhead: true } },
    encode: async (images: readonly Uint8Array[]) => {
      const bad = images.findIndex((b) => !PNG_MAGIC.every((v, i) => b[i] === v));
      if (bad >= 0) return { ok: false, error: { index: bad, message: "not a PNG, JPEG, WebP or GIF image (unknown magic bytes)" } };
      images.forEach((b) => received.push([...b]));
      return {
        ok: true,
        value: images.map((b) => {
          const hash = Bun.hash(b).toString(16);
          const cacheHit = seen.has(hash);
          seen.add(hash);
          return { hash, embeddings: new Float32Array(ROWS * 2), cacheHit, width: 1, height: 1 };
        }),
      };
    },
  } as unknown as VisionEncoder;
  const vision: VisionServing = { encoder, media: { ...DEFAULT_MEDIA_SETTINGS, maxImagesPerPrompt: 2 }, onCacheCounts: (q, h) => { counts.queries += q; counts.hits += h; } };
  const s = testServer({ vision }, { chatTemplate: TEMPLATE, maxModelLen: 512 });
  /** the last request's prompt as text, and where its images' rows are */
  const last = () => {
    const request = s.fake.requests.at(-1)!;
    return { prompt: s.fake.tokenizer.decode(request.promptTokenIds), images: (request.multimodal ?? []).map((m) => ({ offset: m.offset, length: m.length })) };
  };
  return { s, received, counts, last };
}

const IMAGE_ROWS = `[${"~".repeat(ROWS)}]`;

async function json(response: Response, status: number): Promise<Json> {
  const body = (await response.json()) as Json;
  expect({ status: response.status, body }).toMatchObject({ status });
  return body;
}

describe("Responses input_image", () => {
  const v = visionServer();
  const input = (...content: Json[]) => ({ model: "fake-model", max_output_tokens: 2, input: [{ role: "user", content }] });

  test("a data URL image in place between text parts, its rows at the marker, its bytes to the encoder", async () => {
    await json(await v.s.call("POST", "/v1/responses", input({ type: "input_text", text: "A:" }, { type: "input_image", image_url: `data:image/png;base64,${b64(png(1))}`, detail: "low" }, { type: "input_text", text: "B" })), 200);
    const { prompt, images } = v.last();
    expect(prompt).toBe(`user:A:${IMAGE_ROWS}B|assistant:`);
    expect(images).toEqual([{ offset: "user:A:[".length, length: ROWS }]);
    expect(v.received.at(-1)).toEqual([...png(1)]);
  });

  test("file_id, a bad detail, no image_url, a corrupt image, too many images: 400s in OpenAI's shape naming the part", async () => {
    const refused = async (content: Json[], param: string, mentions: string) => {
      const body = await json(await v.s.call("POST", "/v1/responses", input(...content)), 400);
      expect(body.error.param).toBe(param);
      expect(body.error.message).toContain(mentions);
    };
    const image = { type: "input_image", image_url: `data:image/png;base64,${b64(png(2))}` };
    await refused([{ type: "input_image", file_id: "file-1" }], "input[0].content[0].file_id", "no Files API");
    await refused([{ ...image, detail: "ultra" }], "input[0].content[0].detail", "low, high or auto");
    await refused([{ type: "input_image" }], "input[0].content[0].image_url", "needs image_url");
    await refused([image, { type: "input_image", image_url: `data:image/png;base64,${NOT_AN_IMAGE}` }], "input[0].content[1].image_url", "unknown magic bytes");
    await refused([image, image, image], "messages", "At most 2 image(s)");
  });
});

describe("Anthropic image blocks", () => {
  const v = visionServer();
  const message = (...content: Json[]) => ({ model: "fake-model", max_tokens: 2, messages: [{ role: "user", content }] });
  const base64Block = (bytes: Uint8Array, media_type = "image/png") => ({ type: "image", source: { type: "base64", media_type, data: b64(bytes) } });

  test("a base64 block between text blocks: in place, its rows at the marker, count_tokens counts what the prompt holds", async () => {
    const body = message({ type: "text", text: "A:" }, base64Block(png(3)), { type: "text", text: "B" });
    const answer = await json(await v.s.call("POST", "/v1/messages", body), 200);
    const { prompt, images } = v.last();
    expect(prompt).toBe(`user:A:${IMAGE_ROWS}B|assistant:`);
    expect(images).toEqual([{ offset: "user:A:[".length, length: ROWS }]);
    expect(v.received.at(-1)).toEqual([...png(3)]);
    const { max_tokens: _unused, ...countBody } = body;
    const counted = await json(await v.s.call("POST", "/v1/messages/count_tokens", countBody), 200);
    expect(counted.input_tokens).toBe(answer.usage.input_tokens);
    expect(counted.input_tokens).toBe(v.s.fake.requests.at(-1)!.promptTokenIds.length);
  });

  test("a url source goes to the media rules (no --allowed-media-domains list here: a local file:// is refused by vLLM's rule)", async () => {
    const body = await json(await v.s.call("POST", "/v1/messages", message({ type: "image", source: { type: "url", url: "file:///etc/hostname" } })), 400);
    expect(body.type).toBe("error");
    expect(body.error.type).toBe("invalid_request_error");
    expect(body.error.message).toContain("--allowed-local-media-path");
  });

  test("file sources, other media types, images in assistant turns, a corrupt image, too many: Anthropic's error shape", async () => {
    const refused = async (content: Json[], mentions: string, role = "user") => {
      const body = await json(await v.s.call("POST", "/v1/messages", { model: "fake-model", max_tokens: 2, messages: [{ role, content }] }), 400);
      expect(Object.keys(body).sort()).toEqual(["error", "request_id", "type"]);
      expect(body.error.type).toBe("invalid_request_error");
      expect(body.error.message).toContain(mentions);
    };
    await refused([{ type: "image", source: { type: "file", file_id: "file_1" } }], "messages[0].content[0].source.type: images by file_id are not supported");
    await refused([base64Block(png(4), "image/bmp")], "messages[0].content[0].source.media_type");
    await refused([base64Block(png(4), "image/jpeg")], "Image does not match the provided media type image/jpeg (the data is image/png)");
    await refused([{ type: "image", source: { type: "base64", media_type: "image/png", data: "AA==", extra: 1 } }], "messages[0].content[0].source.extra: Extra inputs are not permitted");
    await refused([base64Block(png(4))], "image blocks belong in user messages", "assistant");
    await refused([{ type: "image", source: { type: "base64", media_type: "image/png", data: NOT_AN_IMAGE } }], "messages[0].content[0].source.data: not a PNG");
    await refused([base64Block(png(4)), base64Block(png(5)), base64Block(png(6))], "At most 2 image(s)");
  });
});

describe("Ollama images", () => {
  const v = visionServer();

  test("/api/chat: a message's images before its text, each at its marker; the same image again is a cache hit", async () => {
    const body = { model: "fake-model", stream: false, options: { num_predict: 2 }, messages: [{ role: "user", content: "hi", images: [b64(png(7)), b64(png(8))] }] };
    await json(await v.s.call("POST", "/api/chat", body), 200);
    const { prompt, images } = v.last();
    expect(prompt).toBe(`user:${IMAGE_ROWS}${IMAGE_ROWS}hi|assistant:`);
    expect(images).toEqual([{ offset: "user:[".length, length: ROWS }, { offset: `user:${IMAGE_ROWS}[`.length, length: ROWS }]);
    expect(v.received.slice(-2)).toEqual([[...png(7)], [...png(8)]]);
    const before = { ...v.counts };
    await json(await v.s.call("POST", "/api/chat", body), 200);
    expect(v.counts).toEqual({ queries: before.queries + 2, hits: before.hits + 2 });
  });

  test("/api/generate: the prompt's images through the chat template (an image with no prompt text too)", async () => {
    await json(await v.s.call("POST", "/api/generate", { model: "fake-model", prompt: "what?", images: [b64(png(9))], stream: false, options: { num_predict: 2 } }), 200);
    expect(v.last().prompt).toBe(`user:${IMAGE_ROWS}what?|assistant:`);
    await json(await v.s.call("POST", "/api/generate", { model: "fake-model", images: [b64(png(9))], stream: false, options: { num_predict: 2 } }), 200);
    expect(v.last().prompt).toBe(`user:${IMAGE_ROWS}|assistant:`);
  });

  test("not base64, a data URL, raw prompts, a corrupt image, too many: Ollama's {error} naming the image", async () => {
    const refused = async (path: string, body: Json, mentions: string) => {
      const answer = await json(await v.s.call("POST", path, { model: "fake-model", stream: false, ...body }), 400);
      expect(Object.keys(answer)).toEqual(["error"]);
      expect(answer.error).toContain(mentions);
    };
    const chat = (images: unknown) => ({ messages: [{ role: "user", content: "hi", images }] });
    await refused("/api/chat", chat(["not base64!"]), "messages[0].images[0]: an image must be the image file's bytes in standard base64");
    await refused("/api/chat", chat([`data:image/png;base64,${b64(png(1))}`]), "messages[0].images[0]");
    await refused("/api/chat", chat("abcd"), "messages[0].images must be a list");
    await refused("/api/chat", chat([NOT_AN_IMAGE]), "messages[0].images[0]: not a PNG");
    await refused("/api/chat", chat([b64(png(1)), b64(png(2)), b64(png(3))]), "At most 2 image(s)");
    await refused("/api/generate", { prompt: "hi", raw: true, images: [b64(png(1))] }, "images need the chat template");
    await refused("/api/generate", { prompt: "hi", images: [NOT_AN_IMAGE] }, "images[0]: not a PNG");
  });
});
