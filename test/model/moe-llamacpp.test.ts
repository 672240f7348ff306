/**
 * Mixture-of-experts models against llama.cpp (node-llama-cpp, CPU, 1 thread, f32 and f16 KV caches): qwen3moe
 * (Qwen3-30B-A3B's 128 experts, 8 routed, renormalised) and olmoe (OLMoE-1B-7B's 64 experts, 8 routed, not
 * renormalised, full-width QK-norm), granitemoe (granite-3.1-3b-a800m's 40 experts, 8 routed, renormalised; with and
 * without a shared expert) and dense granite with Granite's multipliers, narrowed to 128 wide and 2 layers (the expert
 * count and k are the real ones), tiny-model.ts's O(1) activation weights; and qwen3moe with its experts in MXFP4 (as
 * gpt-oss GGUFs store them).
 *
 * Along a prompt of about 115 tokens and llama.cpp's 32 greedy tokens after it:
 *  - the oracle (reference-forward.ts, teacher-forced, matmul inputs rounded like ggml; f32 K/V) against llama.cpp on
 *    an f32 KV cache, and the fast path (Runner on the WASM kernels: one prefill, then decode steps; f16 K/V) against
 *    the same run or, with MXFP4 experts, llama.cpp on an f16 KV cache (its default) along that run's own greedy
 *    tokens, pick llama.cpp's token at every step except near ties, and at 4 positions every token's log-prob with
 *    p > 1e-4 is within the bounds test/model/llamacpp-archs.test.ts uses;
 *  - along the f32 run, the oracle with its K/V rounded to f16 gives the fast path's differing steps and, within 10%,
 *    its worst |dlogprob|: what the fast path differs from an f32 cache by is its own f16 cache, not its kernels;
 *  - a control that routes every row to the wrong experts (the k worst; dense granite: drops the multipliers) misses
 *    llama.cpp by far more: routing is what makes them agree.
 * Then a batch of 8 requests of different lengths gives each the greedy tokens it gets alone (experts routed per row).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ControlledEvaluateIndexOutput, Llama } from "node-llama-cpp";
import { createBackend } from "../../src/backend/create-backend.ts";
import type { GgufFile, GgufMetadataEntry } from "../../src/gguf/gguf-file.ts";
import { mdF32, mdU32 } from "../../src/gguf/metadata.ts";
import { archKey, tensorName } from "../../src/gguf/names.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { argmax } from "../../src/model/decode-loop.ts";
import { loadModel } from "../../src/model/load-model.ts";
import type { ModelConfig } from "../../src/model/model-config.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { Runner } from "../../src/model/runner.ts";
import type { ModelWeights } from "../../src/model/weights.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { disposeLlamaCpp, llamaCppGreedy, type LlamaCppGreedyOptions, type LlamaCppGreedyRun, logprobError, openLlamaCpp } from "../helpers/llama-cpp.ts";
import { teacherForcedLogits } from "../helpers/teacher-forced.ts";
import { roundLikeGgml } from "./ggml-activation-rounding.ts";
import { makeTinyModel, type PlannedTensor } from "./tiny-model.ts";

await ensureKernels();

const STEPS = 32;
const LOGPROB_TOLERANCE = 1e-3;
const TIE_GAP = 1e-3;
const FAST_LOGPROB_TOLERANCE = 5e-3;
const FAST_TIE_GAP = 5e-3;
const PROMPT = [
  "The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the one hundred and twelve steps",
  "as his father had taught him. At the top he trimmed the wick, polished the great lens until it shone like a second",
  "moon, and wrote the weather in a leather book: wind from the north-west, a falling glass, three fishing boats",
  "returning late with their lamps swinging.",
].join(" ");

interface Case {
  readonly name: string;
  readonly architecture: "qwen3moe" | "olmoe" | "granitemoe" | "granite" | "gpt-oss";
  readonly vocab: string;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly experts: number;
  readonly used: number;
  /** the experts' width (qwen3moe: expert_feed_forward_length; olmoe: feed_forward_length) */
  readonly expertHiddenDim: number;
  readonly expertType: GgmlType;
  /** granitemoe (shared): the shared expert's width; absent: none */
  readonly sharedHiddenDim?: number;
  /** extra `<arch>.` metadata (Granite's multipliers) */
  readonly archMetadata?: Readonly<Record<string, number>>;
  /**
   * oracle and fast-path |dlogprob| bounds; default the f32 ones of llamacpp-archs.test.ts. MXFP4 experts: the
   * quantized types' bounds of llamacpp-logits.test.ts are 3e-2 / 9e-2; the oracle's measured 6.0e-3 (the q8_0
   * activations of its dot are emulated, not bit-equal, as for q8_0 weights); the fast path's 2.5e-2 against the f32
   * cache and 2.0e-2 against the f16 one come from f16 attention, whose rounding the q8_0 activations amplify: its own
   * f16 K/V, and on llama.cpp's f16 cache also q and the softmax weights rounded to f16 for the f16 K/V matmuls (the
   * oracle with f16 K/V gives the fast path's figures on both runs)
   */
  readonly tolerance?: { readonly oracle: number; readonly fast: number };
}

