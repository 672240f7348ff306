/**
 * EngineFrontend.encode (vLLM AsyncLLM.encode) end to end with a real engine Worker on the fake model made an
 * embedding model (GGUF pooling type mean): vectors come back per request, equal alone and in a batch; an abort while
 * the prompt is prefilled rejects with an AbortError, frees its blocks and counts as aborted; a refused request is an
 * EngineRequestError; finished requests reach the stats listeners; a dead engine fails what is in flight.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createEngineFrontend, type EngineFrontend } from "../../src/frontend/engine-frontend.ts";
import type { EngineArgs } from "../../src/engine/protocol.ts";
import type { FinishedRequestStats, IterationStats, StatsListener } from "../../src/frontend/iteration-stats.ts";
import { EngineDeadError, EngineRequestError, type EncodeRequest } from "../../src/frontend/orchestrator.ts";
import { nowMs } from "../../src/util/clock.ts";
import type { FakeRunnerOptions } from "../engine/fake-runner.ts";
import { createFakeTokenizer } from "../engine/fake-tokenizer.ts";
import { prompt } from "../engine/helpers.ts";

const ARGS: EngineArgs = {
  maxNumSeqs: 8, maxNumBatchedTokens: 16, maxModelLen: 256, blockSize: 16, kvCacheMemoryBytes: 64 * 16 * 4,
  enablePrefixCaching: true, threads: 1, device: "cpu",
};

class Recorder implements StatsListener {
  readonly steps: IterationStats[] = [];
  readonly finished: FinishedRequestStats[] = [];
  onStep(s: IterationStats): void { this.steps.push(s); }
  onRequestFinished(s: FinishedRequestStats): void { this.finished.push(s); }
}

const open: EngineFrontend[] = [];
async function start(options: FakeRunnerOptions = {}): Promise<{ frontend: EngineFrontend; rec: Recorder }> {
  const rec = new Recorder();
  const frontend = await createEngineFrontend({
    modelPath: null, engineArgs: ARGS, listeners: [rec], tokenizer: createFakeTokenizer(),
    runner: { kind: "module", moduleUrl: new URL("../engine/fake-runner.ts", import.meta.url).href, options: { poolingType: "mean", ...options } },
  });
  open.push(frontend);
  return { frontend, rec };
}
afterAll(async () => { await Promise.all(open.map((o) => o.shutdown())); });

const req = (id: string, ids: number[]): EncodeRequest => ({ requestId: id, promptTokenIds: ids, pooling: { normalize: true, dimensions: null }, priority: 0, cacheSalt: null, arrivalMs: nowMs() });
const settle = <T>(p: Promise<T>): Promise<{ value?: T; error?: unknown }> => p.then((value) => ({ value }), (error: unknown) => ({ error }));

describe("EngineFrontend.encode", () => {
  test("the GGUF's pooling type reaches the main thread; vectors are the same alone and batched; stats are recorded", async () => {
    const { frontend, rec } = await start();
    expect(frontend.pooler).toMatchObject({ poolingType: "MEAN", normalize: true, hiddenSize: 8 });
    const prompts = [prompt(40, 1), prompt(7, 2), prompt(23, 3)];
    const alone = [];
    for (const [i, p] of prompts.entries()) alone.push(await frontend.encode(req(`a${i}`, p)));
    const batched = await Promise.all(prompts.map((p, i) => frontend.encode(req(`b${i}`, p))));
    for (let i = 0; i < prompts.length; i++) {
      expect(Array.from(batched[i]!.embedding)).toEqual(Array.from(alone[i]!.embedding));
      expect(batched[i]!.numPromptTokens).toBe(prompts[i]!.length);
    }
    const done = rec.finished.filter((f) => f.requestId.startsWith("b"));
    expect(done.map((f) => [f.finishReason, f.numPromptTokens, f.numGenerationTokens])).toEqual(expect.arrayContaining(prompts.map((p) => ["stop", p.length, 0])));
    expect(rec.steps.at(-1)!.kvCacheUsage).toBe(0);
  });

  test("an abort during the prefill rejects, frees the blocks and is counted as aborted; a refused request is an EngineRequestError", async () => {
    const { frontend, rec } = await start({ stepDelayMs: 20 });
    const controller = new AbortController();
    const pending = settle(frontend.encode(req("x", prompt(200, 4)), controller.signal));
    await Bun.sleep(50);
    controller.abort();
    const { error } = await pending;
    expect((error as Error).name).toBe("AbortError");
    expect(rec.finished.find((f) => f.requestId === "x")).toMatchObject({ finishReason: "abort", clientAborted: true });
    // the engine goes idle and reports its emptied cache
    for (let i = 0; i < 100 && rec.steps.at(-1)?.kvCacheUsage !== 0; i++) await Bun.sleep(20);
    expect(rec.steps.at(-1)!.kvCacheUsage).toBe(0);
    const refused = await settle(frontend.encode(req("long", prompt(300, 5))));
    expect(refused.error).toBeInstanceOf(EngineRequestError);
    expect((refused.error as Error).message).toContain("maximum context length is 256 tokens");
  });

  test("an engine that dies fails the pooling requests in flight", async () => {
    const { frontend } = await start({ failOnStep: 1, stepDelayMs: 10 });
    const { error } = await settle(frontend.encode(req("d", prompt(30, 6))));
    expect(error).toBeInstanceOf(EngineDeadError);
    expect(frontend.isHealthy()).toBe(false);
  });
});
