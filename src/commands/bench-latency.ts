/**
 * `fennec bench latency`: vLLM's latency benchmark (vllm/benchmarks/latency.py): one batch of --batch-size random
 * prompts (--input-len tokens, --output-len generated, ignore_eos) through an in-process engine, --num-iters-warmup
 * times unmeasured, then --num-iters times measured. Prints vLLM's lines (floats unformatted, as Python prints them);
 * --output-json writes avg_latency, latencies and percentiles.
 */
import { writeFileSync } from "node:fs";
import { benchLatencyConfig } from "../command-line/bench-config.ts";
import type { Options } from "../command-line/flags.ts";
import { CliError } from "../util/cli-error.ts";
import { createProgressBar } from "../util/progress.ts";
import { randomDataset } from "./bench-dataset.ts";
import { generateAll, startBenchEngine } from "./bench-engine.ts";
import { percentile } from "./bench-serve-result.ts";

const PERCENTILES = [10, 25, 50, 75, 90, 99] as const;
/** Python's str(float): integral values keep their ".0" */
const pyFloat = (v: number): string => (Number.isInteger(v) ? `${v}.0` : String(v));

export async function main(options: Options): Promise<number> {
  const parsed = benchLatencyConfig(options);
  if (!parsed.ok) throw new CliError(parsed.error);
  const config = parsed.value;
  const seed = config.seed;
  const orch = await startBenchEngine(config.run);
  try {
    const batch = randomDataset({
      numPrompts: config.batchSize, inputLen: config.inputLen, outputLen: config.outputLen, rangeRatio: 0, prefixLen: 0, seed,
    }, orch.modelConfig.vocabSize, null);
    const tqdm = !config.disableTqdm;
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
    await runIters(config.numItersWarmup, "Warmup iterations", "warmup");
    const latencies = await runIters(config.numIters, "Profiling iterations", "iter");
    const avg = latencies.reduce((s, x) => s + x, 0) / latencies.length;
    const pct = PERCENTILES.map((p) => [p, percentile(latencies, p)] as const);
    process.stdout.write(`Avg latency: ${pyFloat(avg)} seconds\n${pct.map(([p, v]) => `${p}% percentile latency: ${pyFloat(v)} seconds\n`).join("")}`);
    const outPath = config.outputJson;
    if (outPath !== null) writeFileSync(outPath, JSON.stringify({ avg_latency: avg, latencies, percentiles: Object.fromEntries(pct) }, null, 4));
    return 0;
  } finally {
    await orch.shutdown();
  }
}