const DIM = 128;
/**
 * ibm-granite/granite-3.1-3b-a800m config.json: embedding_multiplier 12, residual_multiplier 0.22, attention_multiplier
 * 0.015625; its logits_scaling 6 would flatten these random weights' logits below p = 1e-4 for every token (nothing
 * left to compare), so the logits are divided by 0.2 instead (sharpened: the division is checked all the same)
 */
const GRANITE_SCALES = { embedding_scale: 12, residual_scale: 0.22, "attention.scale": 0.015625, logit_scale: 0.2 };
const CASES: readonly Case[] = [
  { name: "qwen3moe (qwen3-30b-a3b: 128 experts, top 8, renormalised)", architecture: "qwen3moe", vocab: "qwen2", numHeads: 2, numKvHeads: 1, headDim: 128, experts: 128, used: 8, expertHiddenDim: 64, expertType: GgmlType.F32 },
  { name: "olmoe (olmoe-1b-7b: 64 experts, top 8, full-width QK-norm)", architecture: "olmoe", vocab: "gpt-neox", numHeads: 2, numKvHeads: 2, headDim: 64, experts: 64, used: 8, expertHiddenDim: 64, expertType: GgmlType.F32 },
  { name: "qwen3moe, MXFP4 experts", architecture: "qwen3moe", vocab: "qwen2", numHeads: 2, numKvHeads: 1, headDim: 128, experts: 128, used: 8, expertHiddenDim: 64, expertType: GgmlType.MXFP4,
    tolerance: { oracle: 1.5e-2, fast: 4e-2 } },
  // granite-3.1-3b-a800m: 40 experts of 512, 8 routed, renormalised, heads of 64, Granite's multipliers; the gpt-2
  // vocabulary stands in for Granite's own (not among llama.cpp's vocab files)
  { name: "granitemoe (granite-3.1-3b-a800m: 40 experts, top 8, multipliers)", architecture: "granitemoe", vocab: "gpt-2", numHeads: 2, numKvHeads: 1, headDim: 64, experts: 40, used: 8, expertHiddenDim: 64, expertType: GgmlType.F32, archMetadata: GRANITE_SCALES },
  { name: "granitemoe with a shared expert", architecture: "granitemoe", vocab: "gpt-2", numHeads: 2, numKvHeads: 1, headDim: 64, experts: 40, used: 8, expertHiddenDim: 64, expertType: GgmlType.F32, sharedHiddenDim: 96, archMetadata: GRANITE_SCALES },
  // gpt-oss-20b: 32 experts, 4 routed (top-k logits, then softmax), swiglu_oai experts with biases, attention sinks,
  // even layers sliding (window 16 here, 128 in the model)
  { name: "gpt-oss (gpt-oss-20b: 32 experts, top 4, sinks, sliding window)", architecture: "gpt-oss", vocab: "gpt-2", numHeads: 2, numKvHeads: 1, headDim: 64, experts: 32, used: 4, expertHiddenDim: 64, expertType: GgmlType.F32 },
  // as gpt-oss GGUFs ship: MXFP4 experts, the rest f32 here. K/V rounded to f16 move every later matmul input by
  // ~1e-4 and the experts' q8_0 activations turn some of that into whole rounding steps (a block's max / 127), so a
  // near-tie step follows the cache's type: the fast path (f16 K/V) meets the near-tie bound against llama.cpp's f16
  // cache; against its f32 cache it differs where the oracle with f16 K/V does, and nowhere else
  { name: "gpt-oss, MXFP4 experts", architecture: "gpt-oss", vocab: "gpt-2", numHeads: 2, numKvHeads: 1, headDim: 64, experts: 32, used: 4, expertHiddenDim: 64, expertType: GgmlType.MXFP4,
    tolerance: { oracle: 1.5e-2, fast: 4e-2 } },
  { name: "granite (dense, multipliers)", architecture: "granite", vocab: "gpt-2", numHeads: 2, numKvHeads: 1, headDim: 64, experts: 0, used: 0, expertHiddenDim: 128, expertType: GgmlType.F32, archMetadata: GRANITE_SCALES },
];

