/**
 * Images through the compiled binary (dist/fennec when built from the current sources): make-model's tiny Gemma 3
 * shape (random weights, the real Gemma 3 tokenizer and template) with its projector lying beside it, so serve finds
 * it without --mmproj; the official openai client sends images by data URL (PNG, JPEG, WebP through the embedded
 * libwebp WASM, GIF) and by http URL (a local server in the test), the same image twice is encoded once
 * (vllm:mm_cache_hits) and its prompt blocks come from the prefix cache (keyed by the image hash: another image does
 * not hit them), and vLLM's media rules answer 400.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { gemma3VocabPath } from "../../scripts/gemma3-vocab.ts";
import { MODEL_SHAPES, VISION_SHAPES } from "../../scripts/model-shapes.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { gifOf, jpegOf, pattern, pngOf, webpOf } from "../vision/test-images.ts";
import { serverCommand, startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(120_000);

const SHAPE = "tiny-gemma3-4b";
const TOKENS_PER_IMAGE = VISION_SHAPES[SHAPE]!.imageSeqLength;
const dir = mkdtempSync(join(tmpdir(), "fennec-vision-e2e-"));
const modelPath = join(dir, "tiny-gemma3.gguf");
let server: ServerProcess;
let client: OpenAI;
let images: Bun.Server<undefined>;
let imageHits = 0;

const png = pngOf(40, 30, pattern(40, 30, 1));
const otherPng = pngOf(40, 30, pattern(40, 30, 2));
const dataUrl = (bytes: Uint8Array, type = "image/png") => `data:${type};base64,${Buffer.from(bytes).toString("base64")}`;

beforeAll(async () => {
  const vocab = readGguf(gemma3VocabPath());
  if (!vocab.ok) throw new Error(vocab.error);
  const shape = MODEL_SHAPES[SHAPE]!;
  writeGgufFile(modelPath, randomModel({ shapeName: SHAPE, shape, type: "q8_0", seed: 7, vocab: vocab.value }));
  writeGgufFile(join(dir, "mmproj-tiny-gemma3.gguf"), randomMmproj({ shapeName: SHAPE, vision: VISION_SHAPES[SHAPE]!, textDim: shape.dim, seed: 7 }));
  writeFileSync(join(dir, "local.png"), png);
  images = Bun.serve({
    hostname: "127.0.0.1", port: 0,
    fetch: (request) => {
      const path = new URL(request.url).pathname;
      imageHits++;
      if (path === "/cat.png") return new Response(Buffer.from(png), { headers: { "content-type": "image/png" } });
      if (path === "/slow.png") return new Promise((resolve) => setTimeout(() => resolve(new Response(Buffer.from(png))), 3_000));
      return new Response("no such image", { status: 404 });
    },
  });
  server = await startServer([modelPath, "--max-model-len", "512", "--kv-cache-memory", "32M", "--enable-prompt-tokens-details",
    "--allowed-media-domains", "127.0.0.1", "--limit-mm-per-prompt", '{"image": 2}'], { env: { VLLM_IMAGE_FETCH_TIMEOUT: "1" } });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120_000 });
}, 300_000);

afterAll(async () => {
  await server?.stop();
  images?.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

const ask = (url: string, text = "What is in this picture?", extra: Record<string, unknown> = {}) => client.chat.completions.create({
  model: modelPath, max_tokens: 8, temperature: 0,
  messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }, { type: "text", text }] }], ...extra,
});

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`));
  return line === undefined ? NaN : Number(line.split(" ").at(-1));
}

async function status400(body: unknown): Promise<string> {
  const response = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const json = (await response.json()) as { error?: { message?: string } };
  expect(response.status).toBe(400);
  return json.error?.message ?? "";
}
const imageBody = (...urls: string[]) => ({ model: modelPath, max_tokens: 2, messages: [{ role: "user", content: [...urls.map((url) => ({ type: "image_url", image_url: { url } })), { type: "text", text: "hi" }] }] });

describe("images through the binary (tiny Gemma 3, projector found beside the model)", () => {
  test("the server under test is the compiled binary (its embedded workers and WASM), unless FENNEC_E2E_SOURCE=1", () => {
    if (process.env.FENNEC_E2E_SOURCE !== "1") expect(serverCommand()[0]).toBe(join(import.meta.dir, "..", "..", "dist", "fennec"));
  });

  test("the start-up log names the projector it found", () => {
    expect(server.log()).toContain("mmproj-tiny-gemma3.gguf (found beside the model");
    expect(server.log()).toContain(`gemma3, 112 px images, ${TOKENS_PER_IMAGE} tokens each`);
  });

  test("a PNG by data URL gets an answer; the image counts begin + one token per row + end in prompt_tokens", async () => {
    const answer = await ask(dataUrl(png));
    expect(answer.choices[0]!.finish_reason).toBe("length");
    expect(answer.usage!.completion_tokens).toBe(8);
    const textOnly = await client.chat.completions.create({ model: modelPath, max_tokens: 1, messages: [{ role: "user", content: [{ type: "text", text: "What is in this picture?" }] }] });
    // the template's <start_of_image> becomes <start_of_image>, 16 rows, <end_of_image>
    expect(answer.usage!.prompt_tokens - textOnly.usage!.prompt_tokens).toBe(TOKENS_PER_IMAGE + 2);
  });

  test("the same image by http URL: encoded once (vllm:mm_cache_hits), its prompt blocks from the prefix cache, the same answer", async () => {
    const queries0 = await metric("vllm:mm_cache_queries_total");
    const hits0 = await metric("vllm:mm_cache_hits_total");
    const first = await ask(dataUrl(png), "Describe it.");
    const again = await ask(`http://127.0.0.1:${images.port}/cat.png`, "Describe it.");
    expect(await metric("vllm:mm_cache_queries_total")).toBe(queries0 + 2);
    expect(await metric("vllm:mm_cache_hits_total")).toBe(hits0 + 2);
    expect(again.choices[0]!.message.content).toBe(first.choices[0]!.message.content);
    expect(again.usage!.prompt_tokens_details?.cached_tokens ?? 0).toBeGreaterThanOrEqual(16);
  });

  test("another image with the same text does not reuse the first image's blocks (the block hash carries the image hash)", async () => {
    const same = await ask(dataUrl(png), "Describe it.");
    const other = await ask(dataUrl(otherPng), "Describe it.");
    const cachedSame = same.usage!.prompt_tokens_details?.cached_tokens ?? 0;
    const cachedOther = other.usage!.prompt_tokens_details?.cached_tokens ?? 0;
    expect(cachedSame).toBeGreaterThan(cachedOther);
    // only the text before the image may be shared: whole 16-token blocks before <start_of_image>'s rows
    expect(cachedOther).toBeLessThan(16);
  });

  test("JPEG, WebP (libwebp's WASM inside the binary) and GIF by data URL", async () => {
    const rgb = pattern(64, 48, 3);
    for (const [type, bytes] of [["image/jpeg", jpegOf(64, 48, rgb)], ["image/webp", await webpOf(64, 48, rgb)], ["image/gif", gifOf(33, 21).bytes]] as const) {
      const answer = await ask(dataUrl(bytes, type));
      expect(answer.usage!.completion_tokens).toBe(8);
    }
  });

  test("a local file under --allowed-local-media-path only: refused without the flag", async () => {
    expect(await status400(imageBody(`file://${join(dir, "local.png")}`))).toContain("Cannot load local files without `--allowed-local-media-path`.");
  });

  test("vLLM's media rules: --limit-mm-per-prompt, --allowed-media-domains, a 404, a timeout", async () => {
    const url = dataUrl(png);
    expect(await status400(imageBody(url, url, url))).toContain("At most 2 image(s) may be provided in one prompt.");
    expect(await status400(imageBody(`http://localhost:${images.port}/cat.png`))).toContain("The URL must be from one of the allowed domains: [\"127.0.0.1\"]. Input URL domain: localhost");
    expect(await status400(imageBody(`http://127.0.0.1:${images.port}/missing.png`))).toContain("answered HTTP 404");
    expect(await status400(imageBody(`http://127.0.0.1:${images.port}/slow.png`))).toContain("did not answer within 1 s");
    expect(await status400(imageBody("data:text/plain;base64,aGk="))).toContain("is not an image");
    expect(await status400(imageBody("ftp://127.0.0.1/x.png"))).toContain("image URLs must be data:, http(s): or file:");
  });

  test("two images in one prompt; the template's markers must match the images", async () => {
    const two = await client.chat.completions.create({
      model: modelPath, max_tokens: 2, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: dataUrl(png) } }, { type: "image_url", image_url: { url: dataUrl(otherPng) } }, { type: "text", text: "Compare." }] }],
    });
    expect(two.usage!.completion_tokens).toBe(2);
  });
});

describe("a model served without its projector", () => {
  test("--no-mmproj: image parts answer 400 naming --mmproj", async () => {
    const textOnly = await startServer([modelPath, "--no-mmproj", "--max-model-len", "256", "--kv-cache-memory", "16M"]);
    try {
      const response = await fetch(`${textOnly.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(imageBody(dataUrl(png))) });
      expect(response.status).toBe(400);
      const body = (await response.json()) as { error: { message: string; param?: string } };
      expect(body.error.message).toContain("this model takes no images");
      expect(body.error.message).toContain("--mmproj");
    } finally {
      await textOnly.stop();
    }
  });
});
