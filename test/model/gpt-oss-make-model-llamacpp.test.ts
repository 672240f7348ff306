/**
 * make-model's gpt-oss-20b shape (MXFP4 weights as gpt-oss GGUFs ship, o200k_harmony vocabulary, 32 experts of the
 * real width 2880 with 4 routed, sinks, window 128 on the even layers), narrowed to 256 wide, 4 heads over 1 KV head and
 * 2 layers so both sides run it in seconds: llama.cpp (node-llama-cpp) writes 16 greedy tokens after a Harmony prompt,
 * and the WASM fast path, teacher-forced along them (one prefill, then decode steps on the hybrid KV cache groups),
 * is compared on every token's log-prob at 4 positions and on its argmax at every step. Measured: max |dlogprob| 2.5e-2
 * (the int8 path's q8_0 activations, as moe-llamacpp.test.ts's MXFP4 case), 2 of 16 steps pick another token at a gap
 * of 0.23 (these random weights give logits only ~3 wide over 201k tokens: a router near-tie moves a step that far).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Llama } from "node-llama-cpp";
import { createBackend } from "../../src/backend/create-backend.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { argmax } from "../../src/model/decode-loop.ts";
import { kvCacheGroups } from "../../src/model/kv-cache-groups.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { disposeLlamaCpp, llamaCppGreedy, openLlamaCpp } from "../helpers/llama-cpp.ts";
import { makeModelFile } from "../helpers/random-gguf.ts";

await ensureKernels();

const STEPS = 16;
const PROMPT = "<|start|>user<|message|>The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps as his father had taught him.<|end|><|start|>assistant";

let llama: Llama;
beforeAll(async () => {
  llama = await openLlamaCpp();
}, 120_000);
afterAll(async () => {
  await disposeLlamaCpp(llama);
});

test("make-model gpt-oss-20b (MXFP4, narrowed): the WASM path gives llama.cpp's greedy tokens", async () => {
  const path = await makeModelFile("gpt-oss-20b", "mxfp4", 2, ["--dim", "256", "--heads", "4", "--kv-heads", "1"]);
  const { promptIds, theirs, all, evaluated, checked } = await llamaCppGreedy(llama, path, {
    contextSize: 256, batchSize: 256, steps: STEPS,
    prompt: (model) => model.tokenize(PROMPT, true),
    checked: (promptLength, allLength) => [promptLength - 1, promptLength + 5, promptLength + 10, allLength - 1],
  });
  const file = readGguf(path);
  if (!file.ok) throw new Error(file.error);
  const loaded = loadModel(file.value, { maxModelLen: 256 });
  if (!loaded.ok) throw new Error(loaded.error);
  const { config, weights } = loaded.value;
  expect(config).toMatchObject({ architecture: "gpt-oss", attentionSinks: true, slidingWindow: 128, moe: { expertCount: 32, expertUsedCount: 4, expertHiddenDim: 2880 } });

  const groups = kvCacheGroups(config);
  const perGroup = Math.ceil(all.length / 16);
  const runner = new Runner(config, weights, await createBackend({ kind: "wasm", threads: 2 }));
  runner.allocateKvCache(groups.groups.length * perGroup, 16, groups);
  const blockTables = groups.groups.map((_, g) => Int32Array.from({ length: perGroup }, (_, b) => g * perGroup + b));
  const step = async (start: number, end: number) =>
    (await runner.execute({ sequences: [{ tokenIds: Int32Array.from(all.slice(start, end)), startPos: start, blockTable: blockTables[0]!, blockTables, logits: "last" }] })).logits;
  let differing = 0;
  let worstGap = 0;
  let worstLogprob = 0;
  let spread = 0;
  const tally = (logits: Float32Array, s: number, pos: number) => {
    const ours = argmax(logits);
    if (ours !== theirs[s]) {
      differing++;
      worstGap = Math.max(worstGap, logits[ours]! - logits[theirs[s]!]!);
    }
    if (!checked.has(pos)) return;
    // every token's log-prob (a random model's distribution is wide: few tokens pass logprobError's p > 1e-4)
    const probabilities = evaluated[pos]?.next.probabilities;
    if (probabilities === undefined || probabilities.size !== logits.length) throw new Error("no full distribution from llama.cpp");
    let max = -Infinity;
    for (const v of logits) max = Math.max(max, v);
    let sum = 0;
    for (const v of logits) sum += Math.exp(v - max);
    const logZ = max + Math.log(sum);
    for (const [id, p] of probabilities) if (p > 0) worstLogprob = Math.max(worstLogprob, Math.abs(Math.log(p) - (logits[id]! - logZ)));
    spread = Math.max(spread, max - Math.min(...logits));
  };
  tally(await step(0, promptIds.length), 0, promptIds.length - 1);
  for (let pos = promptIds.length; pos < all.length; pos++) tally(await step(pos, pos + 1), pos - (promptIds.length - 1), pos);
  runner.dispose();
  console.log(`gpt-oss-20b make-model (mxfp4, 256 wide, 2 layers): ${promptIds.length} prompt tokens, ${STEPS} steps; WASM ${differing} differing steps (worst gap ${worstGap.toExponential(2)}), max |dlogprob| over every token ${worstLogprob.toExponential(2)}, logit spread ${spread.toFixed(2)}`);
  // llamacpp-logits.test.ts's bounds for quantized weights (the int8 path's q8_0 activations are not ggml's bits)
  expect(worstGap).toBeLessThanOrEqual(0.25);
  expect(worstLogprob).toBeLessThan(9e-2);
}, 600_000);
