/**
 * The in-process side of `fennec bench throughput|latency` (and bench/throughput.ts): an engine built from the engine
 * flags, and one call that pushes a set of prompts through it at a given concurrency (vLLM's LLM.generate pushes them
 * all; the scheduler's --max-num-seqs decides what runs), counting output tokens and TTFTs.
 */
import type { InProcessEngineConfig } from "../command-line/in-process-engine-config.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../engine/sampling-params.ts";
import { createEngineFrontend } from "../frontend/engine-frontend.ts";
import type { Orchestrator } from "../frontend/orchestrator.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";
import { nowMs } from "../util/clock.ts";
import { errorMessage } from "../util/error-message.ts";
import type { BenchPrompt } from "./bench-dataset.ts";

export async function startBenchEngine(run: InProcessEngineConfig): Promise<Orchestrator> {
  for (const warning of run.warnings) process.stderr.write(`fennec: ${warning}\n`);
  try {
    return await createEngineFrontend({ modelPath: run.model, engineArgs: run.engine });
  } catch (e) {
    // the flags were checked: a model that does not load is a failed run (exit 1), as in serve
    throw new RuntimeFailure(e instanceof CliError ? e.message : `cannot start the engine: ${errorMessage(e)}`);
  }
}

export interface GenerateAllResult {
  readonly elapsedS: number;
  readonly promptTokens: number;
  readonly outputTokens: number;
  readonly ttftsMs: number[];
}

export interface GenerateAllOptions {
  /** requests in flight at once; default all */
  readonly concurrency?: number;
  readonly tag: string;
  readonly seed: number;
  /** called after each finished request */
  readonly onFinished?: (finished: number, total: number) => void;
}

/** Every prompt through the engine (temperature 1, ignore_eos, its own output length, seeded per request). */
export async function generateAll(orch: Orchestrator, prompts: readonly BenchPrompt[], options: GenerateAllOptions): Promise<GenerateAllResult> {
  const longest = Math.max(...prompts.map((p) => p.promptIds.length + p.outputLen));
  if (longest > orch.maxModelLen) throw new CliError(`a prompt plus its output is ${longest} tokens, more than max-model-len ${orch.maxModelLen}: lower --input-len/--output-len`);
  let nextIndex = 0;
  let outputTokens = 0;
  let finished = 0;
  const ttftsMs: number[] = [];
  const t0 = nowMs();
  const worker = async (): Promise<void> => {
    while (nextIndex < prompts.length) {
      const i = nextIndex++;
      const p = prompts[i]!;
      const arrivalMs = nowMs();
      let first = true;
      const sampling = { ...DEFAULT_SAMPLING_PARAMS, temperature: 1, topP: 1, ignoreEos: true, maxTokens: p.outputLen, seed: options.seed + i };
      for await (const out of orch.generate({ requestId: `${options.tag}-${i}`, promptTokenIds: [...p.promptIds], sampling, arrivalMs })) {
        for (const c of out.outputs) outputTokens += c.tokenIdsDelta.length;
        if (first && out.outputs.length > 0) { ttftsMs.push(nowMs() - arrivalMs); first = false; }
      }
      options.onFinished?.(++finished, prompts.length);
    }
  };
  await Promise.all(Array.from({ length: Math.min(prompts.length, options.concurrency ?? prompts.length) }, worker));
  return { elapsedS: (nowMs() - t0) / 1000, promptTokens: prompts.reduce((s, p) => s + p.promptIds.length, 0), outputTokens, ttftsMs };
}