/** The dense FFN tensors replaced by a router and stacked experts; QK-norms of the architecture's width. */
function moeTensors(c: Case, numLayers: number): (planned: PlannedTensor[]) => PlannedTensor[] {
  return (planned) => {
    const out = planned.filter((t) => !/^blk\.\d+\.(ffn_gate|ffn_up|ffn_down|attn_q_norm|attn_k_norm)\.weight$/.test(t.name));
    if (c.experts === 0) return planned;
    if (c.architecture === "gpt-oss") return gptOssTensors(c, numLayers, out);
    const qWidth = c.architecture === "olmoe" ? c.numHeads * c.headDim : c.headDim;
    const kWidth = c.architecture === "olmoe" ? c.numKvHeads * c.headDim : c.headDim;
    for (let l = 0; l < numLayers; l++) {
      const m = (name: string, shape: number[], type: GgmlType): PlannedTensor => ({ name, shape, type, kind: "matrix" });
      if (c.architecture !== "granitemoe") {
        out.push({ name: tensorName("attnQNorm", l), shape: [qWidth], type: GgmlType.F32, kind: "norm" }, { name: tensorName("attnKNorm", l), shape: [kWidth], type: GgmlType.F32, kind: "norm" });
      }
      if (c.sharedHiddenDim !== undefined) {
        out.push(
          m(tensorName("ffnGateShexp", l), [DIM, c.sharedHiddenDim], GgmlType.F32), m(tensorName("ffnUpShexp", l), [DIM, c.sharedHiddenDim], GgmlType.F32),
          m(tensorName("ffnDownShexp", l), [c.sharedHiddenDim, DIM], GgmlType.F32),
        );
      }
      out.push(
        m(tensorName("ffnGateInp", l), [DIM, c.experts], GgmlType.F32),
        m(tensorName("ffnGateExps", l), [DIM, c.expertHiddenDim, c.experts], c.expertType),
        m(tensorName("ffnUpExps", l), [DIM, c.expertHiddenDim, c.experts], c.expertType),
        m(tensorName("ffnDownExps", l), [c.expertHiddenDim, DIM, c.experts], c.expertType),
      );
    }
    return out;
  };
}

