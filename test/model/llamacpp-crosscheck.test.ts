/**
 * Cross-check of the reference forward (the oracle) against llama.cpp (node-llama-cpp, CPU, 1 thread) on small random
 * models with real vocabularies: every weight type of the table plus q4_k_m on llama, and the qwen2 / qwen3 paths
 * (biases, NEOX rope, QK-norm, untied output) on a few types.
 *
 * What is compared, for 32 greedy steps after a short prompt:
 *  - tokens: llama.cpp's greedy continuation A is fed to our forward (teacher forcing) and our argmax must be A[k]
 *    at every step, which is the same as both greedy runs giving the same 32 tokens. llama.cpp quantizes the
 *    activations of quantized matmuls (q8_0 / q8_K, f16 for f16 weights), our oracle does not, so for those types a
 *    step may differ only where our own top two logits are within `tieTolerance` (a numerical tie); f32 must match.
 *  - logits: at a few positions, llama.cpp's full softmax (temperature 1, no top-k/p) against ours, as log-probs of
 *    every token with p > 1e-4: max |difference| < `logprobTolerance`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, LlamaLogLevel, type ControlledEvaluateInputItem, type Llama, type Token } from "node-llama-cpp";
import { readGguf } from "../../src/gguf/reader.ts";
import { argmax } from "../../src/model/decode-loop.ts";
import { loadModel } from "../../src/model/load-model.ts";
import type { Architecture } from "../../src/model/model-config.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { WEIGHT_TYPES } from "../../src/tensor/dtypes.ts";
import { llamaModelsDir } from "../../scripts/llama-vocab.ts";
import { writeVocabModel } from "./llamacpp-models.ts";
import type { TinyShape } from "./tiny-model.ts";

const STEPS = 32;
const PROMPT = "Once upon a time";

interface Tolerance {
  /** our top-1 minus our logit of llama.cpp's pick, allowed where the picks differ */
  readonly tieTolerance: number;
  readonly logprobTolerance: number;
}
/** measured maxima on these models, with headroom; f32 is exact math on both sides up to summation order */
const TOLERANCE: Readonly<Record<string, Tolerance>> = {
  f32: { tieTolerance: 0, logprobTolerance: 1e-3 },
  f16: { tieTolerance: 0.02, logprobTolerance: 0.02 },
  bf16: { tieTolerance: 0.05, logprobTolerance: 0.05 },
};
const QUANTIZED_TOLERANCE: Tolerance = { tieTolerance: 0.1, logprobTolerance: 0.1 };

interface Case {
  readonly architecture: Architecture;
  readonly vocab: string;
  readonly vocabSize: number;
  readonly tied: boolean;
  readonly types: readonly string[];
}

const ALL_TYPES = [...WEIGHT_TYPES.map((w) => w.name), "q4_k_m"];
const CASES: readonly Case[] = [
  { architecture: "llama", vocab: "llama-spm", vocabSize: 32000, tied: false, types: ALL_TYPES },
  { architecture: "qwen2", vocab: "qwen2", vocabSize: 151936, tied: true, types: ["f32", "q8_0", "q4_k_m"] },
  { architecture: "qwen3", vocab: "qwen2", vocabSize: 151936, tied: true, types: ["f32", "q8_0", "q4_k_m"] },
];

/** rows of 256 so that the k-quants fit; GQA 4/2; 2 layers */
const shapeOf = (c: Case): TinyShape => ({
  architecture: c.architecture, vocabSize: c.vocabSize, dim: 256, hiddenDim: 256, numLayers: 2, numHeads: 4,
  numKvHeads: 2, headDim: 64, tied: c.tied, contextLength: 128,
});

function logSoftmax(logits: Float32Array): Float64Array {
  let max = -Infinity;
  for (const x of logits) if (x > max) max = x;
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(logits, (x) => x - lse);
}

let dir = "";
let llama: Llama;

beforeAll(async () => {
  llamaModelsDir(); // extract the vocab files once (a few seconds) outside the per-test time limit
  dir = mkdtempSync(join(tmpdir(), "fennec-crosscheck-"));
  llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
}, 120_000);

afterAll(async () => {
  await llama?.dispose();
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

describe.each(CASES)("$architecture ($vocab vocab)", (c) => {
  test.each(c.types)("%s: same greedy tokens for 32 steps and close logits", async (typeName) => {
    const path = writeVocabModel(dir, shapeOf(c), c.vocab, typeName, 1);
    const tol = TOLERANCE[typeName] ?? QUANTIZED_TOLERANCE;

    // llama.cpp: greedy continuation, then the full distributions along it
    const model = await llama.loadModel({ modelPath: path });
    // f32 KV cache and no flash attention: llama.cpp's defaults (f16 cache) would add their own rounding
    const context = await model.createContext({
      contextSize: 64, batchSize: 64, threads: 1, flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    const sequence = context.getSequence();
    const bos = model.tokens.bos;
    const prompt = [...(bos !== null ? [bos] : []), ...model.tokenize(PROMPT)];
    const theirs: Token[] = [];
    for await (const token of sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
      theirs.push(token);
      if (theirs.length === STEPS) break;
    }
    expect(theirs.length).toBe(STEPS);
    await sequence.clearHistory();
    const all = [...prompt, ...theirs.slice(0, STEPS - 1)];
    const checked = new Set([prompt.length - 1, prompt.length + 7, prompt.length + 15, all.length - 1]);
    const full = { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } };
    const items = all.map((token, i): ControlledEvaluateInputItem => (checked.has(i) ? [token, full] : token));
    const evaluated = await sequence.controlledEvaluate(items);
    await context.dispose();
    await model.dispose();

    // ours, teacher-forced along llama.cpp's tokens
    const file = readGguf(path);
    if (!file.ok) throw new Error(file.error);
    const loaded = loadModel(file.value);
    if (!loaded.ok) throw new Error(loaded.error);
    const ref = new ReferenceForward(loaded.value.config, loaded.value.weights, all.length);
    let worstTie = 0;
    let differingSteps = 0;
    let worstLogprob = 0;
    for (let pos = 0; pos < all.length; pos++) {
      const logits = ref.forward(all[pos]!, pos);
      const step = pos - (prompt.length - 1);
      if (step >= 0) {
        const ours = argmax(logits);
        if (ours !== theirs[step]) {
          differingSteps++;
          worstTie = Math.max(worstTie, logits[ours]! - logits[theirs[step]!]!);
        }
      }
      const probabilities = evaluated[pos]?.next.probabilities;
      if (checked.has(pos)) {
        expect(probabilities?.size).toBe(c.vocabSize);
        const logprobs = logSoftmax(logits);
        for (const [id, p] of probabilities!) {
          if (p > 1e-4) worstLogprob = Math.max(worstLogprob, Math.abs(Math.log(p) - logprobs[id]!));
        }
      }
    }
    console.log(`${c.architecture} ${typeName}: ${differingSteps} near-tie steps (worst gap ${worstTie.toFixed(4)}), max |dlogprob| ${worstLogprob.toFixed(5)}`);
    if (tol.tieTolerance === 0) expect(differingSteps).toBe(0);
    expect(worstTie).toBeLessThanOrEqual(tol.tieTolerance);
    expect(worstLogprob).toBeLessThan(tol.logprobTolerance);
  }, 60_000);
});
