/**
 * make-model writes Qwen2.5-VL as two files: the qwen2vl language model (M-RoPE sections, Qwen2.5-VL's tokenizer and
 * template) and its projector with the keys, tensor names and types conversion/qwenvl.py writes; fennec reads both.
 */
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $ } from "bun";
import { getString, getU32 } from "../../src/gguf/metadata.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import { readQwen25vlConfig, readQwen25vlWeights } from "../../src/vision/qwen25vl-mmproj.ts";

// a real-width ViT layer and a 256-wide language model on a busy 2-core box
setDefaultTimeout(120_000);

const root = join(import.meta.dir, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "fennec-qwen25vl-make-model-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("tiny-qwen2.5-vl-3b --vision-layers 1: a qwen2vl language model and a real-width Qwen2.5-VL projector that fennec reads", async () => {
  const out = join(dir, "lm.gguf"), mmproj = join(dir, "mmproj.gguf");
  const run = await $`bun run scripts/make-model.ts --shape tiny-qwen2.5-vl-3b --type q8_0 --out ${out} --mmproj ${mmproj} --vision-layers 1 --seed 3`.cwd(root).quiet().nothrow();
  expect(run.exitCode).toBe(0);
  const lm = readGguf(out), mm = readGguf(mmproj);
  if (!lm.ok || !mm.ok) throw new Error("unreadable output");
  const model = loadModel(lm.value);
  if (!model.ok) throw new Error(model.error);
  expect(model.value.config).toMatchObject({ architecture: "qwen2vl", dim: 256, numHeads: 2, headDim: 128, ropeSections: [16, 24, 24, 0], hasQkvBias: true, tiedEmbeddings: true });
  expect(getString(mm.value, "clip.projector_type")).toEqual({ ok: true, value: "qwen2.5vl_merger" });
  expect(getU32(mm.value, "clip.vision.projection_dim")).toEqual({ ok: true, value: 256 });
  const c = readQwen25vlConfig(mm.value);
  if (!c.ok) throw new Error(c.error);
  expect(c.value).toMatchObject({ dim: 1280, ffnDim: 3420, numHeads: 16, numLayers: 1, windowPattern: 2, patchSize: 14 });
  expect(readQwen25vlWeights(mm.value, c.value).ok).toBe(true);
  // the converter's types: matrices (both patch-embedding halves too) f16, 1-D f32; no patch bias
  const type = (name: string) => mm.value.tensors.find((t) => t.name === name)?.type;
  expect([type("v.patch_embd.weight"), type("v.patch_embd.weight.1"), type("mm.0.weight"), type("v.blk.0.ffn_gate.weight")]).toEqual([GgmlType.F16, GgmlType.F16, GgmlType.F16, GgmlType.F16]);
  expect([type("mm.2.bias"), type("v.post_ln.weight")]).toEqual([GgmlType.F32, GgmlType.F32]);
  expect(type("v.patch_embd.bias")).toBeUndefined();
  // the tokenizer has the vision tokens as single control tokens, and the template writes them for an image part
  const tokenizer = createTokenizer(lm.value);
  expect(tokenizer.encode("<|vision_start|><|image_pad|><|vision_end|>", { addSpecial: false, parseSpecial: true })).toEqual([151652, 151655, 151653]);
  const text = tokenizer.applyChatTemplate([{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } } as never, { type: "text", text: "Hi" }] }], { addGenerationPrompt: true, contentFormat: "openai" });
  expect(text).toBe("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Hi<|im_end|>\n<|im_start|>assistant\n");
});
