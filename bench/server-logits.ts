/**
 * The logits a running fennec server gives against llama.cpp's on the same GGUF, for 32 greedy steps: llama.cpp
 * (node-llama-cpp, CPU) continues the prompt greedily and reports its full distribution at every step; the server
 * gets the prompt plus that continuation as token ids with prompt_logprobs (vLLM's teacher forcing: the log-prob of
 * every prompt position), so both score the same tokens. Prints per step whether the greedy ids agree (and where
 * not, how far apart the two picks are in fennec's logits: a near tie) and the largest |log p| difference over the
 * top 20 tokens. For models too large for the tests (the 8B shapes of make-model); the tolerance of
 * test/model/llamacpp-logits.test.ts applies.
 * Usage: bun run bench/server-logits.ts -- --model F --url http://127.0.0.1:8000 [--threads 2] [--steps 32]
 */
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel, type Token } from "node-llama-cpp";
import { llamaCppSteps } from "./llama-cpp-steps.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    url: { type: "string", default: "http://127.0.0.1:8000" },
    threads: { type: "string", default: "2" },
    steps: { type: "string", default: "32" },
    prompt: { type: "string", default: "Once upon a time" },
  },
});
if (values.model === undefined) {
  process.stderr.write("server-logits: --model <file.gguf> is required\n");
  process.exit(2);
}
const steps = Number(values.steps);
const TOP = 20;

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const { path: all, promptLength, greedy: theirs, next } = await llamaCppSteps(llama, values.model, { threads: Number(values.threads), flashAttention: false }, values.prompt, steps);
await llama.dispose();

const models = (await (await fetch(`${values.url}/v1/models`)).json()) as { data: { id: string }[] };
const response = await fetch(`${values.url}/v1/completions`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ model: models.data[0]!.id, prompt: [...all, theirs[steps - 1]], max_tokens: 1, temperature: 0, prompt_logprobs: TOP }),
});
const body = (await response.json()) as { choices: { prompt_logprobs: (Record<string, { logprob: number; rank: number }> | null)[] }[] };
if (!response.ok) throw new Error(JSON.stringify(body));
const ours = body.choices[0]!.prompt_logprobs; // [position] -> token id -> logprob, for the token at that position

let worst = 0;
let differing = 0;
for (let s = 0; s < steps; s++) {
  const pos = promptLength + s; // the position of theirs[s]: scored from the prefix before it
  const mine = ours[pos]!;
  const probabilities = next[pos - 1]!;
  if (probabilities.size === 0) throw new Error(`no distribution from llama.cpp at step ${s}`);
  let stepWorst = 0;
  let ourTop = -1;
  let ourTopLp = -Infinity;
  for (const [id, { logprob }] of Object.entries(mine)) {
    const p = probabilities.get(Number(id) as Token) ?? 0;
    stepWorst = Math.max(stepWorst, Math.abs(logprob - Math.log(p)));
    if (logprob > ourTopLp) {
      ourTopLp = logprob;
      ourTop = Number(id);
    }
  }
  worst = Math.max(worst, stepWorst);
  const same = ourTop === theirs[s];
  if (!same) differing++;
  const gap = same ? 0 : ourTopLp - (mine[String(theirs[s])]?.logprob ?? -Infinity);
  process.stdout.write(`step ${String(s).padStart(2)}: llama.cpp ${theirs[s]} fennec ${ourTop}${same ? "" : ` (near tie: ${gap.toExponential(2)} apart)`}  max |dlogp| top-${TOP} ${stepWorst.toExponential(2)}\n`);
}
process.stdout.write(`${steps} steps: ${differing} greedy ids differ, largest |log p difference| over the top ${TOP}: ${worst.toExponential(2)}\n`);
