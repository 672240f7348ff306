/** Engine behaviour through EngineCore with the fake runner: batch invariance, prefix caching, preemption, aborts. */
import { describe, expect, test } from "bun:test";
import { randomInt, rng } from "../helpers/prng.ts";
import { makeEngine, prompt, request, runAlone, runToCompletion } from "./helpers.ts";

/** 8 mixed requests: short and long prompts (several chunks at a 64-token budget), short and long outputs */
const MIXED = [
  { len: 5, max: 30 }, { len: 70, max: 8 }, { len: 17, max: 20 }, { len: 33, max: 3 },
  { len: 1, max: 25 }, { len: 120, max: 12 }, { len: 48, max: 40 }, { len: 16, max: 16 },
].map((m, i) => request(`r${i}`, prompt(m.len, i + 1), { maxTokens: m.max }));

describe("greedy output", () => {
  test("is identical alone and inside a batch of 8 mixed requests", async () => {
    const alone = await Promise.all(MIXED.map((r) => runAlone(r)));
    const { engine, runner } = makeEngine();
    for (const r of MIXED) expect(engine.addRequest(r)).toBeNull();
    const { outputs, steps } = await runToCompletion(engine);
    expect(Math.max(...runner.batchSizes)).toBeGreaterThanOrEqual(6); // really batched
    // chunked prefill: some step mixed a prefill chunk with decode tokens
    expect(steps.some((s) => s.numPromptTokens > 0 && s.numGenerationTokens > 0)).toBe(true);
    MIXED.forEach((r, i) => {
      expect(outputs.get(r.requestId)!.tokens).toEqual(alone[i]!.tokens);
      expect(outputs.get(r.requestId)!.tokens.length).toBe(r.sampling.maxTokens!);
      expect(outputs.get(r.requestId)!.finishReason).toBe("length");
    });
  });

  test("is identical with prefix caching on and off", async () => {
    const shared = prompt(40, 99);
    const reqs = [0, 1, 2, 3].map((i) => request(`p${i}`, [...shared, ...prompt(5 + i, 50 + i)], { maxTokens: 12 }));
    const results: string[][] = [];
    for (const enablePrefixCaching of [true, false]) {
      const { engine } = makeEngine({ enablePrefixCaching });
      for (const r of reqs) engine.addRequest(r);
      const { outputs, steps } = await runToCompletion(engine);
      const hits = steps.reduce((s, x) => s + x.prefixCacheHits, 0);
      if (enablePrefixCaching) expect(hits).toBeGreaterThan(0);
      else expect(hits).toBe(0);
      results.push(reqs.map((r) => outputs.get(r.requestId)!.tokens.join(",")));
    }
    expect(results[0]).toEqual(results[1]!);
  });
});

describe("prefix caching", () => {
  test("a prompt sharing a long prefix reports cached tokens and skips their computation", async () => {
    const { engine, runner } = makeEngine({ blockSize: 16 });
    const shared = prompt(100, 7);
    engine.addRequest(request("first", [...shared, 1, 2, 3], { maxTokens: 4 }));
    await runToCompletion(engine);
    const before = runner.numTokensComputed;
    const second = request("second", [...shared, 9, 9], { maxTokens: 4 });
    engine.addRequest(second);
    const { outputs, steps } = await runToCompletion(engine);
    const out = outputs.get("second")!;
    expect(out.numCachedTokens).toBe(96); // 6 full blocks of the 100 shared tokens
    // computed: the 6 uncached prompt tokens, then one position per generated token but the last
    expect(runner.numTokensComputed - before).toBe(102 - 96 + 3);
    expect(steps[0]!.prefixCacheQueries).toBe(102);
    expect(steps[0]!.prefixCacheHits).toBe(96);
    expect(steps[0]!.numPromptTokens).toBe(6);
    expect(out.tokens).toEqual((await runAlone(second, { enablePrefixCaching: false })).tokens);
  });

  test("n > 1 style children share the prompt's blocks instead of computing them again", async () => {
    const { engine, runner } = makeEngine({ blockSize: 16, maxNumBatchedTokens: 128 });
    const p = prompt(70, 3);
    for (let i = 0; i < 4; i++) engine.addRequest(request(`${i}_parent`, p, { temperature: 1, seed: i, maxTokens: 5 }));
    const { outputs, steps } = await runToCompletion(engine);
    // the others waited ("deferred") while child 0 computed the shared blocks
    expect(steps[0]!.numWaitingDeferred).toBe(3);
    expect(steps[steps.length - 1]!.numWaitingDeferred).toBe(0);
    // child 0 computes 70 prompt tokens; the others reuse 4 full blocks and compute 6
    expect([0, 1, 2, 3].map((i) => outputs.get(`${i}_parent`)!.numCachedTokens)).toEqual([0, 64, 64, 64]);
    expect(runner.numTokensComputed).toBe(70 + 3 * 6 + 4 * 4);
  });
});

