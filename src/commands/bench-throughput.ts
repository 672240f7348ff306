/**
 * `fennec bench throughput`: vLLM's offline throughput benchmark (vllm/benchmarks/throughput.py, backend vllm): every
 * prompt of the dataset handed to an in-process engine at once, timed from the first to the last output. Prints vLLM's
 * three lines; --output-json writes vLLM's keys (indent 4).
 */
import { writeFileSync } from "node:fs";
import { benchThroughputConfig } from "../command-line/bench-config.ts";
import type { Options } from "../command-line/flags.ts";
import { CliError } from "../util/cli-error.ts";
import { createProgressBar } from "../util/progress.ts";
import { randomDataset, shareGptDataset } from "./bench-dataset.ts";
import { generateAll, startBenchEngine } from "./bench-engine.ts";

export async function main(options: Options): Promise<number> {
  const parsed = benchThroughputConfig(options);
  if (!parsed.ok) throw new CliError(parsed.error);
  const config = parsed.value;
  const seed = config.seed;
  const orch = await startBenchEngine(config.run);
  try {
    const numPrompts = config.numPrompts;
    const prompts = config.datasetName === "sharegpt"
      ? shareGptDataset(config.datasetPath ?? ((): never => { throw new CliError("--dataset-name sharegpt needs --dataset-path"); })(), numPrompts, orch.tokenizer, config.sharegptOutputLen, seed)
      : randomDataset({
        numPrompts, inputLen: config.inputLen, outputLen: config.outputLen,
        rangeRatio: config.randomRangeRatio, prefixLen: config.randomPrefixLen, seed,
      }, orch.modelConfig.vocabSize, null);
    const warmups = config.numWarmups;
    if (warmups > 0) await generateAll(orch, prompts.slice(0, warmups), { tag: "warmup", seed });
    const bar = config.disableTqdm ? null : createProgressBar("bench throughput", { minTotal: 0, format: (d, t) => `${d}/${t} requests` });
    const r = await generateAll(orch, prompts, { tag: "bench", seed, onFinished: (d, t) => bar?.update(d, t) });
    bar?.done();
    const total = r.promptTokens + r.outputTokens;
    process.stdout.write(
      `Throughput: ${(prompts.length / r.elapsedS).toFixed(2)} requests/s, ${(total / r.elapsedS).toFixed(2)} total tokens/s, ${(r.outputTokens / r.elapsedS).toFixed(2)} output tokens/s\n` +
      `Total num prompt tokens:  ${r.promptTokens}\nTotal num output tokens:  ${r.outputTokens}\n`,
    );
    const outPath = config.outputJson;
    if (outPath !== null) {
      const json = { elapsed_time: r.elapsedS, num_requests: prompts.length, total_num_tokens: total, requests_per_second: prompts.length / r.elapsedS, tokens_per_second: total / r.elapsedS };
      writeFileSync(outPath, JSON.stringify(json, null, 4));
    }
    return 0;
  } finally {
    await orch.shutdown();
  }
}
