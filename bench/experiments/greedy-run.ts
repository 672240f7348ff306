/**
 * One greedy generation on a Runner for the A/B benchmarks that load a model twice in one process
 * (bench/experiments/split-memory.ts, bench/experiments/huge-pages.ts): the prompt as one step, then genLen - 1 decode steps.
 */
import { argmax } from "../../src/model/decode-loop.ts";
import type { Runner } from "../../src/model/runner.ts";

/** Prefill and decode rates in tokens/s, and the greedy ids. */
export async function greedyRun(runner: Runner, promptIds: readonly number[], genLen: number, blockTable: Int32Array): Promise<{ prefill: number; decode: number; ids: number[] }> {
  const t0 = performance.now();
  let out = await runner.execute({ sequences: [{ tokenIds: Int32Array.from(promptIds), startPos: 0, blockTable, logits: "last" }] });
  const ids = [argmax(out.logits)];
  const t1 = performance.now();
  for (let i = 1; i < genLen; i++) {
    out = await runner.execute({ sequences: [{ tokenIds: Int32Array.of(ids.at(-1)!), startPos: promptIds.length + i - 1, blockTable, logits: "last" }] });
    ids.push(argmax(out.logits));
  }
  const t2 = performance.now();
  return { prefill: promptIds.length / ((t1 - t0) / 1000), decode: (genLen - 1) / ((t2 - t1) / 1000), ids };
}