/** gpt-oss (openai-moe.cpp load_arch_tensors): q/k/v/o biases, sinks, post_attention_norm for ffn_norm, biased router and experts */
function gptOssTensors(c: Case, numLayers: number, out: PlannedTensor[]): PlannedTensor[] {
  // tiny-model.ts plans gpt-oss's attention tensors too: these are written here, at this case's widths
  const kept = out.filter((t) => !/^blk\.\d+\.(ffn_norm\.weight|attn_[qkv]\.bias|attn_output\.bias|attn_sinks\.weight|post_attention_norm\.weight)$/.test(t.name));
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  for (let l = 0; l < numLayers; l++) {
    const v = (name: string, shape: number[], kind: "norm" | "bias"): PlannedTensor => ({ name, shape, type: GgmlType.F32, kind });
    const m = (name: string, shape: number[]): PlannedTensor => ({ name, shape, type: c.expertType, kind: "matrix" });
    kept.push(
      v(tensorName("attnQBias", l), [qDim], "bias"), v(tensorName("attnKBias", l), [kvDim], "bias"), v(tensorName("attnVBias", l), [kvDim], "bias"),
      v(tensorName("attnOutputBias", l), [DIM], "bias"), v(tensorName("attnSinks", l), [c.numHeads], "norm"), v(tensorName("attnPostNorm", l), [DIM], "norm"),
      { name: tensorName("ffnGateInp", l), shape: [DIM, c.experts], type: GgmlType.F32, kind: "matrix" }, v(tensorName("ffnGateInpBias", l), [c.experts], "bias"),
      m(tensorName("ffnGateExps", l), [DIM, c.expertHiddenDim, c.experts]), m(tensorName("ffnUpExps", l), [DIM, c.expertHiddenDim, c.experts]),
      m(tensorName("ffnDownExps", l), [c.expertHiddenDim, DIM, c.experts]),
      { ...v(tensorName("ffnGateExpsBias", l), [c.expertHiddenDim, c.experts], "bias") }, { ...v(tensorName("ffnUpExpsBias", l), [c.expertHiddenDim, c.experts], "bias") },
      { ...v(tensorName("ffnDownExpsBias", l), [DIM, c.experts], "bias") },
    );
  }
  return kept;
}

function writeModel(path: string, c: Case, vocab: GgufFile): void {
  const a = c.architecture;
  const metadata: Record<string, GgufMetadataEntry> = {};
  for (const [key, entry] of vocab.metadata) if (key.startsWith("tokenizer.")) metadata[key] = entry;
  if (c.experts > 0) {
    metadata[archKey(a, "expertCount")] = mdU32(c.experts);
    metadata[archKey(a, "expertUsedCount")] = mdU32(c.used);
  }
  if (c.sharedHiddenDim !== undefined) metadata[archKey(a, "expertSharedFeedForwardLength")] = mdU32(c.sharedHiddenDim);
  for (const [key, value] of Object.entries(c.archMetadata ?? {})) metadata[`${a}.${key}`] = mdF32(value);
  if (a === "qwen3moe" || a === "gpt-oss") metadata[archKey(a, "expertFeedForwardLength")] = mdU32(c.expertHiddenDim);
  if (a === "gpt-oss") metadata[archKey(a, "slidingWindow")] = mdU32(16);
  metadata[archKey(a, "rmsEps")] = mdF32(1e-6);
  const tokens = vocab.metadata.get("tokenizer.ggml.tokens")!.value as { values: unknown[] };
  const numLayers = 2;
  const gguf = makeTinyModel({
    architecture: a, vocabSize: tokens.values.length, dim: DIM, hiddenDim: a === "qwen3moe" || a === "gpt-oss" ? 6 * c.expertHiddenDim : c.expertHiddenDim, numLayers,
    numHeads: c.numHeads, numKvHeads: c.numKvHeads, headDim: c.headDim, tied: false, contextLength: 4096,
  }, { seed: 5, metadata, editTensors: moeTensors(c, numLayers) });
  writeGgufFile(path, {
    metadata: gguf.metadata,
    tensors: gguf.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: gguf.bytes.subarray(t.offset, t.offset + t.sizeBytes) })),
  });
}

interface Tally {
  /** the greedy steps (0 = the token after the prompt) whose argmax is not llama.cpp's token */
  readonly differing: number[];
  worstGap: number;
  worstLogprob: number;
}

function tally(t: Tally, logits: Float32Array, step: number, theirs: readonly number[], evaluated: ControlledEvaluateIndexOutput | undefined, checked: boolean): void {
  if (step >= 0 && step < theirs.length) {
    const ours = argmax(logits);
    if (ours !== theirs[step]) {
      t.differing.push(step);
      t.worstGap = Math.max(t.worstGap, logits[ours]! - logits[theirs[step]!]!);
    }
  }
  if (checked) t.worstLogprob = Math.max(t.worstLogprob, logprobError(logits, evaluated));
}

async function wasmRunner(config: ModelConfig, weights: ModelWeights, numBlocks: number): Promise<Runner> {
  const runner = new Runner(config, weights, await createBackend({ kind: "wasm", threads: 2 }));
  runner.allocateKvCache(numBlocks, 16);
  return runner;
}

