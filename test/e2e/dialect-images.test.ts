/**
 * Images through every dialect, against the compiled binary (dist/fennec when built from the current sources), with
 * the real clients: the openai SDK's responses.create with an input_image, @anthropic-ai/sdk messages.create with a
 * base64 image block, and the `ollama` library's chat with images, on make-model's tiny Gemma 3 (random weights, the
 * real Gemma 3 tokenizer and template) with its projector beside it. Each gets an answer; the one image sent through
 * the three dialects is encoded once (vllm:mm_cache_hits_total counts the other two); the same conversation gives the
 * prompt in all three (image rows included) and the same greedy answer on Responses and Anthropic.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { Ollama } from "ollama";
import { gemma3VocabPath } from "../../scripts/gemma3-vocab.ts";
import { MODEL_SHAPES, VISION_SHAPES } from "../../scripts/model-shapes.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { pattern, pngOf } from "../vision/test-images.ts";
import { serverCommand, startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(120_000);

const SHAPE = "tiny-gemma3-4b";
const MODEL = "tiny-gemma3";
const dir = mkdtempSync(join(tmpdir(), "fennec-dialect-images-"));
const modelPath = join(dir, "tiny-gemma3.gguf");
let server: ServerProcess;

const png = pngOf(40, 30, pattern(40, 30, 5));
const base64 = Buffer.from(png).toString("base64");
const QUESTION = "What is in this picture?";

beforeAll(async () => {
  const vocab = readGguf(gemma3VocabPath());
  if (!vocab.ok) throw new Error(vocab.error);
  const shape = MODEL_SHAPES[SHAPE]!;
  writeGgufFile(modelPath, randomModel({ shapeName: SHAPE, shape, type: "q8_0", seed: 7, vocab: vocab.value }));
  writeGgufFile(join(dir, "mmproj-tiny-gemma3.gguf"), randomMmproj({ shapeName: SHAPE, vision: VISION_SHAPES[SHAPE]!, textDim: shape.dim, seed: 7 }));
  server = await startServer([modelPath, "--served-model-name", MODEL, "--max-model-len", "512", "--kv-cache-memory", "32M"]);
}, 300_000);

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`));
  return line === undefined ? NaN : Number(line.split(" ").at(-1));
}

describe("one image through Responses, Anthropic Messages and Ollama's chat (the binary, the real clients)", () => {
  const answers: string[] = [];
  /** the Responses prompt's tokens: the other dialects render the same conversation, image rows included */
  let promptTokens = 0;

  test("the server under test is the compiled binary, unless FENNEC_E2E_SOURCE=1", () => {
    if (process.env.FENNEC_E2E_SOURCE !== "1") expect(serverCommand()[0]).toBe(join(import.meta.dir, "..", "..", "dist", "fennec"));
  });

  test("openai responses.create with input_image (data URL): an answer; the image is a miss the first time", async () => {
    const [queries0, hits0] = [await metric("vllm:mm_cache_queries_total"), await metric("vllm:mm_cache_hits_total")];
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120_000 });
    const response = await client.responses.create({
      model: MODEL, max_output_tokens: 8, temperature: 0,
      input: [{ role: "user", content: [{ type: "input_image", image_url: `data:image/png;base64,${base64}`, detail: "auto" }, { type: "input_text", text: QUESTION }] }],
    });
    expect(response.status).toBe("incomplete");
    expect(response.usage!.output_tokens).toBe(8);
    expect(response.usage!.input_tokens).toBeGreaterThan(VISION_SHAPES[SHAPE]!.imageSeqLength);
    answers.push(response.output_text);
    promptTokens = response.usage!.input_tokens;
    expect(await metric("vllm:mm_cache_queries_total")).toBe(queries0 + 1);
    expect(await metric("vllm:mm_cache_hits_total")).toBe(hits0);
  });

  test("@anthropic-ai/sdk messages.create with a base64 image block: an answer, the image from the encoder cache, the same greedy text", async () => {
    const hits0 = await metric("vllm:mm_cache_hits_total");
    const client = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0, timeout: 120_000 });
    // temperature is Anthropic's documented field; this SDK version's types leave it out, its body carries it
    const params = {
      model: MODEL, max_tokens: 8, temperature: 0,
      messages: [{ role: "user" as const, content: [{ type: "image" as const, source: { type: "base64" as const, media_type: "image/png" as const, data: base64 } }, { type: "text" as const, text: QUESTION }] }],
    };
    const message = await client.messages.create(params as Anthropic.MessageCreateParamsNonStreaming);
    expect(message.stop_reason).toBe("max_tokens");
    expect(message.usage.output_tokens).toBe(8);
    const text = message.content.filter((b) => b.type === "text").map((b) => (b as { text: string }).text).join("");
    expect(text).toBe(answers[0]!);
    // Anthropic's input_tokens leaves out what the prefix cache read (the image's blocks among them)
    const { input_tokens, cache_read_input_tokens, cache_creation_input_tokens } = message.usage;
    expect(input_tokens + (cache_read_input_tokens ?? 0) + (cache_creation_input_tokens ?? 0)).toBe(promptTokens);
    expect(cache_read_input_tokens ?? 0).toBeGreaterThanOrEqual(16);
    expect(await metric("vllm:mm_cache_hits_total")).toBe(hits0 + 1);
  });

  test("the ollama library's chat with images (bytes, sent as base64): an answer, the image from the encoder cache", async () => {
    const hits0 = await metric("vllm:mm_cache_hits_total");
    const ollama = new Ollama({ host: server.url });
    const response = await ollama.chat({ model: MODEL, messages: [{ role: "user", content: QUESTION, images: [png] }], options: { num_predict: 8, temperature: 0 } });
    expect(response.done).toBe(true);
    expect(response.eval_count).toBe(8);
    expect(response.prompt_eval_count).toBe(promptTokens);
    expect(await metric("vllm:mm_cache_hits_total")).toBe(hits0 + 1);
  });
});