describe("preemption", () => {
  test("a KV cache too small for all running requests preempts and still gives the same greedy output", async () => {
    const reqs = [0, 1, 2, 3, 4, 5].map((i) => request(`q${i}`, prompt(20 + 7 * i, 30 + i), { maxTokens: 40 }));
    const alone = await Promise.all(reqs.map((r) => runAlone(r)));
    // each needs up to 6 blocks; 12 blocks cannot hold 6 running requests at once
    const { engine } = makeEngine({ numBlocks: 12, blockSize: 16, maxNumBatchedTokens: 32 });
    for (const r of reqs) expect(engine.addRequest(r)).toBeNull();
    const { outputs, steps } = await runToCompletion(engine);
    expect(steps.reduce((s, x) => s + x.numPreempted, 0)).toBeGreaterThan(0);
    reqs.forEach((r, i) => expect(outputs.get(r.requestId)!.tokens).toEqual(alone[i]!.tokens));
    // each request's prompt was looked up in the prefix cache once for the metrics, however long it waited or
    // however often it was preempted
    expect(steps.reduce((s, x) => s + x.prefixCacheQueries, 0)).toBe(reqs.reduce((s, r) => s + r.promptTokenIds.length, 0));
    expect(engine.kv.pool.numFreeBlocks).toBe(12);
  });

  test("a request that can never fit is refused with a clear error", () => {
    const { engine } = makeEngine({ numBlocks: 2, blockSize: 16 });
    const e = engine.addRequest(request("big", prompt(40, 1), { maxTokens: 10 }));
    expect(e?.code).toBe("kv_cache_too_small");
    expect(engine.hasWork()).toBe(false);
  });

  test("a prompt longer than max-model-len is refused with vLLM's message", () => {
    const { engine } = makeEngine({ maxModelLen: 32 });
    expect(engine.addRequest(request("long", prompt(40, 1)))?.message).toContain("is longer than the maximum model length of 32");
  });
});

describe("abort", () => {
  test("after 1000 requests aborted at random points every block is free and the queues are empty", async () => {
    const { engine } = makeEngine({ numBlocks: 64, blockSize: 8, maxNumSeqs: 8, maxNumBatchedTokens: 48 });
    const random = rng(12345);
    const rand = (n: number): number => randomInt(random, n);
    const live = new Set<string>();
    const shared = prompt(24, 5);
    let added = 0;
    let aborted = 0;
    while (aborted < 1000) {
      if (rand(3) > 0) {
        const id = `a${added++}`;
        const p = rand(2) ? [...shared, ...prompt(1 + rand(30), added)] : prompt(1 + rand(50), added);
        if (engine.addRequest(request(id, p, { maxTokens: 100, temperature: rand(2) })) === null) live.add(id);
        else throw new Error(`request ${id} refused`);
      }
      if (rand(2)) {
        const r = await engine.step();
        for (const d of r?.deltas ?? []) if (d.finishReason) live.delete(d.requestId);
      }
      if (live.size > 0 && rand(2)) {
        const victim = [...live][rand(live.size)]!;
        engine.abort([victim]);
        live.delete(victim);
        aborted++;
      }
    }
    engine.abort([...live]);
    expect(aborted).toBe(1000);
    expect(added).toBeGreaterThan(1000);
    expect(engine.numRunning).toBe(0);
    expect(engine.numWaiting).toBe(0);
    expect(engine.kv.pool.numFreeBlocks).toBe(64);
    expect(engine.kv.usage()).toBe(0);
    expect(engine.idleStats()).toMatchObject({ batchSize: 0, numRunning: 0, numWaiting: 0, kvCacheUsage: 0, numGenerationTokens: 0 });
  });
});