/** The reference forward teacher-forced along one llama.cpp run: every greedy step and the checked positions. */
function oracleAlong(config: ModelConfig, weights: ModelWeights, run: LlamaCppGreedyRun, roundKv: boolean): Tally {
  const t: Tally = { differing: [], worstGap: 0, worstLogprob: 0 };
  const { promptIds, all, theirs, evaluated, checked } = run;
  const ref = new ReferenceForward(config, weights, all.length, {
    roundMatmulInput: roundLikeGgml, ...(roundKv ? { roundKvCache: (x: Float32Array) => roundLikeGgml(x, GgmlType.F16) } : {}),
  });
  for (let pos = 0; pos < promptIds.length - 1; pos++) ref.advance(all[pos]!, pos);
  for (let pos = promptIds.length - 1; pos < all.length; pos++) {
    tally(t, ref.forward(all[pos]!, pos), pos - (promptIds.length - 1), theirs, evaluated[pos], checked.has(pos));
  }
  return t;
}

/** The WASM fast path (Runner: one prefill, then decode steps) teacher-forced along one llama.cpp run. */
async function fastAlong(config: ModelConfig, weights: ModelWeights, run: LlamaCppGreedyRun): Promise<Tally> {
  const t: Tally = { differing: [], worstGap: 0, worstLogprob: 0 };
  const { promptIds, all, theirs, evaluated, checked } = run;
  const runner = await wasmRunner(config, weights, Math.ceil(all.length / 16));
  try {
    const rows = await teacherForcedLogits(runner, all, promptIds.length);
    rows.forEach((logits, s) => tally(t, logits, s, theirs, evaluated[promptIds.length - 1 + s], s === 0 || checked.has(promptIds.length - 1 + s)));
  } finally {
    runner.dispose();
  }
  return t;
}

let dir = "";
let llama: Llama;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "fennec-moe-"));
  llama = await openLlamaCpp();
}, 120_000);

