/** The scheduler's rules, asserted on statuses, token counts and block counts (vLLM's scheduler tests' style). */
import { describe, expect, test } from "bun:test";
import { makeEngine, prompt, request } from "./helpers.ts";

describe("scheduler", () => {
  test("never runs more than max-num-seqs sequences nor more than max-num-batched-tokens tokens in a step", async () => {
    const { engine, runner } = makeEngine({ maxNumSeqs: 3, maxNumBatchedTokens: 40 });
    for (let i = 0; i < 7; i++) engine.addRequest(request(`r${i}`, prompt(10 + 11 * i, i), { maxTokens: 5 }));
    const tokensPerStep: number[] = [];
    let before = 0;
    while (engine.hasWork()) {
      await engine.step();
      expect(engine.numRunning).toBeLessThanOrEqual(3);
      tokensPerStep.push(runner.numTokensComputed - before);
      before = runner.numTokensComputed;
    }
    expect(Math.max(...runner.batchSizes)).toBe(3);
    expect(Math.max(...tokensPerStep)).toBe(40); // the budget is used up, never exceeded
  });

  test("first come, first served: a later request is not admitted before an earlier one that waits for blocks", async () => {
    // 6 blocks of 16: "big" needs 4 blocks for its prompt, "small" 1; "first" holds 3
    const { engine } = makeEngine({ numBlocks: 6, blockSize: 16, maxNumBatchedTokens: 256 });
    engine.addRequest(request("first", prompt(40, 1), { maxTokens: 8 }));
    await engine.step();
    engine.addRequest(request("big", prompt(60, 2), { maxTokens: 4 }));
    engine.addRequest(request("small", prompt(5, 3), { maxTokens: 4 }));
    await engine.step();
    expect(engine.numRunning).toBe(1);
    expect(engine.numWaiting).toBe(2);
    expect(engine.scheduler.waiting.map((r) => r.requestId)).toEqual(["big", "small"]);
  });

  test("chunked prefill: a long prompt is computed over several steps, with decode tokens of others in the same steps", async () => {
    const { engine, runner } = makeEngine({ maxNumBatchedTokens: 16 });
    engine.addRequest(request("short", prompt(4, 1), { maxTokens: 20 }));
    await engine.step();
    engine.addRequest(request("long", prompt(100, 2), { maxTokens: 2 }));
    const counts: number[] = [];
    let before = runner.numTokensComputed;
    for (let i = 0; i < 6; i++) {
      const r = await engine.step();
      expect(r!.stats.batchSize).toBe(2);
      expect(r!.deltas.map((d) => d.requestId)).toContain("short"); // decode never starves
      counts.push(runner.numTokensComputed - before);
      before = runner.numTokensComputed;
    }
    expect(counts).toEqual([16, 16, 16, 16, 16, 16]); // 1 decode + 15 prefill tokens each step
    const long = engine.scheduler.running.find((r) => r.requestId === "long")!;
    expect(long.numComputedTokens).toBe(6 * 15);
    expect(long.numOutputTokens).toBe(0); // no token before its last chunk
  });

  test("preemption frees the newest running request's blocks and puts it first in the waiting queue", async () => {
    const { engine } = makeEngine({ numBlocks: 4, blockSize: 4, maxNumBatchedTokens: 64 });
    engine.addRequest(request("old", prompt(8, 1), { maxTokens: 4 }));
    engine.addRequest(request("new", prompt(8, 2), { maxTokens: 4 }));
    await engine.step(); // both prefilled: 2 blocks each, the pool is full
    expect(engine.kv.pool.numFreeBlocks).toBe(0);
    const r = await engine.step(); // "old" needs a third block at position 8: "new" is preempted
    expect(r!.stats.numPreempted).toBe(1);
    expect(engine.scheduler.running.map((q) => q.requestId)).toEqual(["old"]);
    expect(engine.scheduler.waiting.map((q) => q.requestId)).toEqual(["new"]);
    expect(engine.scheduler.waiting[0]!.blockIds).toEqual([]);
  });
});
