/**
 * The end-to-end oracle: llama.cpp's llama-mtmd-cli (scripts/build-llama-tool.sh llama-mtmd-cli) and the compiled
 * fennec serve the same tiny Gemma 3 (f16, real Gemma 3 tokenizer and template) with the same projector, and for the
 * same image and question greedily generate the same 32 tokens. mtmd-cli puts its media marker before the prompt and
 * renders the chat template, then replaces the marker by <start_of_image>, the image's rows and <end_of_image>
 * (mtmd-cli.cpp eval_message, mtmd.cpp): fennec's image part first, then the text, gives the same tokens. Three images
 * of different sizes and formats stb_image reads (PNG, JPEG, GIF; not WebP). Where the texts part, fennec's step there
 * must be a near tie (greedy-agreement.ts). Skipped, saying so, where the oracle is not built.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $ } from "bun";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { MODEL_SHAPES, VISION_SHAPES, vocabPath } from "../../scripts/model-shapes.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { startServer } from "../e2e/server-process.ts";
import { gifOf, jpegOf, pattern, pngOf } from "./test-images.ts";
import { judgeGreedy, type ServedStep } from "./greedy-agreement.ts";
import { llamaMtmdCliPath } from "./llama-mtmd-cli.ts";

setDefaultTimeout(600_000);

const oracle = llamaMtmdCliPath();
const dir = mkdtempSync(join(tmpdir(), "fennec-vision-greedy-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const QUESTION = "What is in the image?";
const N = 32;

describe("greedy tokens vs llama-mtmd-cli", () => {
  if (oracle === null) console.warn("llama-mtmd-greedy-oracle: skipped, llama-mtmd-cli is not built (scripts/build-llama-tool.sh llama-mtmd-cli)");

  test.skipIf(oracle === null)(`tiny-gemma3-4b: the same ${N} greedy tokens (or parting at a near tie) for a PNG, a JPEG and a GIF of different sizes`, async () => {
    const vocab = readGguf(vocabPath("gemma3"));
    if (!vocab.ok) throw new Error(vocab.error);
    const shape = MODEL_SHAPES["tiny-gemma3-4b"]!;
    const lmPath = join(dir, "lm.gguf"), mmPath = join(dir, "mmproj.gguf");
    writeGgufFile(lmPath, randomModel({ shapeName: "tiny-gemma3-4b", shape, type: "f16", seed: 11, vocab: vocab.value }));
    writeGgufFile(mmPath, randomMmproj({ shapeName: "tiny-gemma3-4b", vision: VISION_SHAPES["tiny-gemma3-4b"]!, textDim: shape.dim, seed: 11 }));
    const images: [string, Uint8Array][] = [
      ["wide.png", pngOf(150, 90, pattern(150, 90, 1))],
      ["tall.jpg", jpegOf(64, 200, pattern(64, 200, 2), 100)],
      ["square.gif", gifOf(112, 112).bytes],
    ];
    const server = await startServer(["--model", lmPath, "--mmproj", mmPath, "--max-model-len", "512", "--kv-cache-memory", "32M"]);
    const mismatches: string[] = [];
    try {
      for (const [name, bytes] of images) {
        const path = join(dir, name);
        writeFileSync(path, bytes);
        const run = await $`${oracle!} -m ${lmPath} --mmproj ${mmPath} --image ${path} -p ${QUESTION} -n ${N} --temp 0 -t 2 -c 512 --no-warmup`.quiet().nothrow();
        if (run.exitCode !== 0) throw new Error(`llama-mtmd-cli failed (${run.exitCode}): ${run.stderr.toString().slice(-2000)}`);
        const theirs = run.stdout.toString().trim();
        const type = name.endsWith(".png") ? "image/png" : name.endsWith(".jpg") ? "image/jpeg" : "image/gif";
        const response = await fetch(`${server.url}/v1/chat/completions`, {
          method: "POST", headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model: lmPath, max_tokens: N, temperature: 0, logprobs: true, top_logprobs: 2, skip_special_tokens: false,
            messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: `data:${type};base64,${Buffer.from(bytes).toString("base64")}` } }, { type: "text", text: QUESTION }] }],
          }),
        });
        const body = (await response.json()) as { choices: { message: { content: string }; logprobs: { content: ServedStep[] } }[] };
        expect(response.status).toBe(200);
        const { content } = body.choices[0]!.message;
        const judgement = judgeGreedy(content, body.choices[0]!.logprobs.content, theirs);
        console.log(`llama-mtmd-greedy ${name}: ${judgement.summary} (${N} tokens); smallest top-2 logprob margin ${judgement.smallestMargin.toFixed(4)}\n  fennec:   ${JSON.stringify(content.trim())}\n  llama.cpp: ${JSON.stringify(theirs)}`);
        if (!judgement.agrees) mismatches.push(name);
      }
    } finally {
      await server.stop();
    }
    expect(mismatches).toEqual([]);
  });
});
