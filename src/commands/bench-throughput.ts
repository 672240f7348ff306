/**
 * `fennec bench throughput`: vLLM's offline throughput benchmark (vllm/benchmarks/throughput.py, backend vllm): every
 * prompt of the dataset handed to an in-process engine at once, timed from the first to the last output. Prints vLLM's
 * three lines; --output-json writes vLLM's keys (indent 4).
 */
import { writeFileSync } from "node:fs";
import type { Options } from "../command-line/flags.ts";
import { CliError } from "../util/cli-error.ts";
import { createProgressBar } from "../util/progress.ts";
import { randomDataset, shareGptDataset } from "./bench-dataset.ts";
import { generateAll, startBenchEngine } from "./bench-engine.ts";

const num = (v: unknown): number | null => (typeof v === "number" ? v : null);

export async function main(options: Options): Promise<number> {
  const seed = Number(options.seed);
  const orch = await startBenchEngine(options);
  try {
    const numPrompts = Number(options["num-prompts"]);
    const prompts = options["dataset-name"] === "sharegpt"
      ? shareGptDataset(typeof options["dataset-path"] === "string" ? options["dataset-path"] : ((): never => { throw new CliError("--dataset-name sharegpt needs --dataset-path"); })(), numPrompts, orch.tokenizer, num(options["sharegpt-output-len"]), seed)
      : randomDataset({
        numPrompts, inputLen: num(options["input-len"]) ?? Number(options["random-input-len"]), outputLen: num(options["output-len"]) ?? Number(options["random-output-len"]),
        rangeRatio: Number(options["random-range-ratio"]), prefixLen: Number(options["random-prefix-len"]), seed,
      }, orch.modelConfig.vocabSize, null);
    const warmups = Number(options["num-warmups"]);
    if (warmups > 0) await generateAll(orch, prompts.slice(0, warmups), { tag: "warmup", seed });
    const bar = options["disable-tqdm"] === true ? null : createProgressBar("bench throughput", { minTotal: 0, format: (d, t) => `${d}/${t} requests` });
    const r = await generateAll(orch, prompts, { tag: "bench", seed, onFinished: (d, t) => bar?.update(d, t) });
    bar?.done();
    const total = r.promptTokens + r.outputTokens;
    process.stdout.write(
      `Throughput: ${(prompts.length / r.elapsedS).toFixed(2)} requests/s, ${(total / r.elapsedS).toFixed(2)} total tokens/s, ${(r.outputTokens / r.elapsedS).toFixed(2)} output tokens/s\n` +
      `Total num prompt tokens:  ${r.promptTokens}\nTotal num output tokens:  ${r.outputTokens}\n`,
    );
    const outPath = typeof options["output-json"] === "string" ? options["output-json"] : null;
    if (outPath !== null) {
      const json = { elapsed_time: r.elapsedS, num_requests: prompts.length, total_num_tokens: total, requests_per_second: prompts.length / r.elapsedS, tokens_per_second: total / r.elapsedS };
      writeFileSync(outPath, JSON.stringify(json, null, 4));
    }
    return 0;
  } finally {
    await orch.shutdown();
  }
}
