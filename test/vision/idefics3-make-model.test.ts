/**
 * make-model's SmolVLM shapes through its command line: smolvlm-256m at real width (the language model cut to 1 layer,
 * the SigLIP to 1) writes a llama language model with SmolVLM's image tokens and chat template and an idefics3
 * projector that fennec reads as clip.cpp does.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $ } from "bun";
import { getString, getU32 } from "../../src/gguf/metadata.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { CLIP_KEY, CLIP_TENSOR } from "../../src/vision/clip-names.ts";
import { readVisionConfig, readVisionWeights } from "../../src/vision/mmproj.ts";

setDefaultTimeout(120_000);

const root = join(import.meta.dir, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "fennec-idefics3-make-model-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("make-model: SmolVLM", () => {
  test("smolvlm-256m: SmolLM2's width under a real-width SigLIP-B/16 at 512 px, shuffled by 4 to 64 tokens a tile", async () => {
    const out = join(dir, "lm.gguf"), mmproj = join(dir, "mmproj.gguf");
    const run = await $`bun run scripts/make-model.ts --shape smolvlm-256m --type q8_0 --out ${out} --mmproj ${mmproj} --layers 1 --vision-layers 1`.cwd(root).quiet().nothrow();
    expect(run.exitCode).toBe(0);
    const lm = readGguf(out), mm = readGguf(mmproj);
    if (!lm.ok || !mm.ok) throw new Error("unreadable output");
    expect(getString(lm.value, "general.architecture")).toEqual({ ok: true, value: "llama" });
    expect(getU32(lm.value, "llama.embedding_length")).toEqual({ ok: true, value: 576 });
    const c = readVisionConfig(mm.value);
    if (!c.ok) throw new Error(c.error);
    expect(c.value).toMatchObject({
      projector: "idefics3", dim: 768, ffnDim: 3072, numHeads: 12, numLayers: 1, imageSize: 512, patchSize: 16, nMerge: 4,
      tokensPerImage: 64, longestEdge: 2048, projectionDim: 576, resizeAlgo: "lanczos",
    });
    expect(readVisionWeights(mm.value, c.value).ok).toBe(true);
    expect(mm.value.tensors.find((t) => t.name === CLIP_TENSOR.mmModelFc)?.shape).toEqual([768 * 16, 576]);
    expect(mm.value.tensors.find((t) => t.name === CLIP_TENSOR.mmModelFc)?.type).toBe(GgmlType.F16);
    expect(getU32(mm.value, CLIP_KEY.preprocImageSize)).toEqual({ ok: true, value: 2048 });
    // SmolVLM's image tokens, and its template writes <image> for an image part
    const tokens = (lm.value.metadata.get("tokenizer.ggml.tokens")?.value as { values: string[] }).values;
    for (const t of ["<fake_token_around_image>", "<global-img>", "<row_1_col_1>", "<row_6_col_6>", "<image>", "<end_of_utterance>"]) expect(tokens).toContain(t);
    const eos = getU32(lm.value, "tokenizer.ggml.eos_token_id");
    expect(eos.ok && tokens[eos.value]).toBe("<end_of_utterance>");
    expect(getString(lm.value, "tokenizer.chat_template")).toMatchObject({ ok: true, value: expect.stringContaining("'<image>'") });
  });
});
