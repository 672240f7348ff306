/**
 * The qwen2vl language model, text only, against llama.cpp (node-llama-cpp, CPU, 1 thread, f32 KV cache): make-model's
 * tiny-qwen2.5-vl-3b language model (256 wide, 2 heads of 128, real M-RoPE sections [16, 24, 24], Qwen2.5-VL's
 * tokenizer) with its weights scaled up as the vision oracle writes it (test/vision/qwen25vl-models.ts, peaked
 * logits). Along a chat prompt and llama.cpp's 32 greedy tokens, the oracle (reference-forward.ts, teacher-forced, text
 * positions in all four streams, matmul inputs rounded like ggml) picks llama.cpp's token at every step but near ties,
 * and its log-probs at 3 positions are within LOGPROB_TOLERANCE. Images: test/vision/qwen25vl-oracle.test.ts.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Llama } from "node-llama-cpp";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { argmax } from "../../src/model/decode-loop.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { textMropePosition } from "../../src/model/mrope.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { disposeLlamaCpp, llamaCppGreedy, logprobError, openLlamaCpp } from "../helpers/llama-cpp.ts";
import { peakedModel } from "../vision/qwen25vl-models.ts";
import { roundLikeGgml } from "./ggml-activation-rounding.ts";

const STEPS = 32;
/** measured 9e-5..2e-4 */
const LOGPROB_TOLERANCE = 2e-3;
const TIE_GAP = 1e-3;
const PROMPT = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nThe lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps.<|im_end|>\n<|im_start|>assistant\n";

let dir = "";
let llama: Llama;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "fennec-qwen2vl-"));
  llama = await openLlamaCpp();
}, 120_000);
afterAll(async () => {
  await disposeLlamaCpp(llama);
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

test(`tiny-qwen2.5-vl-3b text only: the oracle follows llama.cpp's ${STEPS} greedy tokens`, async () => {
  const path = join(dir, "lm.gguf");
  writeGgufFile(path, peakedModel(11));
  const run = await llamaCppGreedy(llama, path, {
    contextSize: 256, batchSize: 256, steps: STEPS,
    prompt: (model) => model.tokenize(PROMPT, true),
    checked: (promptLength, allLength) => [promptLength - 1, promptLength + 10, allLength - 1],
  });
  const file = readGguf(path);
  if (!file.ok) throw new Error(file.error);
  const loaded = loadModel(file.value, { maxModelLen: 256 });
  if (!loaded.ok) throw new Error(loaded.error);
  expect(loaded.value.config.ropeSections).toEqual([16, 24, 24, 0]);
  const ref = new ReferenceForward(loaded.value.config, loaded.value.weights, run.all.length, { roundMatmulInput: roundLikeGgml });
  let differing = 0, worstGap = 0, worstLogprob = 0;
  for (let pos = 0; pos < run.all.length; pos++) {
    if (pos < run.promptIds.length - 1) {
      ref.advance(run.all[pos]!, pos, textMropePosition(pos));
      continue;
    }
    const logits = ref.forward(run.all[pos]!, pos, textMropePosition(pos));
    const theirs = run.theirs[pos - (run.promptIds.length - 1)]!;
    const ours = argmax(logits);
    if (ours !== theirs) {
      differing++;
      worstGap = Math.max(worstGap, logits[ours]! - logits[theirs]!);
    }
    if (run.checked.has(pos)) worstLogprob = Math.max(worstLogprob, logprobError(logits, run.evaluated[pos]));
  }
  console.log(`qwen2vl text: ${run.promptIds.length} prompt tokens, ${differing} of ${STEPS} steps differ (worst gap ${worstGap.toExponential(2)}), max |dlogprob| ${worstLogprob.toExponential(2)}`);
  expect(run.promptIds.length).toBeGreaterThan(30);
  expect(worstGap).toBeLessThanOrEqual(TIE_GAP);
  expect(worstLogprob).toBeLessThan(LOGPROB_TOLERANCE);
}, 300_000);
