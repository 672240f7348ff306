/**
 * The orchestrator end to end on the main thread with a real engine Worker running the fake model: outputs, stop
 * strings, n > 1, aborts through AbortSignal, stats listeners, per-stage stats, request errors and engine death.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createEngineFrontend } from "../../src/frontend/engine-frontend.ts";
import type { EngineArgs } from "../../src/engine/protocol.ts";
import type { FinishedRequestStats, IterationStats as StepStats, StatsListener } from "../../src/frontend/iteration-stats.ts";
import { EngineDeadError, EngineRequestError, type Orchestrator, type RequestOutput } from "../../src/frontend/orchestrator.ts";
import type { SamplingParams } from "../../src/engine/sampling-params.ts";
import { nowMs } from "../../src/util/clock.ts";
import type { FakeRunnerOptions } from "../engine/fake-runner.ts";
import { createFakeTokenizer, fakeText } from "../engine/fake-tokenizer.ts";
import { GREEDY, prompt, request as engineRequest, runAlone } from "../engine/helpers.ts";
import { randomInt, rng } from "../helpers/prng.ts";
import { FAKE_EOS } from "../engine/fake-tokenizer.ts";

/** the orchestrator passes the tokenizer's stop ids as EOS; so must the reference run */
const request = (id: string, p: number[], s: Partial<SamplingParams>) => engineRequest(id, p, s, [FAKE_EOS]);

const ENGINE_ARGS: EngineArgs = {
  maxNumSeqs: 16, maxNumBatchedTokens: 64, maxModelLen: 512, blockSize: 16, kvCacheMemoryBytes: 256 * 16 * 4,
  enablePrefixCaching: true, threads: 1, device: "cpu",
};

class Recorder implements StatsListener {
  readonly steps: StepStats[] = [];
  readonly finished: FinishedRequestStats[] = [];
  onStep(s: StepStats): void { this.steps.push(s); }
  onRequestFinished(s: FinishedRequestStats): void { this.finished.push(s); }
}

const open: Orchestrator[] = [];
async function start(runnerOptions: FakeRunnerOptions = {}, args: Partial<EngineArgs> = {}): Promise<{ orch: Orchestrator; rec: Recorder }> {
  const rec = new Recorder();
  const orch = await createEngineFrontend({
    modelPath: null, engineArgs: { ...ENGINE_ARGS, ...args }, listeners: [rec], tokenizer: createFakeTokenizer(),
    runner: { kind: "module", moduleUrl: new URL("../engine/fake-runner.ts", import.meta.url).href, options: runnerOptions },
  });
  open.push(orch);
  return { orch, rec };
}
afterAll(async () => { await Promise.all(open.map((o) => o.shutdown())); });

interface Gathered { outputs: RequestOutput[]; text: string[]; tokens: number[][]; finish: (string | null)[]; stop: (string | number | null)[] }
async function gather(it: AsyncIterable<RequestOutput>): Promise<Gathered> {
  const g: Gathered = { outputs: [], text: [], tokens: [], finish: [], stop: [] };
  for await (const out of it) {
    g.outputs.push(out);
    for (const c of out.outputs) {
      g.text[c.index] = (g.text[c.index] ?? "") + c.textDelta;
      g.tokens[c.index] = [...(g.tokens[c.index] ?? []), ...c.tokenIdsDelta];
      g.finish[c.index] = c.finishReason;
      g.stop[c.index] = c.stopReason;
    }
  }
  return g;
}

/** the error a promise rejects with (bun's expect().rejects stalls Worker messages, so settle it ourselves) */
const failure = (p: Promise<unknown>): Promise<unknown> => p.then(() => null, (e: unknown) => e);

const gen = (id: string, promptTokenIds: number[], sampling: Partial<SamplingParams> = {}) => ({
  requestId: id, promptTokenIds, sampling: { ...GREEDY, ...sampling }, arrivalMs: nowMs(),
});

