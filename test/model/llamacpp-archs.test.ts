/**
 * Rope scaling and the newer architectures against llama.cpp (node-llama-cpp, CPU, 1 thread, f32 weights and KV
 * cache): random GGUFs in make-model's real shapes (scripts/model-shapes.ts: head size, rope base, rope scaling with the
 * tensors and keys llama.cpp's converter writes, vocabulary) for Llama 3.2's rope_freqs, Phi-3.5-mini's LongRoPE with
 * its long and its short factors, SmolLM3's no-rope layers, YaRN and linear scaling; narrowed to 128 wide and 2-4
 * layers, with tiny-model.ts's O(1)-activation weights (make-model's N(0, 0.02) ones give near-uniform logits, which
 * would hide any rope difference), so each case takes seconds.
 *
 * Along a prompt of about 350 tokens (1,000 for Llama 3, whose scaled low frequencies need that many positions to
 * turn by a radian) and llama.cpp's 64 greedy tokens after it:
 *  - the oracle (reference-forward.ts, teacher-forced, matmul inputs rounded like ggml) and the fast path (Runner on
 *    the WASM kernels, decode steps one at a time) pick llama.cpp's token at every step, except where the two
 *    candidates' logits are within TIE_GAP (random weights make near ties);
 *  - at 4 positions, every token's log-prob with p > 1e-4 is within LOGPROB_TOLERANCE of llama.cpp's (the fast path:
 *    FAST_LOGPROB_TOLERANCE, its KV cache is f16 where llama.cpp's is f32 here);
 *  - the same model without its scaling (rope_freqs / factors / attention factor / no-rope layers dropped) misses
 *    llama.cpp's log-probs at the last position by more than 10x the oracle's worst error: the feature is what makes
 *    them agree (measured: 1.4e-5 with Llama 3's rope_freqs, 0.39 without; 6e-2..0.9 for the others).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ControlledEvaluateIndexOutput, Llama } from "node-llama-cpp";
import { createBackend } from "../../src/backend/create-backend.ts";
import type { GgufFile, GgufMetadataEntry } from "../../src/gguf/gguf-file.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { archKey } from "../../src/gguf/names.ts";
import { mdF32, mdU32 } from "../../src/gguf/metadata.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { argmax } from "../../src/model/decode-loop.ts";
import { loadModel } from "../../src/model/load-model.ts";
import type { ModelConfig } from "../../src/model/model-config.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { NO_ROPE_SCALING } from "../../src/model/rope-scaling.ts";
import { Runner } from "../../src/model/runner.ts";
import type { ModelWeights } from "../../src/model/weights.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { MODEL_SHAPES, type ModelShape } from "../../scripts/model-shapes.ts";
import { ropeFactorTensors, ropeScalingMetadata } from "../../scripts/random-model.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { disposeLlamaCpp, llamaCppGreedy, logprobError, openLlamaCpp } from "../helpers/llama-cpp.ts";
import { teacherForcedLogits } from "../helpers/teacher-forced.ts";
import { roundLikeGgml } from "./ggml-activation-rounding.ts";
import { makeTinyModel } from "./tiny-model.ts";

await ensureKernels();

const STEPS = 64;
/** f32 on both sides (the existing cross-check's f32 bound); measured maxima are in the log lines */
const LOGPROB_TOLERANCE = 1e-3;
const TIE_GAP = 1e-3;
/** measured 6.5e-4..1.0e-3 */
const FAST_LOGPROB_TOLERANCE = 5e-3;
const FAST_TIE_GAP = 5e-3;
const PARAGRAPH = [
  "The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the one hundred and twelve steps",
  "as his father had taught him. At the top he trimmed the wick, polished the great lens until it shone like a second",
  "moon, and wrote the weather in a leather book: wind from the north-west, a falling glass, three fishing boats",
  "returning late with their lamps swinging. Nobody had asked him to keep the book, and nobody ever read it, but on",
  "the night of the great storm it was the only record of which boats had come home and which had not.",
].join(" ");
/** the paragraph n times: about 115 n tokens in every vocabulary here */
const promptText = (n: number): string => Array.from({ length: n }, () => PARAGRAPH).join("\n\n");

interface Case {
  readonly name: string;
  readonly shape: string;
  /** llama.cpp's context size and our max model len: LongRoPE picks its long factors past the original context */
  readonly contextSize: number;
  /** paragraphs in the prompt: Llama 3's factors need ~1,000 positions to show, the others ~350 */
  readonly paragraphs: number;
  readonly ropeScaling?: ModelShape["ropeScaling"];
  /** another vocabulary than the shape's (phi-4-mini: its 200k-token one is checked in test/tokenizer/phi4-mini-vocab.test.ts) */
  readonly vocab?: ModelShape["vocab"];
  /** what the control run drops */
  readonly withoutFeature: (c: ModelConfig, w: ModelWeights) => [ModelConfig, ModelWeights];
}

