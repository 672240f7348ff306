/**
 * Qwen2.5-VL against llama.cpp's llama-mtmd-cli (scripts/build-llama-tool.sh llama-mtmd-cli), on make-model's
 * tiny-qwen2.5-vl-3b: a 256-wide qwen2vl language model (real M-RoPE sections [16, 24, 24], real Qwen2.5 tokenizer
 * and template) under a real-width Qwen2.5-VL ViT of 2 layers (layer 0 in windows, layer 1 full).
 *  1. Embeddings: fennec's preprocessing (smart resize, bicubic letterbox) and plain reference encoder, and the encoder
 *     on the WASM kernels, give the block
 *     llama.cpp hands its language model (MTMD_DEBUG_EMBEDDINGS=<file>) within a stated bound, for a wide image (two
 *     windows across), a tall one (two windows down) and one so small it is scaled up to the minimum pixels.
 *  2. Greedy tokens: for a PNG, a JPEG and a GIF of different sizes, fennec's reference path (image decode, encoder,
 *     then the reference language model fed mtmd's prompt: the model's chat template (--jinja: mtmd-cli's default is
 *     llama.cpp's built-in ChatML, without Qwen2.5-VL's system line) around the media marker, the marker
 *     replaced by <|vision_start|>, the image's rows, <|vision_end|>, with M-RoPE positions t = p0, y = p0 + row,
 *     x = p0 + col and the next text at p0 + max(rows, cols)) generates llama-mtmd-cli's 32 tokens, or texts that part
 *     at a near tie (greedy-agreement.ts). Control: the same rows at plain sequential positions do not.
 *  3. Served: fennec serve --mmproj answers /v1/chat/completions (an image_url part, then the question) with the same
 *     32 tokens, or texts that part at a near tie (greedy-agreement.ts); the encoder on the WASM kernels, the engine
 *     placing the rows with M-RoPE positions.
 * The language model's weights are scaled up from make-model's (peakedModel), so the logits are peaked and a wrong
 * position changes the tokens (near-uniform logits would hide it). Skipped, saying so, where the oracle is
 * not built.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $ } from "bun";
import { readGguf } from "../../src/gguf/reader.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { argmax } from "../../src/model/decode-loop.ts";
import { imageMropePositions, textMropePosition, type MropePosition } from "../../src/model/mrope.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import { decodeImage } from "../../src/vision/image-decode.ts";
import type { RgbImage } from "../../src/vision/image-resize.ts";
import { preprocessQwen25vl } from "../../src/vision/qwen25vl-preprocess.ts";
import { embedQwen25vlReference } from "../../src/vision/qwen25vl-reference-encoder.ts";
import { Qwen25vlBackendEncoder } from "../../src/vision/qwen25vl-backend-encoder.ts";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { logSoftmax } from "../helpers/llama-cpp.ts";
import { gifOf, jpegOf, pattern, pngOf, ppm, testCard } from "./test-images.ts";
import { judgeGreedy, type ServedStep } from "./greedy-agreement.ts";
import { llamaMtmdCliPath } from "./llama-mtmd-cli.ts";
import { startServer } from "../e2e/server-process.ts";
import { SHAPE, writeQwen25vlModels } from "./qwen25vl-models.ts";

// model writing, llama.cpp's runs and a real-width ViT in plain TypeScript on a busy 2-core box
setDefaultTimeout(600_000);

const QUESTION = "What is in the image?";
const N = 32;
/** mtmd_default_marker() */
const MEDIA_MARKER = "<__media__>";