describe("orchestrator over an engine Worker", () => {
  test("greedy output, text, timings, step and finished stats", async () => {
    const { orch, rec } = await start();
    expect(orch.isHealthy()).toBe(true);
    expect(orch.maxModelLen).toBe(512);
    const p = prompt(30, 11);
    const expected = await runAlone(request("x", p, { maxTokens: 12, ignoreEos: true }));
    const g = await gather(orch.generate(gen("one", p, { maxTokens: 12, ignoreEos: true })));
    expect(g.tokens[0]).toEqual(expected.tokens);
    expect(g.text[0]).toBe(fakeText(expected.tokens));
    expect(g.finish[0]).toBe("length");
    const last = g.outputs[g.outputs.length - 1]!;
    expect(last.finished).toBe(true);
    const t = last.times;
    expect(t.queuedMs! >= t.arrivalMs && t.scheduledMs! >= t.queuedMs! && t.firstTokenMs! >= t.scheduledMs! && t.lastTokenMs! >= t.firstTokenMs!).toBe(true);
    const fin = rec.finished.find((f) => f.requestId === "one")!;
    expect(fin.numGenerationTokens).toBe(12);
    expect(fin.decodeTimeS).toBeCloseTo((t.lastTokenMs! - t.firstTokenMs!) / 1000, 6);
    expect(fin.meanTimePerOutputTokenS).toBeCloseTo(fin.decodeTimeS / 11, 6);
    expect(rec.steps.reduce((s, x) => s + x.timeToFirstTokensS.length, 0)).toBe(1);
    expect(rec.steps.reduce((s, x) => s + x.interTokenLatenciesS.length, 0)).toBe(11);
    expect(rec.steps.reduce((s, x) => s + x.numGenerationTokens, 0)).toBe(12);
  });

  test("8 concurrent requests each give their greedy output alone", async () => {
    const { orch, rec } = await start();
    const reqs = Array.from({ length: 8 }, (_, i) => ({ p: prompt(5 + 9 * i, 40 + i), max: 6 + 3 * i }));
    const alone = await Promise.all(reqs.map((r, i) => runAlone(request(`a${i}`, r.p, { maxTokens: r.max }))));
    const got = await Promise.all(reqs.map((r, i) => gather(orch.generate(gen(`c${i}`, r.p, { maxTokens: r.max })))));
    got.forEach((g, i) => expect(g.tokens[0]).toEqual(alone[i]!.tokens));
    expect(Math.max(...rec.steps.map((s) => s.batchSize))).toBeGreaterThanOrEqual(4);
  });

  test("stop strings end the request, truncate the text (or keep the stop string) and abort the engine request", async () => {
    const { orch, rec } = await start();
    const p = prompt(20, 5);
    const full = fakeText((await runAlone(request("f", p, { maxTokens: 40 }))).tokens);
    const stop = full.slice(10, 13);
    const at = full.indexOf(stop);
    const g = await gather(orch.generate(gen("s1", p, { maxTokens: 40, stop: [stop, "zzzzzz"] })));
    expect(g.text[0]).toBe(full.slice(0, at));
    expect(g.finish[0]).toBe("stop");
    expect(g.stop[0]).toBe(stop);
    const inc = await gather(orch.generate(gen("s2", p, { maxTokens: 40, stop: [stop], includeStopStrInOutput: true })));
    expect(inc.text[0]).toBe(full.slice(0, at + stop.length));
    // the engine stopped working on them: fewer tokens generated than max_tokens, nothing left running
    expect(rec.steps.reduce((s, x) => s + x.numGenerationTokens, 0)).toBeLessThan(80);
    await gather(orch.generate(gen("after", prompt(4, 1), { maxTokens: 2 })));
    const last = rec.steps[rec.steps.length - 1]!;
    expect([last.numRunning, last.numWaiting, last.kvCacheUsage]).toEqual([0, 0, 0]);
  });

  test("n > 1: one output per choice, seeded and reproducible", async () => {
    const { orch } = await start();
    const p = prompt(40, 9);
    const a = await gather(orch.generate(gen("n1", p, { n: 3, temperature: 1, seed: 5, maxTokens: 10 })));
    const b = await gather(orch.generate(gen("n2", p, { n: 3, temperature: 1, seed: 5, maxTokens: 10 })));
    expect(a.tokens.length).toBe(3);
    expect(a.tokens).toEqual(b.tokens);
    expect(new Set(a.tokens.map((t) => t.join(","))).size).toBeGreaterThan(1);
    expect(a.finish).toEqual(["length", "length", "length"]);
    expect(a.outputs[a.outputs.length - 1]!.finished).toBe(true);
  });

  test("an AbortSignal aborts a running request; its blocks are freed and later stats show an empty engine", async () => {
    const { orch, rec } = await start({ stepDelayMs: 2 });
    const controller = new AbortController();
    let received = 0;
    const run = (async () => {
      for await (const out of orch.generate(gen("long", prompt(50, 3), { maxTokens: 400 }), controller.signal)) {
        received += out.outputs.length;
        if (received === 5) controller.abort();
      }
    })();
    await run;
    expect(received).toBe(5);
    const aborted = rec.finished.find((f) => f.requestId === "long")!;
    expect(aborted.clientAborted).toBe(true);
    expect(aborted.finishReason).toBe("abort");
    // the engine reports its emptied queues and cache without another request (a stats-only record if it was idle)
    const gauges = (): number[] => { const s = rec.steps[rec.steps.length - 1]!; return [s.numRunning, s.numWaiting, s.kvCacheUsage]; };
    for (let i = 0; i < 100 && gauges().some((g) => g !== 0); i++) await Bun.sleep(10);
    expect(gauges()).toEqual([0, 0, 0]);
    await gather(orch.generate(gen("after", prompt(4, 1), { maxTokens: 3 })));
    const last = rec.steps[rec.steps.length - 1]!;
    expect([last.numRunning, last.numWaiting, last.kvCacheUsage]).toEqual([0, 0, 0]);
  });

  test("200 requests aborted at random points through the Worker leave an empty engine that still serves", async () => {
    const { orch, rec } = await start({ stepDelayMs: 1 }, { kvCacheMemoryBytes: 64 * 16 * 4, maxNumSeqs: 8 });
    const random = rng(99);
    const rand = (n: number): number => randomInt(random, n);
    let numPreAborted = 0;
    const runs = Array.from({ length: 200 }, async (_, i) => {
      const controller = new AbortController();
      const abortAfter = rand(12);
      let seen = 0;
      // aborted before it started: never reaches the engine, counts nowhere
      if (abortAfter === 0) { controller.abort(); numPreAborted++; }
      for await (const out of orch.generate(gen(`r${i}`, prompt(1 + rand(60), i), { maxTokens: 200, ignoreEos: true }), controller.signal)) {
        seen += out.outputs.length;
        if (seen >= abortAfter) controller.abort();
      }
    });
    await Promise.all(runs);
    expect(numPreAborted).toBeGreaterThan(0);
    expect(rec.finished.filter((f) => f.requestId.startsWith("r") && f.clientAborted).length).toBe(200 - numPreAborted);
    const gauges = (): number[] => { const x = rec.steps[rec.steps.length - 1]!; return [x.numRunning, x.numWaiting, x.kvCacheUsage]; };
    for (let i = 0; i < 100 && gauges().some((g) => g !== 0); i++) await Bun.sleep(10);
    expect(gauges()).toEqual([0, 0, 0]);
    const fresh = await gather(orch.generate(gen("fresh", prompt(30, 2), { maxTokens: 5 })));
    expect(fresh.finish[0]).not.toBeNull();
  });

  test("a request the engine refuses fails alone; the engine stays healthy", async () => {
    const { orch } = await start({}, { maxModelLen: 64 });
    const tooLong = await failure(gather(orch.generate(gen("toolong", prompt(80, 1)))));
    expect(tooLong).toBeInstanceOf(EngineRequestError);
    expect((tooLong as EngineRequestError).code).toBe("context_length");
    const badTemp = await failure(gather(orch.generate(gen("badtemp", prompt(8, 1), { temperature: 5 }))));
    expect((badTemp as Error).message).toBe("temperature must be in [0, 2], got 5.0.");
    expect(orch.isHealthy()).toBe(true);
    const ok = await gather(orch.generate(gen("fine", prompt(8, 1), { maxTokens: 3 })));
    expect(ok.tokens[0]!.length).toBe(3);
  });

  test("a fatal engine error fails the running requests and makes isHealthy() false", async () => {
    const { orch } = await start({ failOnStep: 3 });
    expect(await failure(gather(orch.generate(gen("doomed", prompt(8, 1), { maxTokens: 50 }))))).toBeInstanceOf(EngineDeadError);
    expect(orch.isHealthy()).toBe(false);
    expect(await failure(gather(orch.generate(gen("later", prompt(8, 1)))))).toBeInstanceOf(EngineDeadError);
    // what serve logs in its one line before it exits 1 (the worker died and nothing said why)
    expect(orch.deathReason?.()).toBe("fake runner: injected failure");
  });

  test("a bad engine configuration fails at start with one line", async () => {
    const e = await failure(start({ contextLength: 128 }, { maxModelLen: 4096 }));
    expect((e as Error).message).toBe("--max-model-len 4096 is greater than the model's context length 128");
  });
});

describe("KV handoff through two engine Workers (what a pd pipeline does)", () => {
  test("stage 0 returns the prompt's KV blocks with its first token; stage 1 continues the same greedy sequence", async () => {
    const { orch: prefill } = await start();
    const { orch: decode } = await start();
    const p = prompt(37, 12);
    const single = await runAlone(request("s", p, { maxTokens: 8, ignoreEos: true }));
    const first = await gather(prefill.generate({ ...gen("pd", p, { maxTokens: 1, ignoreEos: true }), exportKv: true }));
    const kv = first.outputs[first.outputs.length - 1]!.kv!;
    expect(kv.numTokens).toBe(37);
    const rest = await gather(decode.generate({ ...gen("pd", [...p, ...first.tokens[0]!], { maxTokens: 7, ignoreEos: true }), importKv: kv }));
    expect([...first.tokens[0]!, ...rest.tokens[0]!]).toEqual(single.tokens);
  });
});