const noScaling = (c: ModelConfig, w: ModelWeights): [ModelConfig, ModelWeights] =>
  [{ ...c, ropeScaling: NO_ROPE_SCALING }, { ...w, ropeFactors: null }];

/** every dim of the head rotates; the rope divisors past the file's are 1 */
const fullRotary = (c: ModelConfig, w: ModelWeights): [ModelConfig, ModelWeights] => {
  const factors = new Float32Array(c.headDim / 2).fill(1);
  if (w.ropeFactors) factors.set(new Float32Array(w.ropeFactors.data.slice().buffer));
  const ropeFactors = { name: "rope_factors (padded)", type: GgmlType.F32, rows: 1, cols: factors.length, data: new Uint8Array(factors.buffer) };
  return [{ ...c, ropeDim: c.headDim }, { ...w, ropeFactors }];
};

const CASES: readonly Case[] = [
  { name: "llama 3.2 rope_freqs", shape: "tiny-llama-3.2-1b", contextSize: 2048, paragraphs: 9, withoutFeature: noScaling },
  { name: "phi3 LongRoPE, long factors", shape: "tiny-phi-3.5-mini", contextSize: 8192, paragraphs: 3, withoutFeature: noScaling },
  { name: "phi3 LongRoPE, short factors", shape: "tiny-phi-3.5-mini", contextSize: 2048, paragraphs: 3, withoutFeature: noScaling },
  // Phi-4-mini: 48 of each 64-dim head rotate (partial_rotary_factor 0.75), GQA, tied, LongRoPE's long factors; the
  // control rotates every dim (its divisors padded with 1)
  { name: "phi-4-mini partial rotary", shape: "tiny-phi-4-mini", vocab: "phi-3", contextSize: 8192, paragraphs: 3, withoutFeature: fullRotary },
  { name: "smollm3 no-rope layers", shape: "tiny-smollm3-3b", contextSize: 2048, paragraphs: 3, withoutFeature: (c, w) => [{ ...c, noRopeLayerStep: 0 }, w] },
  // YaRN factor 4 over 32k, as Qwen2.5's long-context configs set it (on the llama graph and SmolLM2's gpt-2 vocab: a
  // 150k-token vocab would double the case's time); its attention factor 1 + 0.1 ln 4 scales every score
  {
    name: "yarn", shape: "tiny-smollm2-135m", contextSize: 2048, paragraphs: 3, ropeScaling: { type: "yarn", factor: 4, originalContextLength: 32768 },
    withoutFeature: noScaling,
  },
  {
    name: "linear", shape: "tiny-smollm2-135m", contextSize: 2048, paragraphs: 3, ropeScaling: { type: "linear", factor: 4, originalContextLength: 2048 },
    withoutFeature: noScaling,
  },
];

/** The tiny shape narrowed to 128 wide (2 heads of the real head size 64), f32 */
function narrowed(c: Case): ModelShape {
  const base = MODEL_SHAPES[c.shape]!;
  return {
    ...base, dim: 128, numHeads: 2, numKvHeads: 1, headDim: 64, hiddenDim: 256,
    ...(base.ropeDim !== undefined ? { ropeDim: (64 * base.ropeDim) / base.headDim } : {}),
    ...(c.ropeScaling ? { ropeScaling: c.ropeScaling } : {}),
    ...(c.vocab ? { vocab: c.vocab } : {}),
  };
}

/** The narrowed shape as a GGUF: tiny-model.ts weights, the shape's rope base, eps and scaling, the vocab's tokenizer. */
function writeModel(path: string, s: ModelShape, vocab: GgufFile): void {
  const metadata: Record<string, GgufMetadataEntry> = Object.fromEntries(ropeScalingMetadata(s));
  for (const [key, entry] of vocab.metadata) if (key.startsWith("tokenizer.")) metadata[key] = entry;
  metadata[archKey(s.architecture, "ropeFreqBase")] = mdF32(s.ropeFreqBase);
  metadata[archKey(s.architecture, "rmsEps")] = mdF32(s.rmsEps);
  if (s.ropeDim !== undefined) metadata[archKey(s.architecture, "ropeDimensionCount")] = mdU32(s.ropeDim);
  const tokens = vocab.metadata.get("tokenizer.ggml.tokens")!.value as { values: unknown[] };
  const gguf = makeTinyModel({
    architecture: s.architecture, vocabSize: tokens.values.length, dim: s.dim, hiddenDim: s.hiddenDim, numLayers: s.numLayers,
    numHeads: s.numHeads, numKvHeads: s.numKvHeads, headDim: s.headDim, tied: s.tiedEmbeddings, contextLength: s.contextLength,
    ropeFactors: Object.fromEntries(ropeFactorTensors(s)),
  }, { seed: 3, metadata });
  writeGgufFile(path, {
    metadata: gguf.metadata,
    tensors: gguf.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: gguf.bytes.subarray(t.offset, t.offset + t.sizeBytes) })),
  });
}

interface Tally {
  differingSteps: number;
  worstGap: number;
  worstLogprob: number;
}

