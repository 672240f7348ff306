/**
 * `fennec bench latency`: vLLM's latency benchmark (vllm/benchmarks/latency.py): one batch of --batch-size random
 * prompts (--input-len tokens, --output-len generated, ignore_eos) through an in-process engine, --num-iters-warmup
 * times unmeasured, then --num-iters times measured. Prints vLLM's lines (floats unformatted, as Python prints them);
 * --output-json writes avg_latency, latencies and percentiles.
 */
import { writeFileSync } from "node:fs";
import type { Options } from "../command-line/flags.ts";
import { createProgressBar } from "../util/progress.ts";
import { randomDataset } from "./bench-dataset.ts";
import { generateAll, startBenchEngine } from "./bench-engine.ts";
import { percentile } from "./bench-serve-result.ts";

const PERCENTILES = [10, 25, 50, 75, 90, 99] as const;
/** Python's str(float): integral values keep their ".0" */
const pyFloat = (v: number): string => (Number.isInteger(v) ? `${v}.0` : String(v));

export async function main(options: Options): Promise<number> {
  const seed = Number(options.seed);
  const orch = await startBenchEngine(options);
  try {
    const batch = randomDataset({
      numPrompts: Number(options["batch-size"]), inputLen: typeof options["input-len"] === "number" ? options["input-len"] : 32,
      outputLen: typeof options["output-len"] === "number" ? options["output-len"] : 128, rangeRatio: 0, prefixLen: 0, seed,
    }, orch.modelConfig.vocabSize, null);
    const tqdm = options["disable-tqdm"] !== true;
    const runIters = async (count: number, label: string, tag: string): Promise<number[]> => {
      const bar = tqdm ? createProgressBar(label, { minTotal: 0, format: (d, t) => `${d}/${t} iterations` }) : null;
      const latencies: number[] = [];
      for (let i = 0; i < count; i++) {
        // each iteration its own request ids; the same prompts, as vLLM reuses its batch
        latencies.push((await generateAll(orch, batch, { tag: `${tag}-${i}`, seed })).elapsedS);
        bar?.update(i + 1, count);
      }
      bar?.done();
      return latencies;
    };
    process.stdout.write("Warming up...\n");
    await runIters(Number(options["num-iters-warmup"]), "Warmup iterations", "warmup");
    const latencies = await runIters(Number(options["num-iters"]), "Profiling iterations", "iter");
    const avg = latencies.reduce((s, x) => s + x, 0) / latencies.length;
    const pct = PERCENTILES.map((p) => [p, percentile(latencies, p)] as const);
    process.stdout.write(`Avg latency: ${pyFloat(avg)} seconds\n${pct.map(([p, v]) => `${p}% percentile latency: ${pyFloat(v)} seconds\n`).join("")}`);
    const outPath = typeof options["output-json"] === "string" ? options["output-json"] : null;
    if (outPath !== null) writeFileSync(outPath, JSON.stringify({ avg_latency: avg, latencies, percentiles: Object.fromEntries(pct) }, null, 4));
    return 0;
  } finally {
    await orch.shutdown();
  }
}
