/**
 * Images on the WebGPU path: `fennec serve --device webgpu` with a projector runs the vision encoder on the WASM
 * kernels (its own thread) and the language model, image rows included, on WebGPU (Dawn over the Vulkan CPU driver
 * here). The same greedy tokens and log-probabilities as `--device cpu` for a chat with one image, against the
 * compiled binary, on make-model's tiny Gemma 3 with its projector beside it.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gemma3VocabPath } from "../../scripts/gemma3-vocab.ts";
import { MODEL_SHAPES, VISION_SHAPES } from "../../scripts/model-shapes.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { pattern, pngOf } from "../vision/test-images.ts";
import { startServer } from "../e2e/server-process.ts";

setDefaultTimeout(180_000);

const SHAPE = "tiny-gemma3-4b";
const dir = mkdtempSync(join(tmpdir(), "fennec-webgpu-vision-"));
const modelPath = join(dir, "tiny-gemma3.gguf");

beforeAll(() => {
  const vocab = readGguf(gemma3VocabPath());
  if (!vocab.ok) throw new Error(vocab.error);
  const shape = MODEL_SHAPES[SHAPE]!;
  writeGgufFile(modelPath, randomModel({ shapeName: SHAPE, shape, type: "f16", seed: 11, vocab: vocab.value }));
  writeGgufFile(join(dir, "mmproj-tiny-gemma3.gguf"), randomMmproj({ shapeName: SHAPE, vision: VISION_SHAPES[SHAPE]!, textDim: shape.dim, seed: 11 }));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const png = pngOf(48, 36, pattern(48, 36, 3));

async function greedyWithImage(device: "cpu" | "webgpu"): Promise<{ token: string; logprob: number }[]> {
  // the software adapter here binds at most 128 MiB: the logits of the default step (2,048 tokens, 128 sequences) over
  // Gemma 3's 262,144-token vocabulary exceed it, so both devices run the smaller step
  const server = await startServer([modelPath, "--device", device, "--served-model-name", "m", "--max-model-len", "512", "--max-num-batched-tokens", "512", "--max-num-seqs", "16"]);
  try {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "m", max_tokens: 8, temperature: 0, logprobs: true,
        messages: [{ role: "user", content: [
          { type: "image_url", image_url: { url: `data:image/png;base64,${Buffer.from(png).toString("base64")}` } },
          { type: "text", text: "What is in this picture?" },
        ] }],
      }),
    });
    const body = await res.json() as { usage: { prompt_tokens: number }; choices: { logprobs: { content: { token: string; logprob: number }[] } }[] };
    expect(res.status).toBe(200);
    expect(body.usage.prompt_tokens).toBeGreaterThan(VISION_SHAPES[SHAPE]!.imageSeqLength); // the image's rows are in the prompt
    return body.choices[0]!.logprobs.content;
  } finally {
    await server.stop();
  }
}

test("a chat with an image gives the same greedy tokens on WebGPU as on the CPU kernels", async () => {
  const cpu = await greedyWithImage("cpu");
  const gpu = await greedyWithImage("webgpu");
  expect(gpu.map((t) => t.token)).toEqual(cpu.map((t) => t.token));
  for (let i = 0; i < cpu.length; i++) expect(Math.abs(gpu[i]!.logprob - cpu[i]!.logprob)).toBeLessThan(1e-2);
});