afterAll(async () => {
  await disposeLlamaCpp(llama);
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

const loaded = new Map<string, { config: ModelConfig; weights: ModelWeights }>();

describe.each(CASES)("$name", (c) => {
  test("oracle and WASM fast path match llama.cpp over 32 greedy tokens; routing to the wrong experts does not", async () => {
    const vocab = readGguf(llamaVocabPath(c.vocab));
    if (!vocab.ok) throw new Error(vocab.error);
    const path = join(dir, `${c.name.replace(/[^a-z0-9]+/gi, "-")}.gguf`);
    writeModel(path, c, vocab.value);

    const options: LlamaCppGreedyOptions = {
      contextSize: 512, batchSize: 512, steps: STEPS,
      prompt: (model) => [...(model.tokens.bos !== null ? [model.tokens.bos] : []), ...model.tokenize(PROMPT)],
      checked: (promptLength, allLength) => [promptLength - 1, promptLength + 10, promptLength + 20, allLength - 1],
    };
    const run = await llamaCppGreedy(llama, path, options);
    const { promptIds, all, evaluated } = run;
    expect(promptIds.length).toBeGreaterThan(60);
    const last = all.length - 1;

    const file = readGguf(path);
    if (!file.ok) throw new Error(file.error);
    const model = loadModel(file.value, { maxModelLen: 512 });
    if (!model.ok) throw new Error(model.error);
    const { config, weights } = model.value;
    if (c.experts > 0) expect(config.moe).toMatchObject({ expertCount: c.experts, expertUsedCount: c.used, expertHiddenDim: c.expertHiddenDim, normTopK: c.architecture !== "olmoe" && c.architecture !== "gpt-oss" });
    if (c.archMetadata !== undefined) expect(config).toMatchObject({ embeddingScale: 12, residualScale: Math.fround(0.22), attentionScale: 0.015625, logitScale: Math.fround(0.2) });
    if (c.architecture === "gpt-oss") expect(config).toMatchObject({ attentionSinks: true, slidingWindow: 16, slidingLayers: [true, false] });
    loaded.set(c.name, model.value);

    // the oracle (f32 K/V) against llama.cpp on an f32 cache, like with like
    const oracle = oracleAlong(config, weights, run, false);
    // the fast path stores K/V in f16: along the f32 run it follows the oracle with its K/V rounded to f16 (same
    // differing steps, same error), which shows what it differs by there is its cache, not its kernels
    const fast = await fastAlong(config, weights, run);
    const kvOracle = oracleAlong(config, weights, run, true);
    // MXFP4 experts: their q8_0 activations turn the f16 cache's rounding into whole rounding steps, enough to move a
    // near-tie greedy step, so the fast path is also run against llama.cpp on an f16 cache (its default), along that
    // run's own greedy tokens: like with like. The oracle with f16 K/V along it shows what remains is llama.cpp's f16
    // attention (q and the softmax weights rounded to f16 for its f16 K/V matmuls), not the kernels. (Every case on
    // both caches would add ~10 s to this file's ~30 s; the f32-expert cases meet FAST_TIE_GAP on the f32 run.)
    const f16 = c.expertType === GgmlType.MXFP4 ? await llamaCppGreedy(llama, path, { ...options, kvCacheType: "F16" }) : undefined;
    const run16 = f16 === undefined ? undefined : { run: f16, fast: await fastAlong(config, weights, f16), kvOracle: oracleAlong(config, weights, f16, true) };

    // control: the oracle routing to the k worst experts (the router's rows reversed in sign); a dense model: without
    // Granite's multipliers
    const negated = weights.layers.map((l) => {
      if (l.ffnGateInp == null) return l;
      const router = new Float32Array(l.ffnGateInp.data.slice().buffer).map((v) => -v);
      return { ...l, ffnGateInp: { ...l.ffnGateInp, data: new Uint8Array(router.buffer) } };
    });
    const controlConfig: ModelConfig = c.experts > 0 ? config : { ...config, embeddingScale: 1, residualScale: 1, attentionScale: undefined, logitScale: undefined };
    const control = new ReferenceForward(controlConfig, { ...weights, layers: negated }, all.length, { roundMatmulInput: roundLikeGgml });
    for (let pos = 0; pos < last; pos++) control.advance(all[pos]!, pos);
    const controlError = logprobError(control.forward(all[last]!, last), evaluated[last]);

    const line = (t: Tally) => `${t.differing.length} differing steps (worst gap ${t.worstGap.toExponential(2)}), max |dlogprob| ${t.worstLogprob.toExponential(2)}`;
    const on16 = run16 === undefined ? "" : `llama.cpp f16 KV (${run16.run.all.length} positions): wasm ${line(run16.fast)}; oracle with f16 K/V ${line(run16.kvOracle)}; `;
    console.log(`${c.name}: ${all.length} positions; llama.cpp f32 KV: oracle ${line(oracle)}; wasm ${line(fast)}; oracle with f16 K/V ${line(kvOracle)}; ` +
      `${on16}control (wrong experts; dense: no multipliers) max |dlogprob| ${controlError.toExponential(2)}`);
    expect(oracle.worstGap).toBeLessThanOrEqual(TIE_GAP);
    expect(oracle.worstLogprob).toBeLessThan(c.tolerance?.oracle ?? LOGPROB_TOLERANCE);
    expect(fast.worstLogprob).toBeLessThan(c.tolerance?.fast ?? FAST_LOGPROB_TOLERANCE);
    expect(fast.differing).toEqual(kvOracle.differing);
    expect(Math.abs(fast.worstGap - kvOracle.worstGap)).toBeLessThanOrEqual(FAST_TIE_GAP);
    expect(Math.abs(fast.worstLogprob - kvOracle.worstLogprob)).toBeLessThan(0.1 * kvOracle.worstLogprob + 1e-4);
    if (run16 === undefined) {
      expect(fast.worstGap).toBeLessThanOrEqual(FAST_TIE_GAP);
    } else {
      // the f16 run is another run: its distribution after the prompt (the same tokens in both) is not the f32 run's
      const first = promptIds.length - 1;
      const p32 = evaluated[first]!.next.probabilities!;
      expect([...run16.run.evaluated[first]!.next.probabilities!].some(([id, p]) => p !== p32.get(id))).toBe(true);
      expect(run16.fast.worstGap).toBeLessThanOrEqual(FAST_TIE_GAP);
      expect(run16.fast.worstLogprob).toBeLessThan(c.tolerance?.fast ?? FAST_LOGPROB_TOLERANCE);
      expect(run16.fast.differing).toEqual(run16.kvOracle.differing);
      expect(Math.abs(run16.fast.worstLogprob - run16.kvOracle.worstLogprob)).toBeLessThan(0.1 * run16.kvOracle.worstLogprob + 1e-4);
    }
    expect(controlError).toBeGreaterThan(10 * Math.max(oracle.worstLogprob, 1e-4));
    if (c.architecture === "gpt-oss") {
      // the sinks and the sliding window each matter: the oracle without one of them misses llama.cpp
      const without = (cfg: ModelConfig, w: ModelWeights): number => {
        const r = new ReferenceForward(cfg, w, all.length, { roundMatmulInput: roundLikeGgml });
        for (let pos = 0; pos < last; pos++) r.advance(all[pos]!, pos);
        return logprobError(r.forward(all[last]!, last), evaluated[last]);
      };
      const noSinks = without(config, { ...weights, layers: weights.layers.map((l) => ({ ...l, attnSinks: null })) });
      const noWindow = without({ ...config, slidingLayers: config.slidingLayers!.map(() => false) }, weights);
      console.log(`gpt-oss: without sinks max |dlogprob| ${noSinks.toExponential(2)}, without the sliding window ${noWindow.toExponential(2)}`);
      expect(noSinks).toBeGreaterThan(10 * Math.max(oracle.worstLogprob, 1e-4));
      expect(noWindow).toBeGreaterThan(10 * Math.max(oracle.worstLogprob, 1e-4));
    }
  }, 120_000);
});

test("a batch of 8 mixed requests gives each the greedy tokens it gets alone (qwen3moe)", async () => {
  const model = loaded.get(CASES[0]!.name);
  if (model === undefined) throw new Error("the qwen3moe case did not load its model");
  const { config, weights } = model;
  const decodeSteps = 6;
  // 8 prompts of 1..40 tokens: prefill and decode rows of different requests share each step's experts
  const prompts = Array.from({ length: 8 }, (_, i) => Int32Array.from({ length: 1 + ((i * 13) % 40) }, (_, j) => (i * 7919 + j * 104729) % config.vocabSize));
  const blocksEach = Math.ceil((40 + decodeSteps) / 16);
  const runner = await wasmRunner(config, weights, 8 * blocksEach);
  const tables = prompts.map((_, i) => Int32Array.from({ length: blocksEach }, (_, j) => i * blocksEach + j));

  const alone: number[][] = [];
  for (let i = 0; i < 8; i++) {
    const out: number[] = [];
    let logits = (await runner.execute({ sequences: [{ tokenIds: prompts[i]!, startPos: 0, blockTable: tables[i]!, logits: "last" }] })).logits;
    for (let s = 0; s < decodeSteps; s++) {
      out.push(argmax(logits));
      logits = (await runner.execute({ sequences: [{ tokenIds: Int32Array.of(out.at(-1)!), startPos: prompts[i]!.length + s, blockTable: tables[i]!, logits: "last" }] })).logits;
    }
    alone.push(out);
  }

  const together: number[][] = prompts.map(() => []);
  const width = config.vocabSize;
  let batch = await runner.execute({ sequences: prompts.map((p, i) => ({ tokenIds: p, startPos: 0, blockTable: tables[i]!, logits: "last" as const })) });
  for (let s = 0; s < decodeSteps; s++) {
    prompts.forEach((_, i) => together[i]!.push(argmax(batch.logits.subarray(i * width, (i + 1) * width))));
    batch = await runner.execute({
      sequences: prompts.map((p, i) => ({ tokenIds: Int32Array.of(together[i]!.at(-1)!), startPos: p.length + s, blockTable: tables[i]!, logits: "last" as const })),
    });
  }
  runner.dispose();
  expect(together).toEqual(alone);
}, 120_000);