/** One step's logits against llama.cpp's greedy token (step >= 0) and, at checked positions, its distribution. */
function tally(t: Tally, logits: Float32Array, step: number, theirs: readonly number[], evaluated: ControlledEvaluateIndexOutput | undefined, checked: boolean): void {
  if (step >= 0 && step < theirs.length) {
    const ours = argmax(logits);
    if (ours !== theirs[step]) {
      t.differingSteps++;
      t.worstGap = Math.max(t.worstGap, logits[ours]! - logits[theirs[step]!]!);
    }
  }
  if (checked) t.worstLogprob = Math.max(t.worstLogprob, logprobError(logits, evaluated));
}

async function wasmRunner(config: ModelConfig, weights: ModelWeights, numTokens: number): Promise<Runner> {
  const runner = new Runner(config, weights, await createBackend({ kind: "wasm", threads: 2 }));
  runner.allocateKvCache(Math.ceil(numTokens / 16), 16);
  return runner;
}

let dir = "";
let llama: Llama;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "fennec-archs-"));
  llama = await openLlamaCpp();
}, 120_000);

afterAll(async () => {
  await disposeLlamaCpp(llama);
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

describe.each(CASES)("$name", (c) => {
  test("oracle and WASM fast path match llama.cpp over 64 greedy tokens after a long prompt; without the feature they do not", async () => {
    const shape = narrowed(c);
    const vocab = readGguf(llamaVocabPath(shape.vocab));
    if (!vocab.ok) throw new Error(vocab.error);
    const path = join(dir, `${c.name.replace(/[^a-z0-9]+/gi, "-")}.gguf`);
    writeModel(path, shape, vocab.value);

    // llama.cpp: greedy continuation, then the full distributions along it
    const { promptIds, theirs: ids, all, evaluated, checked } = await llamaCppGreedy(llama, path, {
      contextSize: c.contextSize, batchSize: 1024, steps: STEPS,
      prompt: (model) => [...(model.tokens.bos !== null ? [model.tokens.bos] : []), ...model.tokenize(promptText(c.paragraphs))],
      checked: (promptLength, allLength) => [promptLength - 1, promptLength + 20, promptLength + 41, allLength - 1],
    });
    expect(promptIds.length).toBeGreaterThan(100 * c.paragraphs);
    const last = all.length - 1;

    const file = readGguf(path);
    if (!file.ok) throw new Error(file.error);
    const loaded = loadModel(file.value, { maxModelLen: c.contextSize });
    if (!loaded.ok) throw new Error(loaded.error);
    const { config, weights } = loaded.value;

    // the oracle, teacher-forced along llama.cpp's tokens, rounding matmul inputs as ggml does
    const oracle: Tally = { differingSteps: 0, worstGap: 0, worstLogprob: 0 };
    const ref = new ReferenceForward(config, weights, all.length, { roundMatmulInput: roundLikeGgml });
    for (let pos = 0; pos < promptIds.length - 1; pos++) ref.advance(all[pos]!, pos);
    for (let pos = promptIds.length - 1; pos < all.length; pos++) {
      tally(oracle, ref.forward(all[pos]!, pos), pos - (promptIds.length - 1), ids, evaluated[pos], checked.has(pos));
    }

    // the fast path: the promptIds as one prefill, then one decode step per token
    const fast: Tally = { differingSteps: 0, worstGap: 0, worstLogprob: 0 };
    const runner = await wasmRunner(config, weights, all.length);
    const rows = await teacherForcedLogits(runner, all, promptIds.length);
    rows.forEach((logits, s) => tally(fast, logits, s, ids, evaluated[promptIds.length - 1 + s], s === 0 || checked.has(promptIds.length - 1 + s)));
    runner.dispose();

    // control: the oracle on the same weights without the feature (the oracle: the fast path's own error would blur it)
    const [plainConfig, plainWeights] = c.withoutFeature(config, weights);
    const control = new ReferenceForward(plainConfig, plainWeights, all.length, { roundMatmulInput: roundLikeGgml });
    for (let pos = 0; pos < last; pos++) control.advance(all[pos]!, pos);
    const controlError = logprobError(control.forward(all[last]!, last), evaluated[last]);

    const line = (t: Tally) => `${t.differingSteps} differing steps (worst gap ${t.worstGap.toExponential(2)}), max |dlogprob| ${t.worstLogprob.toExponential(2)}`;
    console.log(`${c.name}: ${all.length} positions; oracle ${line(oracle)}; wasm ${line(fast)}; without the feature max |dlogprob| ${controlError.toExponential(2)}`);
    expect(oracle.worstGap).toBeLessThanOrEqual(TIE_GAP);
    expect(oracle.worstLogprob).toBeLessThan(LOGPROB_TOLERANCE);
    expect(fast.worstGap).toBeLessThanOrEqual(FAST_TIE_GAP);
    expect(fast.worstLogprob).toBeLessThan(FAST_LOGPROB_TOLERANCE);
    expect(controlError).toBeGreaterThan(10 * oracle.worstLogprob);
  }, 120_000);
});
