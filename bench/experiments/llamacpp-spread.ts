/**
 * llama.cpp against itself: two configurations of node-llama-cpp (KV cache type, flash attention) or two GGUF files,
 * scored along the same teacher-forced greedy steps with bench/server-logits.ts's measure (greedy ids, the largest
 * |log p| difference over the top 20 tokens). It tells how far llama.cpp's own legitimate choices move its
 * log-probs on a model, which is the floor for any other implementation's distance from it (server-logits.ts).
 * Usage: bun run bench/experiments/llamacpp-spread.ts -- --model F [--model-b G] [--a kv=f16,fa=off] [--b kv=f32,fa=off]
 *        [--threads 2] [--steps 32]
 */
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { llamaCppSteps } from "../llama-cpp-steps.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    "model-b": { type: "string" },
    a: { type: "string", default: "kv=f16,fa=off" },
    b: { type: "string", default: "kv=f32,fa=off" },
    threads: { type: "string", default: "2" },
    steps: { type: "string", default: "32" },
    prompt: { type: "string", default: "Once upon a time" },
  },
});
interface Config { readonly kv: "F16" | "F32" | "Q8_0"; readonly fa: boolean }
function parseConfig(text: string): Config {
  const kv = /kv=(f16|f32|q8_0)/.exec(text)?.[1];
  const fa = /fa=(on|off)/.exec(text)?.[1];
  if (kv === undefined || fa === undefined) {
    process.stderr.write(`llamacpp-spread: "${text}" must give kv=f16|f32|q8_0 and fa=on|off\n`);
    process.exit(2);
  }
  return { kv: kv.toUpperCase() as Config["kv"], fa: fa === "on" };
}
if (values.model === undefined) {
  process.stderr.write("llamacpp-spread: --model <file.gguf> is required\n");
  process.exit(2);
}
const runs = [{ path: values.model, config: parseConfig(values.a) }, { path: values["model-b"] ?? values.model, config: parseConfig(values.b) }];
const steps = Number(values.steps);
const TOP = 20;

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const contextOf = (c: Config) => ({ threads: Number(values.threads), flashAttention: c.fa, experimentalKvCacheKeyType: c.kv, experimentalKvCacheValueType: c.kv });
// the first run's greedy continuation is the path both are scored along
const first = await llamaCppSteps(llama, runs[0]!.path, contextOf(runs[0]!.config), values.prompt, steps);
const second = await llamaCppSteps(llama, runs[1]!.path, contextOf(runs[1]!.config), values.prompt, steps, first);
await llama.dispose();
const { path: all, promptLength } = first;

const perStep: number[] = [];
let differing = 0;
for (let pos = promptLength - 1; pos < all.length; pos++) {
  const [a, b] = [first.next[pos]!, second.next[pos]!];
  const top = [...a].sort((x, y) => y[1] - x[1]).slice(0, TOP);
  const topB = [...b].reduce((best, e) => (e[1] > best[1] ? e : best));
  if (top[0]![0] !== topB[0]) differing++;
  perStep.push(Math.max(...top.map(([id, p]) => Math.abs(Math.log(p) - Math.log(b.get(id) ?? Number.MIN_VALUE)))));
}
const sorted = [...perStep].sort((x, y) => x - y);
console.log(`llama.cpp ${values.a} (${runs[0]!.path}) vs ${values.b} (${runs[1]!.path}), ${perStep.length} steps: greedy ids differ at ${differing}; top-${TOP} max |dlog p| median ${sorted[sorted.length >> 1]!.toExponential(2)}, max ${sorted.at(-1)!.toExponential(2)}`);
console.log(`per step: ${perStep.map((x) => x.toExponential(1)).join(" ")}`);
