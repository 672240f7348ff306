/**
 * LoRA against llama.cpp (node-llama-cpp's `lora` context option, CPU, 1 thread, f32 weights, adapter and KV cache):
 * a make-model adapter (scripts/random-lora.ts, every target, f32 as convert_lora_to_gguf.py writes by default) on
 * small random f32 models with real vocabularies, llama (llama-spm) and qwen2 (biases after the update), with a user
 * scale other than 1.
 *
 * Along llama.cpp's 64 greedy tokens with the adapter, teacher-forced (the bounds of the architecture cross-checks,
 * test/model/llamacpp-archs.test.ts):
 *  - the oracle (reference-forward.ts with the adapter) picks llama.cpp's token at every step but near ties
 *    (TIE_GAP), and every log-prob with p > 1e-4 at 4 positions is within LOGPROB_TOLERANCE;
 *  - the fast path (Runner on the WASM kernels: the prompt as one prefill, then one decode step per token, the adapter
 *    in a LoRA slot) the same within the fast path's bounds (its KV cache is f16);
 *  - control: the oracle without the adapter misses llama.cpp's log-probs by more than 10x the oracle's worst error,
 *    so the adapter is what makes them agree.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ControlledEvaluateIndexOutput, Llama } from "node-llama-cpp";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { readLoraAdapter } from "../../src/lora/read-lora-adapter.ts";
import { argmax } from "../../src/model/decode-loop.ts";
import { loadModel } from "../../src/model/load-model.ts";
import type { Architecture } from "../../src/model/model-config.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { llamaModelsDir } from "../../scripts/llama-vocab.ts";
import { randomLora } from "../../scripts/random-lora.ts";
import { disposeLlamaCpp, llamaCppGreedy, logprobError, openLlamaCpp } from "../helpers/llama-cpp.ts";
import { writeVocabModel } from "../model/llamacpp-models.ts";
import type { TinyShape } from "../model/tiny-model.ts";
import { fastLoraLogits } from "./fast-lora-logits.ts";

const STEPS = 64;
const LOGPROB_TOLERANCE = 1e-3;
const TIE_GAP = 1e-3;
const FAST_LOGPROB_TOLERANCE = 5e-3;
const FAST_TIE_GAP = 5e-3;
const USER_SCALE = 0.75;
const PROMPT = "Once upon a time, in a quiet village by the sea, there lived an old clockmaker who";

interface Case {
  readonly architecture: Architecture;
  readonly vocab: string;
  readonly vocabSize: number;
  readonly rank: number;
  readonly alpha: number;
}
const CASES: readonly Case[] = [
  { architecture: "llama", vocab: "llama-spm", vocabSize: 32000, rank: 8, alpha: 16 },
  { architecture: "qwen2", vocab: "qwen2", vocabSize: 151936, rank: 16, alpha: 8 },
];

interface Tally {
  differingSteps: number;
  worstGap: number;
  worstLogprob: number;
}

function tally(t: Tally, logits: Float32Array, step: number, ids: readonly number[], theirs: ControlledEvaluateIndexOutput | undefined, checked: boolean): void {
  const ours = argmax(logits);
  if (step >= 0 && ours !== ids[step]) {
    t.differingSteps++;
    t.worstGap = Math.max(t.worstGap, logits[ours]! - logits[ids[step]!]!);
  }
  if (checked) t.worstLogprob = Math.max(t.worstLogprob, logprobError(logits, theirs));
}

let dir = "";
let llama: Llama;

beforeAll(async () => {
  llamaModelsDir();
  dir = mkdtempSync(join(tmpdir(), "fennec-lora-llamacpp-"));
  llama = await openLlamaCpp();
}, 120_000);

afterAll(async () => {
  await disposeLlamaCpp(llama);
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

describe.each(CASES)("$architecture LoRA rank $rank alpha $alpha", (c) => {
  test("fennec's logits with the adapter are llama.cpp's, teacher-forced over 64 tokens", async () => {
    const shape: TinyShape = {
      architecture: c.architecture, vocabSize: c.vocabSize, dim: 128, hiddenDim: 256, numLayers: 2, numHeads: 4, numKvHeads: 2,
      headDim: 32, tied: c.architecture === "qwen2", contextLength: 256,
    };
    const path = writeVocabModel(dir, shape, c.vocab, "f32", 1);
    const file = readGguf(path);
    if (!file.ok) throw new Error(file.error);
    const loaded = loadModel(file.value);
    if (!loaded.ok) throw new Error(loaded.error);
    const { config, weights } = loaded.value;
    const adapterPath = join(dir, `${c.architecture}-lora.gguf`);
    writeGgufFile(adapterPath, randomLora({ architecture: c.architecture, numLayers: 2, dims: config, moe: false, rank: c.rank, alpha: c.alpha, seed: 11 }));
    const adapter = readLoraAdapter(adapterPath, { config, maxLoraRank: 64 });
    if (!adapter.ok) throw new Error(adapter.error);

    const { promptIds, theirs: ids, all, evaluated, checked } = await llamaCppGreedy(llama, path, {
      contextSize: 256, batchSize: 256, steps: STEPS, lora: [{ filePath: adapterPath, scale: USER_SCALE }],
      prompt: (model) => [...(model.tokens.bos !== null ? [model.tokens.bos] : []), ...model.tokenize(PROMPT)],
      checked: (promptLength, allLength) => [promptLength - 1, promptLength + 20, promptLength + 41, allLength - 1],
    });
    const last = all.length - 1;

    const oracle: Tally = { differingSteps: 0, worstGap: 0, worstLogprob: 0 };
    const ref = new ReferenceForward(config, weights, all.length, { lora: { adapter: adapter.value, scale: USER_SCALE } });
    for (let pos = 0; pos < promptIds.length - 1; pos++) ref.advance(all[pos]!, pos);
    for (let pos = promptIds.length - 1; pos < all.length; pos++) {
      tally(oracle, ref.forward(all[pos]!, pos), pos - (promptIds.length - 1), ids, evaluated[pos], checked.has(pos));
    }

    const fast: Tally = { differingSteps: 0, worstGap: 0, worstLogprob: 0 };
    const fastRows = await fastLoraLogits(config, weights, adapter.value, USER_SCALE, all, promptIds.length);
    fastRows.forEach((logits, i) => {
      const pos = promptIds.length - 1 + i;
      tally(fast, logits, i, ids, evaluated[pos], checked.has(pos));
    });

    const control = new ReferenceForward(config, weights, all.length);
    for (let pos = 0; pos < last; pos++) control.advance(all[pos]!, pos);
    const controlError = logprobError(control.forward(all[last]!, last), evaluated[last]);

    const line = (t: Tally) => `${t.differingSteps} differing steps (worst gap ${t.worstGap.toExponential(2)}), max |dlogprob| ${t.worstLogprob.toExponential(2)}`;
    console.log(`${c.architecture} LoRA rank ${c.rank}: ${all.length} positions; oracle ${line(oracle)}; wasm ${line(fast)}; without the adapter max |dlogprob| ${controlError.toExponential(2)}`);
    expect(oracle.worstGap).toBeLessThanOrEqual(TIE_GAP);
    expect(oracle.worstLogprob).toBeLessThan(LOGPROB_TOLERANCE);
    expect(fast.worstGap).toBeLessThanOrEqual(FAST_TIE_GAP);
    expect(fast.worstLogprob).toBeLessThan(FAST_LOGPROB_TOLERANCE);
    expect(controlError).toBeGreaterThan(10 * oracle.worstLogprob);
  }, 120_000);
});
