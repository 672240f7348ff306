/**
 * make-model writes a vision-language shape as two files, the language model and its projector, with the keys and
 * tensor names llama.cpp's converter writes; the vision flags are refused where they do not apply (one line, exit 2).
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

// two files of ~200 MB in all on a busy 2-core box
setDefaultTimeout(120_000);

const root = join(import.meta.dir, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "fennec-vision-make-model-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const makeModel = (...args: string[]) => $`bun run scripts/make-model.ts ${args}`.cwd(root).quiet().nothrow();

describe("make-model: vision-language shapes", () => {
  test("tiny-gemma3-4b: a gemma3 language model and a real-width SigLIP projector of 2 layers that fennec reads", async () => {
    const out = join(dir, "lm.gguf"), mmproj = join(dir, "mmproj.gguf");
    const run = await makeModel("--shape", "tiny-gemma3-4b", "--type", "q8_0", "--out", out, "--mmproj", mmproj, "--seed", "3");
    expect(run.exitCode).toBe(0);
    const lm = readGguf(out), mm = readGguf(mmproj);
    if (!lm.ok || !mm.ok) throw new Error("unreadable output");
    expect(getString(lm.value, "general.architecture")).toEqual({ ok: true, value: "gemma3" });
    const textDim = getU32(lm.value, "gemma3.embedding_length");
    expect(getString(mm.value, "general.architecture")).toEqual({ ok: true, value: "clip" });
    expect(getString(mm.value, CLIP_KEY.generalType)).toEqual({ ok: true, value: "mmproj" });
    expect(getU32(mm.value, CLIP_KEY.projectionDim)).toEqual(textDim);
    const c = readVisionConfig(mm.value);
    if (!c.ok) throw new Error(c.error);
    expect(c.value).toMatchObject({ dim: 1152, ffnDim: 4304, numHeads: 16, numLayers: 2, imageSize: 112, nMerge: 2, tokensPerImage: 16 });
    expect(readVisionWeights(mm.value, c.value).ok).toBe(true);
    // the converter's types: embeddings f32, input_projection and the layers' matrices f16, 1-D f32
    const type = (name: string) => mm.value.tensors.find((t) => t.name === name)?.type;
    expect(type(CLIP_TENSOR.patchEmbd)).toBe(GgmlType.F32);
    expect(type(CLIP_TENSOR.positionEmbd)).toBe(GgmlType.F32);
    expect(type(CLIP_TENSOR.mmInputProjection)).toBe(GgmlType.F16);
    expect(type("v.blk.1.ffn_down.weight")).toBe(GgmlType.F16);
    expect(type("v.blk.1.ffn_down.bias")).toBe(GgmlType.F32);
    // the language model's tokenizer has Gemma 3's image markers
    const tokens = lm.value.metadata.get("tokenizer.ggml.tokens")?.value as { values: string[] };
    expect(tokens.values).toContain("<start_of_image>");
    expect(tokens.values).toContain("<end_of_image>");
  });

  test("--vision-layers sets the projector's depth", async () => {
    const run = await makeModel("--shape", "tiny-gemma3-4b", "--type", "f32", "--out", join(dir, "lm1.gguf"), "--mmproj", join(dir, "mm1.gguf"), "--vision-layers", "1");
    expect(run.exitCode).toBe(0);
    const mm = readGguf(join(dir, "mm1.gguf"));
    if (!mm.ok) throw new Error(mm.error);
    expect(getU32(mm.value, CLIP_KEY.blockCount)).toEqual({ ok: true, value: 1 });
    expect(mm.value.tensors.some((t) => t.name.startsWith("v.blk.1."))).toBe(false);
  });

  const refusals: [string, string[], RegExp][] = [
    ["a vision shape without --mmproj", ["--shape", "tiny-gemma3-4b"], /tiny-gemma3-4b is a vision-language model: --mmproj FILE \(its projector GGUF\) is required/],
    ["--mmproj on a text shape", ["--shape", "tiny-gemma3-270m", "--mmproj", "x.gguf"], /--mmproj needs a vision-language shape \(gemma3-4b, tiny-gemma3-4b[^)]*\)/],
    ["--vision-layers 0", ["--shape", "tiny-gemma3-4b", "--mmproj", "x.gguf", "--vision-layers", "0"], /--vision-layers must be a positive integer/],
  ];
  for (const [what, args, message] of refusals) {
    test(`refuses ${what} with one line and exit 2`, async () => {
      const run = await makeModel(...args, "--type", "f32", "--out", join(dir, "never.gguf"));
      expect(run.exitCode).toBe(2);
      const lines = run.stderr.toString().trim().split("\n");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(message);
    });
  }
});