describe("KV handoff (pd pipelines)", () => {
  test("a prefill engine exports the prompt's blocks; a decode engine imports them and continues with the same greedy output", async () => {
    const p = prompt(45, 21);
    const single = await runAlone(request("s", p, { maxTokens: 10 }));
    const { engine: prefill } = makeEngine();
    prefill.addRequest({ ...request("pd", p, { maxTokens: 1 }), exportKv: true });
    const first = (await runToCompletion(prefill)).outputs.get("pd")!;
    const kv = first.deltas[first.deltas.length - 1]!.kv!;
    expect(kv.numTokens).toBe(45);
    expect(prefill.kv.pool.numFreeBlocks).toBe(256);
    const { engine: decode, runner } = makeEngine();
    expect(decode.addRequest({ ...request("pd", [...p, ...first.tokens], { maxTokens: 9 }), importKv: kv })).toBeNull();
    const rest = (await runToCompletion(decode)).outputs.get("pd")!;
    expect([...first.tokens, ...rest.tokens]).toEqual(single.tokens);
    expect(runner.numTokensComputed).toBe(1 + 8); // only the handed-over first token, then one per decode step
  });

  test("a handoff with another block size is refused", () => {
    const { engine } = makeEngine({ blockSize: 16 });
    const e = engine.addRequest({ ...request("x", prompt(10, 1)), importKv: { numTokens: 8, blockSize: 8, data: new Uint8Array(32) } });
    expect(e?.message).toBe("KV handoff has block size 8, this engine uses 16");
  });
});

describe("reset_prefix_cache", () => {
  test("forgets the cached prefixes: the next repeat is a miss; refused while a request holds blocks unless it is preempted", async () => {
    const { engine } = makeEngine({ blockSize: 16 });
    const shared = prompt(64, 11);
    engine.addRequest(request("a", shared, { maxTokens: 4 }));
    const alone = (await runToCompletion(engine)).outputs.get("a")!;
    expect(engine.resetPrefixCache(false)).toBe(true);
    engine.addRequest(request("b", shared, { maxTokens: 4 }));
    const { outputs, steps } = await runToCompletion(engine);
    expect(steps[0]!.prefixCacheHits).toBe(0);
    expect(outputs.get("b")!.tokens).toEqual(alone.tokens);

    // a running request holds its blocks: the reset fails (vLLM's False) until reset_running_requests preempts it
    engine.addRequest(request("c", shared, { maxTokens: 12 }));
    const first = await engine.step();
    expect(first).not.toBeNull();
    expect(engine.resetPrefixCache(false)).toBe(false);
    expect(engine.resetPrefixCache(true)).toBe(true);
    expect(engine.numRunning).toBe(0);
    const rest = await runToCompletion(engine);
    const tokens = [...first!.deltas.filter((d) => d.requestId === "c").flatMap((d) => d.newTokenIds), ...rest.outputs.get("c")!.tokens];
    const again = await runAlone(request("c2", shared, { maxTokens: 12 }), { blockSize: 16 });
    expect(tokens).toEqual(again.tokens);
  });
});