const oracle = llamaMtmdCliPath();
const dir = mkdtempSync(join(tmpdir(), "fennec-qwen25vl-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("Qwen2.5-VL vs llama-mtmd-cli", () => {
  if (oracle === null) console.warn("qwen25vl-oracle: skipped, llama-mtmd-cli is not built (scripts/build-llama-tool.sh llama-mtmd-cli)");

  test.skipIf(oracle === null)(`${SHAPE}: the reference encoder and the WASM one give llama.cpp's image embeddings for a wide, a tall and a tiny image`, async () => {
    const { lmPath, mmPath, c, w } = writeQwen25vlModels(dir, 5);
    const dumpPath = join(dir, "embd.bin");
    await ensureKernels();
    const kernels = new Qwen25vlBackendEncoder(c, w, await createBackend({ kind: "wasm", threads: 2 }));
    // 150 x 90 -> 140 x 84 (5 x 3 tokens, windows of 4: two across); 64 x 200 -> 56 x 196 (2 x 7: two down);
    // 30 x 20 -> under 8 tokens' pixels, scaled up to 112 x 84 (4 x 3)
    for (const [width, height, cols, rows] of [[150, 90, 5, 3], [64, 200, 2, 7], [30, 20, 4, 3]] as const) {
      const card = testCard(width, height);
      const imgPath = join(dir, `card-${width}x${height}.ppm`);
      writeFileSync(imgPath, ppm(card));
      rmSync(dumpPath, { force: true });
      const run = await $`${oracle!} -m ${lmPath} --mmproj ${mmPath} --image ${imgPath} -p ${QUESTION} -n 1 --temp 0 -t 2 --no-warmup`
        .env({ ...process.env, MTMD_DEBUG_EMBEDDINGS: dumpPath }).quiet().nothrow();
      if (run.exitCode !== 0) throw new Error(`llama-mtmd-cli failed (${run.exitCode}): ${run.stderr.toString().slice(-2000)}`);
      const dump = readFileSync(dumpPath);
      const view = new DataView(dump.buffer, dump.byteOffset, dump.byteLength);
      const [tokens, embd] = [view.getInt32(0, true), view.getInt32(4, true)];
      const theirs = new Float32Array(dump.buffer.slice(dump.byteOffset + 8, dump.byteOffset + 8 + tokens * embd * 4));
      const tile = preprocessQwen25vl(card, c);
      const ours = embedQwen25vlReference(tile, c, w);
      const onKernels = await kernels.embed(tile);
      expect([ours.cols, ours.rows]).toEqual([cols, rows]);
      expect([tokens, embd]).toEqual([cols * rows, c.projectionDim]);
      expect(onKernels.length).toBe(theirs.length);
      const compare = (mine: Float32Array) => {
        let maxDiff = 0, maxAbs = 0, dot = 0, n1 = 0, n2 = 0;
        for (let i = 0; i < theirs.length; i++) {
          const [a, b] = [mine[i]!, theirs[i]!];
          maxDiff = Math.max(maxDiff, Math.abs(a - b));
          maxAbs = Math.max(maxAbs, Math.abs(b));
          dot += a * b; n1 += a * a; n2 += b * b;
        }
        return { relative: maxDiff / maxAbs, text: `max |diff| ${maxDiff.toExponential(3)} of max |x| ${maxAbs.toFixed(4)}, cosine ${(dot / Math.sqrt(n1 * n2)).toFixed(7)}`, cosine: dot / Math.sqrt(n1 * n2) };
      };
      const [ref, kern] = [compare(ours.embeddings), compare(onKernels)];
      console.log(`qwen25vl embeddings ${width}x${height} -> ${cols}x${rows} tokens: reference ${ref.text}; kernels ${kern.text}`);
      // ggml's f16 weights take f16-rounded activations and GELU comes from an f16 table: measured 2.9e-3..4.4e-3 of
      // about 5.5 (8e-4 relative), cosine 0.9999997..0.9999998, the kernels (f16 weights, f16 K/V) as close
      for (const r of [ref, kern]) {
        expect(r.relative).toBeLessThan(5e-3);
        expect(r.cosine).toBeGreaterThan(0.99999);
      }
    }
    kernels.dispose();
  });

  test.skipIf(oracle === null)(`${SHAPE}: the same ${N} greedy tokens as llama-mtmd-cli for a PNG, a JPEG and a GIF of different sizes; sequential positions do not`, async () => {
    const { lmPath, mmPath, c, w } = writeQwen25vlModels(dir, 11);
    const file = readGguf(lmPath);
    if (!file.ok) throw new Error(file.error);
    const loaded = loadModel(file.value, { maxModelLen: 2048 });
    if (!loaded.ok) throw new Error(loaded.error);
    const { config, weights } = loaded.value;
    expect(config.ropeSections).toEqual([16, 24, 24, 0]);
    const tokenizer = createTokenizer(file.value);
    const special = (text: string) => {
      const ids = tokenizer.encode(text, { addSpecial: false, parseSpecial: true });
      if (ids.length !== 1) throw new Error(`${text} is not one token`);
      return ids[0]!;
    };
    const [visionStart, visionEnd] = [special("<|vision_start|>"), special("<|vision_end|>")];
    // mtmd-cli: the marker before the question, the template rendered, split at the marker, each piece tokenized with
    // special tokens parsed (the first with add_special), begin / end around the image's rows (mtmd_tokenize)
    const rendered = tokenizer.applyChatTemplate([{ role: "user", content: MEDIA_MARKER + QUESTION }], { addGenerationPrompt: true });
    const [before, after] = rendered.split(MEDIA_MARKER) as [string, string];
    const head = [...tokenizer.encode(before, { addSpecial: true, parseSpecial: true }), visionStart];
    const tail = [visionEnd, ...tokenizer.encode(after, { addSpecial: false, parseSpecial: true })];

    /** Greedy tokens from the reference model, with the image's rows at M-RoPE positions or at sequential ones. */
    const generate = (embeddings: Float32Array, cols: number, rows: number, mrope: boolean) => {
      const ref = new ReferenceForward(config, weights, head.length + cols * rows + tail.length + N);
      let slot = 0;
      const text = (p: number): MropePosition => textMropePosition(p);
      for (const id of head) ref.advance(id, slot, text(slot)), slot++;
      const p0 = slot;
      const image = imageMropePositions(p0, cols, rows);
      for (let r = 0; r < cols * rows; r++) {
        const row = embeddings.subarray(r * config.dim, (r + 1) * config.dim);
        ref.advance(row, slot, mrope ? image.positions[r]! : text(slot));
        slot++;
      }
      // M-RoPE: the text after the image continues at p0 + max(rows, cols); sequential: at the next slot
      const shift = mrope ? image.next - slot : 0;
      const out: number[] = [];
      const margins: number[] = [];
      let logits: Float32Array | null = null;
      for (const id of tail) logits = ref.forward(id, slot, text(slot + shift)), slot++;
      for (let step = 0; step < N; step++) {
        const lp = logSoftmax(logits!);
        const next = argmax(logits!);
        const second = Array.from(lp).reduce((best, v, i) => (i !== next && v > best ? v : best), -Infinity);
        margins.push(lp[next]! - second);
        out.push(next);
        if (tokenizer.stopIds.includes(next)) break;
        logits = ref.forward(next, slot, text(slot + shift));
        slot++;
      }
      const ids = tokenizer.stopIds.includes(out[out.length - 1]!) ? out.slice(0, -1) : out;
      // each step as the served logprobs would give it: its token's bytes and the top-2 log-probs' margin
      const encoder = new TextEncoder();
      const steps: ServedStep[] = ids.map((id, i) => ({ bytes: [...encoder.encode(tokenizer.decode([id], { skipSpecialTokens: false }))], top_logprobs: [{ logprob: 0 }, { logprob: -margins[i]! }] }));
      return { text: tokenizer.decode(ids, { skipSpecialTokens: false }), margin: Math.min(...margins), steps };
    };

    const images: [string, Uint8Array][] = [
      ["wide.png", pngOf(150, 90, pattern(150, 90, 1))],
      ["tall.jpg", jpegOf(64, 200, pattern(64, 200, 2), 100)],
      ["square.gif", gifOf(112, 112).bytes],
    ];
    const mismatches: string[] = [];
    let controlDiffers = 0;
    for (const [name, bytes] of images) {
      const path = join(dir, name);
      writeFileSync(path, bytes);
      const run = await $`${oracle!} -m ${lmPath} --mmproj ${mmPath} --image ${path} -p ${QUESTION} -n ${N} --temp 0 -t 2 -c 512 --no-warmup --jinja`.quiet().nothrow();
      if (run.exitCode !== 0) throw new Error(`llama-mtmd-cli failed (${run.exitCode}): ${run.stderr.toString().slice(-2000)}`);
      const theirs = run.stdout.toString().trim();
      const img = await decodeImage(bytes);
      if (!img.ok) throw new Error(img.error);
      const { embeddings, cols, rows } = embedQwen25vlReference(preprocessQwen25vl(img.value, c), c, w);
      const ours = generate(embeddings, cols, rows, true);
      const control = generate(embeddings, cols, rows, false);
      const judgement = judgeGreedy(ours.text, ours.steps, theirs);
      console.log(`qwen25vl greedy ${name} (${cols}x${rows} tokens): ${judgement.summary}; smallest top-2 logprob margin ${ours.margin.toFixed(4)}; sequential positions ${control.text.trim() === theirs ? "same" : "differ"}\n  fennec:    ${JSON.stringify(ours.text.trim())}\n  llama.cpp: ${JSON.stringify(theirs)}\n  control:   ${JSON.stringify(control.text.trim())}`);
      if (!judgement.agrees) mismatches.push(name);
      if (control.text.trim() !== theirs) controlDiffers++;
    }
    expect(mismatches).toEqual([]);
    expect(controlDiffers).toBeGreaterThan(0);
  });

  test.skipIf(oracle === null)(`${SHAPE}: served, the same ${N} greedy tokens as llama-mtmd-cli for a PNG, a JPEG and a GIF`, async () => {
    const { lmPath, mmPath } = writeQwen25vlModels(dir, 11);
    const images: [string, string, Uint8Array][] = [
      ["wide.png", "image/png", pngOf(150, 90, pattern(150, 90, 1))],
      ["tall.jpg", "image/jpeg", jpegOf(64, 200, pattern(64, 200, 2), 100)],
      ["square.gif", "image/gif", gifOf(112, 112).bytes],
    ];
    const server = await startServer(["--model", lmPath, "--mmproj", mmPath, "--max-model-len", "512", "--kv-cache-memory", "32M"]);
    const mismatches: string[] = [];
    try {
      for (const [name, type, bytes] of images) {
        const path = join(dir, name);
        writeFileSync(path, bytes);
        const run = await $`${oracle!} -m ${lmPath} --mmproj ${mmPath} --image ${path} -p ${QUESTION} -n ${N} --temp 0 -t 2 -c 512 --no-warmup --jinja`.quiet().nothrow();
        if (run.exitCode !== 0) throw new Error(`llama-mtmd-cli failed (${run.exitCode}): ${run.stderr.toString().slice(-2000)}`);
        const theirs = run.stdout.toString().trim();
        const response = await fetch(`${server.url}/v1/chat/completions`, {
          method: "POST", headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model: lmPath, max_tokens: N, temperature: 0, logprobs: true, top_logprobs: 2, skip_special_tokens: false,
            messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: `data:${type};base64,${Buffer.from(bytes).toString("base64")}` } }, { type: "text", text: QUESTION }] }],
          }),
        });
        const body = (await response.json()) as { choices: { message: { content: string }; logprobs: { content: ServedStep[] } }[] };
        expect(response.status).toBe(200);
        const ours = body.choices[0]!.message.content.trim();
        const judgement = judgeGreedy(body.choices[0]!.message.content, body.choices[0]!.logprobs.content, theirs);
        console.log(`qwen25vl served ${name}: ${judgement.summary}; smallest top-2 logprob margin ${judgement.smallestMargin.toFixed(4)}\n  fennec:    ${JSON.stringify(ours)}\n  llama.cpp: ${JSON.stringify(theirs)}`);
        if (!judgement.agrees) mismatches.push(name);
      }
    } finally {
      await server.stop();
    }
    expect(mismatches).toEqual([]);
  });
});
