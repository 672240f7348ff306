/**
 * The oracle: llama.cpp's llama-mtmd-cli (scripts/build-llama-tool.sh llama-mtmd-cli) encodes the same image with the same
 * projector, and dumps the embeddings it hands the language model (MTMD_DEBUG_EMBEDDINGS=<file>: int32 tokens, int32
 * width, f32 data; clip.cpp clip_image_batch_encode). fennec's preprocessing (stb decode aside: a PPM both read the
 * same) and reference encoder must give the same [tokens][width] block within a stated bound. Skipped, saying so,
 * where the oracle is not built.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $ } from "bun";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import type { RgbImage } from "../../src/vision/image-resize.ts";
import { readVisionConfig, readVisionWeights } from "../../src/vision/mmproj.ts";
import { preprocessImage } from "../../src/vision/preprocess.ts";
import { embedImagesReference } from "../../src/vision/reference-encoder.ts";
import { BackendVisionEncoder } from "../../src/vision/backend-encoder.ts";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { MODEL_SHAPES, VISION_SHAPES, vocabPath } from "../../scripts/model-shapes.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { llamaMtmdCliPath } from "./llama-mtmd-cli.ts";
import { ppm, testCard } from "./test-images.ts";

// writing the models, llama.cpp's load and a 2-layer real-width SigLIP in plain TypeScript on a busy 2-core box
setDefaultTimeout(300_000);

const oracle = llamaMtmdCliPath();
const dir = mkdtempSync(join(tmpdir(), "fennec-vision-oracle-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("reference encoder vs llama-mtmd-cli", () => {
  if (oracle === null) console.warn("llama-mtmd-oracle: skipped, llama-mtmd-cli is not built (scripts/build-llama-tool.sh llama-mtmd-cli)");

  test.skipIf(oracle === null)("tiny-gemma3-4b (real-width SigLIP, 2 layers): the same 16 x 256 image embeddings for 3 images (wide, tall, exact size)", async () => {
    const vocab = readGguf(vocabPath("gemma3"));
    if (!vocab.ok) throw new Error(vocab.error);
    const shape = MODEL_SHAPES["tiny-gemma3-4b"]!;
    const lmPath = join(dir, "lm.gguf"), mmPath = join(dir, "mmproj.gguf"), dumpPath = join(dir, "embd.bin");
    writeGgufFile(lmPath, randomModel({ shapeName: "tiny-gemma3-4b", shape, type: "f16", seed: 5, vocab: vocab.value }));
    writeGgufFile(mmPath, randomMmproj({ shapeName: "tiny-gemma3-4b", vision: VISION_SHAPES["tiny-gemma3-4b"]!, textDim: shape.dim, seed: 5 }));
    const mm = readGguf(mmPath);
    if (!mm.ok) throw new Error(mm.error);
    const c = readVisionConfig(mm.value);
    if (!c.ok) throw new Error(c.error);
    const w = readVisionWeights(mm.value, c.value);
    if (!w.ok) throw new Error(w.error);
    await ensureKernels();
    const kernels = new BackendVisionEncoder(c.value, w.value, await createBackend({ kind: "wasm", threads: 2 }));

    // letterboxed top and bottom (150 x 90 -> 112 x 68), left and right (64 x 200 -> 36 x 112), and no resize at all
    for (const [width, height] of [[150, 90], [64, 200], [112, 112]] as const) {
      const card = testCard(width, height);
      const imgPath = join(dir, `card-${width}x${height}.ppm`);
      writeFileSync(imgPath, ppm(card));
      rmSync(dumpPath, { force: true });
      const run = await $`${oracle!} -m ${lmPath} --mmproj ${mmPath} --image ${imgPath} -p ${"What is in the image?"} -n 1 --temp 0 -t 2`
        .env({ ...process.env, MTMD_DEBUG_EMBEDDINGS: dumpPath }).quiet().nothrow();
      if (run.exitCode !== 0) throw new Error(`llama-mtmd-cli failed (${run.exitCode}): ${run.stderr.toString().slice(-2000)}`);
      const dump = readFileSync(dumpPath);
      const view = new DataView(dump.buffer, dump.byteOffset, dump.byteLength);
      const [tokens, embd] = [view.getInt32(0, true), view.getInt32(4, true)];
      const theirs = new Float32Array(dump.buffer.slice(dump.byteOffset + 8, dump.byteOffset + 8 + tokens * embd * 4));
      const [tile] = preprocessImage(card, c.value);
      const [ours] = embedImagesReference([tile!], c.value, w.value);
      const onKernels = await kernels.embedTile(tile!);

      expect([tokens, embd]).toEqual([c.value.tokensPerImage, shape.dim]);
      const compare = (mine: Float32Array) => {
        let maxDiff = 0, maxAbs = 0, dot = 0, n1 = 0, n2 = 0;
        for (let i = 0; i < mine.length; i++) {
          maxDiff = Math.max(maxDiff, Math.abs(mine[i]! - theirs[i]!));
          maxAbs = Math.max(maxAbs, Math.abs(theirs[i]!));
          dot += mine[i]! * theirs[i]!; n1 += mine[i]! ** 2; n2 += theirs[i]! ** 2;
        }
        return { maxDiff, maxAbs, cosine: dot / Math.sqrt(n1 * n2) };
      };
      const ref = compare(ours!);
      const kern = compare(onKernels);
      console.log(`llama-mtmd-oracle ${width}x${height}: reference max |diff| ${ref.maxDiff.toExponential(3)} of max |x| ${ref.maxAbs.toFixed(4)}, cosine ${ref.cosine.toFixed(7)}; kernels max |diff| ${kern.maxDiff.toExponential(3)}, cosine ${kern.cosine.toFixed(7)}`);
      // ggml multiplies f16 weights with activations rounded to f16 and takes GELU from an f16 table: measured about
      // 6e-4 of the largest value, cosine 0.9999998; one row of letterbox off gives 0.2 and 0.987
      expect(ref.maxDiff / ref.maxAbs).toBeLessThan(5e-3);
      expect(ref.cosine).toBeGreaterThan(0.99999);
      // the kernels hold the encoder's weights in f32 (f32 matmuls) and its K/V in f16: measured as close as the reference
      expect(kern.maxDiff / kern.maxAbs).toBeLessThan(5e-3);
      expect(kern.cosine).toBeGreaterThan(0.99999);
    }
    kernels.dispose();
  });
});
