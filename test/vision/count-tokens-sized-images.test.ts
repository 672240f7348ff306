/**
 * Anthropic's count_tokens on projectors whose image rows follow the image's size: Qwen2.5-VL (its token grid) and
 * SmolVLM (its tiles and their markers). For two images of different sizes, count_tokens gives exactly the prompt
 * tokens the same Messages request reports in usage, and the two counts differ; against the compiled binary on the
 * tiny models of make-model's shapes.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MODEL_SHAPES, VISION_SHAPES, vocabPath } from "../../scripts/model-shapes.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { startServer } from "../e2e/server-process.ts";
import { writeQwen25vlModels } from "./qwen25vl-models.ts";
import { pattern, pngOf } from "./test-images.ts";

setDefaultTimeout(240_000);
const dir = mkdtempSync(join(tmpdir(), "fennec-count-sized-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function writeSmolvlm(): { lmPath: string; mmPath: string } {
  const shapeName = "tiny-smolvlm-256m";
  const vocab = readGguf(vocabPath("smolvlm"));
  if (!vocab.ok) throw new Error(vocab.error);
  const shape = MODEL_SHAPES[shapeName]!;
  const lmPath = join(dir, "smolvlm.gguf"), mmPath = join(dir, "smolvlm-mmproj.gguf");
  writeGgufFile(lmPath, randomModel({ shapeName, shape, type: "f16", seed: 3, vocab: vocab.value }));
  writeGgufFile(mmPath, randomMmproj({ shapeName, vision: VISION_SHAPES[shapeName]!, textDim: shape.dim, seed: 3 }));
  return { lmPath, mmPath };
}

const message = (width: number, height: number) => ({
  model: "m",
  messages: [{ role: "user", content: [
    { type: "image", source: { type: "base64", media_type: "image/png", data: Buffer.from(pngOf(width, height, pattern(width, height, width))).toString("base64") } },
    { type: "text", text: "What is in this picture?" },
  ] }],
});

async function post(url: string, body: object): Promise<Record<string, unknown>> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const json = (await res.json()) as Record<string, unknown>;
  expect(res.status, JSON.stringify(json)).toBe(200);
  return json;
}

describe.each([
  ["Qwen2.5-VL", () => writeQwen25vlModels(dir, 5)],
  ["SmolVLM", writeSmolvlm],
])("count_tokens with images on %s", (_family, write) => {
  test("counts what the request's prompt holds, image by image size", async () => {
    const { lmPath, mmPath } = write();
    const server = await startServer(["--model", lmPath, "--mmproj", mmPath, "--served-model-name", "m", "--max-model-len", "1024", "--kv-cache-memory", "32M"]);
    try {
      const counts: number[] = [];
      for (const [w, h] of [[250, 40], [150, 150]] as const) {
        const counted = await post(`${server.url}/v1/messages/count_tokens`, message(w, h));
        const answer = await post(`${server.url}/v1/messages`, { ...message(w, h), max_tokens: 1 });
        expect(counted.input_tokens).toBe((answer.usage as { input_tokens: number }).input_tokens);
        counts.push(counted.input_tokens as number);
      }
      expect(counts[1]).not.toBe(counts[0]!); // a wide strip and a square take different grids / tiles
    } finally {
      await server.stop();
    }
  });
});
