/**
 * Pooling requests in the engine (vLLM: a pooling request is a prefill whose output is the pooled hidden state), on
 * the fake runner whose hidden state at a position is drawn from the hash of the whole prefix (so any wrong block,
 * position or chunk boundary changes the vector): the embedding is the same alone, in a batch, in prefill chunks and
 * with few KV blocks; the blocks are free once it is out; the rules for prompts, generation requests and prefix
 * caching are vLLM's.
 */
import { describe, expect, test } from "bun:test";
import { resolveEngineConfig, type EngineConfig } from "../../src/engine/engine-sizing.ts";
import type { ResolvedPooler } from "../../src/engine/resolve-pooler.ts";
import type { EngineArgs, EngineRequest } from "../../src/engine/protocol.ts";
import { FakeRunner } from "./fake-runner.ts";
import { makeEngine, prompt, request, runToCompletion } from "./helpers.ts";

const pooler = (poolingType: ResolvedPooler["poolingType"]): ResolvedPooler => ({ poolingType, normalize: true, dimensions: null, hiddenSize: 8, matryoshka: null, source: "gguf" });

function poolingRequest(id: string, ids: number[], normalize = true, dimensions: number | null = null): EngineRequest {
  return { ...request(id, ids), pooling: { normalize, dimensions } };
}

async function embed(config: Partial<EngineConfig>, requests: EngineRequest[]) {
  const { engine } = makeEngine(config);
  for (const r of requests) expect(engine.addRequest(r)).toBeNull();
  const { outputs, steps } = await runToCompletion(engine);
  return { engine, steps, vectors: new Map([...outputs].map(([id, c]) => [id, Array.from(c.deltas.at(-1)!.embedding!)])), outputs };
}

describe.each(["LAST", "MEAN", "CLS"] as const)("%s pooling", (type) => {
  const prompts = [prompt(70, 1), prompt(5, 2), prompt(33, 3), prompt(16, 4)];

  test("the embedding of a prompt does not depend on its batch, its chunks or a preemption; blocks are free after", async () => {
    const alone = await Promise.all(prompts.map((p, i) => embed({ pooler: pooler(type), enablePrefixCaching: false }, [poolingRequest(`r${i}`, p)])));
    const together = await embed({ pooler: pooler(type), enablePrefixCaching: false }, prompts.map((p, i) => poolingRequest(`r${i}`, p)));
    // 8-token budget: the 70-token prompt is pooled over 9 prefill chunks
    const chunked = await embed({ pooler: pooler(type), enablePrefixCaching: false, maxNumBatchedTokens: 8 }, prompts.map((p, i) => poolingRequest(`r${i}`, p)));
    // 6 blocks of 16 for 124 positions: requests wait for blocks (a recompute after a preemption starts the pooler
    // over: test/engine/pooler.test.ts)
    const tight = await embed({ pooler: pooler(type), enablePrefixCaching: false, numBlocks: 6, maxNumBatchedTokens: 32 }, prompts.map((p, i) => poolingRequest(`r${i}`, p)));
    for (let i = 0; i < prompts.length; i++) {
      const v = alone[i]!.vectors.get(`r${i}`)!;
      expect(v).toHaveLength(8);
      expect(Math.hypot(...v)).toBeCloseTo(1, 5);
      expect(together.vectors.get(`r${i}`)).toEqual(v);
      expect(chunked.vectors.get(`r${i}`)).toEqual(v);
      expect(tight.vectors.get(`r${i}`)).toEqual(v);
    }
    for (const run of [together, chunked, tight]) {
      expect(run.engine.kv.usage()).toBe(0);
      for (const c of run.outputs.values()) {
        expect(c.tokens).toEqual([]);
        expect(c.finishReason).toBe("stop");
      }
      // every prompt token computed once per admission, no generation tokens
      expect(run.steps.reduce((n, s) => n + s.numGenerationTokens, 0)).toBe(0);
    }
    expect(together.steps.reduce((n, s) => n + s.numPromptTokens, 0)).toBe(prompts.reduce((n, p) => n + p.length, 0));
    // different prompts, different vectors
    expect(alone[0]!.vectors.get("r0")).not.toEqual(alone[1]!.vectors.get("r1"));
  });

  test("normalize false gives the raw pooled state; dimensions keep its first values before normalising", async () => {
    const p = prompts[2]!;
    const { vectors } = await embed({ pooler: pooler(type) }, [poolingRequest("raw", p, false), poolingRequest("unit", p), poolingRequest("cut", p, true, 3)]);
    const raw = vectors.get("raw")!;
    const n = Math.hypot(...raw);
    expect(vectors.get("unit")!).toEqual(raw.map((x) => Math.fround(x / n)));
    const head = raw.slice(0, 3);
    expect(vectors.get("cut")!).toEqual(head.map((x) => Math.fround(x / Math.hypot(...head))));
  });
});

describe("pooling engine rules", () => {
  test("LAST with prefix caching: a repeated prompt hits the cache and pools the same vector", async () => {
    const p = prompt(48, 9);
    const { engine } = makeEngine({ pooler: pooler("LAST") });
    expect(engine.addRequest(poolingRequest("a", p))).toBeNull();
    const first = await runToCompletion(engine);
    expect(engine.addRequest(poolingRequest("b", p))).toBeNull();
    const second = await runToCompletion(engine);
    expect(second.outputs.get("b")!.numCachedTokens).toBe(32);
    expect(second.outputs.get("b")!.deltas.at(-1)!.embedding).toEqual(first.outputs.get("a")!.deltas.at(-1)!.embedding!);
  });

  test("a prompt may fill max_model_len (no output token); longer is vLLM's message; generation is refused", () => {
    const { engine } = makeEngine({ pooler: pooler("MEAN"), maxModelLen: 32 });
    expect(engine.addRequest(poolingRequest("full", prompt(32, 1)))).toBeNull();
    expect(engine.addRequest(poolingRequest("long", prompt(33, 1)))?.message).toBe("This model's maximum context length is 32 tokens. However, you requested 33 tokens in the input for embedding generation. Please reduce the length of the input.");
    expect(engine.addRequest(request("gen", prompt(4, 1)))?.message).toContain("The model does not support Completions API");
    const generative = makeEngine().engine;
    expect(generative.addRequest(poolingRequest("p", prompt(4, 1)))?.message).toBe("The model does not support Embeddings API");
  });

  test("an abort in the middle of a chunked prefill frees its blocks at once", async () => {
    const { engine } = makeEngine({ pooler: pooler("MEAN"), maxNumBatchedTokens: 16, enablePrefixCaching: false });
    expect(engine.addRequest(poolingRequest("a", prompt(100, 1)))).toBeNull();
    await engine.step();
    expect(engine.kv.usage()).toBeGreaterThan(0);
    engine.abort(["a"]);
    expect(engine.kv.usage()).toBe(0);
    expect(engine.hasWork()).toBe(false);
  });

  test("a bidirectional model (gemma-embedding): every prompt in one step, never chunked nor from the prefix cache; max_model_len follows the budget (vLLM without chunked prefill)", async () => {
    const args: EngineArgs = { maxNumSeqs: 4, maxNumBatchedTokens: 64, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: 1 << 20, enablePrefixCaching: true, threads: 1, device: "cpu" };
    const runner = new FakeRunner({ poolingType: "last", bidirectional: true });
    const config = resolveEngineConfig(args, runner, 1 << 30);
    if (!config.ok) throw new Error(config.error);
    expect([config.value.maxModelLen, config.value.enablePrefixCaching, config.value.chunkedPrefill]).toEqual([64, false, false]);
    const explicit = resolveEngineConfig({ ...args, maxModelLen: 128 }, runner, 1 << 30);
    expect(explicit.ok ? "" : explicit.error).toStartWith("max_num_batched_tokens (64) is smaller than max_model_len (128).");
    const generate = resolveEngineConfig({ ...args, runner: "generate" }, runner, 1 << 30);
    expect(generate.ok ? "" : generate.error).toContain("attends bidirectionally, so it only embeds");
    // 50 + 40 + 64 tokens with a budget of 64: one prompt per step, each whole (the fake runner throws on a chunk)
    const prompts = [prompt(50, 1), prompt(40, 2), prompt(64, 3)];
    const { engine } = makeEngine({ ...config.value, pooler: pooler("LAST") }, { poolingType: "last", bidirectional: true });
    for (const [i, p] of prompts.entries()) expect(engine.addRequest(poolingRequest(`b${i}`, p))).toBeNull();
    expect(engine.addRequest(poolingRequest("long", prompt(65, 4)))?.message).toContain("maximum context length is 64 tokens");
    const { outputs, steps } = await runToCompletion(engine);
    expect(steps.map((s) => s.numPromptTokens).filter((n) => n > 0)).toEqual([50, 40, 64]);
    expect([...outputs.keys()].sort()).toEqual(["b0", "b1", "b2"]);
    expect(engine.kv.usage()).toBe(0);
  });

  test("a bidirectional model without --max-num-batched-tokens: the budget becomes max_model_len, so its whole context is served (vLLM SchedulerConfig without chunked prefill); a causal one keeps the default", () => {
    const args: EngineArgs = { maxNumSeqs: 4, maxNumBatchedTokens: 512, maxNumBatchedTokensGiven: false, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: 1 << 22, enablePrefixCaching: true, threads: 1, device: "cpu" };
    const wide = resolveEngineConfig(args, new FakeRunner({ poolingType: "mean", bidirectional: true, contextLength: 2048 }), 1 << 30);
    if (!wide.ok) throw new Error(wide.error);
    expect([wide.value.maxModelLen, wide.value.maxNumBatchedTokens]).toEqual([2048, 2048]);
    const shorter = resolveEngineConfig({ ...args, maxModelLen: 1000 }, new FakeRunner({ poolingType: "mean", bidirectional: true, contextLength: 2048 }), 1 << 30);
    expect(shorter.ok && [shorter.value.maxModelLen, shorter.value.maxNumBatchedTokens]).toEqual([1000, 1000]);
    const causal = resolveEngineConfig(args, new FakeRunner({ poolingType: "mean", contextLength: 2048 }), 1 << 30);
    expect(causal.ok && [causal.value.maxModelLen, causal.value.maxNumBatchedTokens]).toEqual([2048, 512]);
    // given on the command line, the budget stays and caps max_model_len as before
    const given = resolveEngineConfig({ ...args, maxNumBatchedTokensGiven: true }, new FakeRunner({ poolingType: "mean", bidirectional: true, contextLength: 2048 }), 1 << 30);
    expect(given.ok && [given.value.maxModelLen, given.value.maxNumBatchedTokens]).toEqual([512, 512]);
  });

  test("resolveEngineConfig: the GGUF's pooling type makes a pooling engine; MEAN and CLS turn prefix caching off", () => {
    const args: EngineArgs = { maxNumSeqs: 4, maxNumBatchedTokens: 64, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: 1 << 20, enablePrefixCaching: true, threads: 1, device: "cpu" };
    const last = resolveEngineConfig(args, new FakeRunner({ poolingType: "last" }), 1 << 30);
    expect(last.ok && last.value.pooler?.poolingType).toBe("LAST");
    expect(last.ok && last.value.enablePrefixCaching).toBe(true);
    const mean = resolveEngineConfig(args, new FakeRunner({ poolingType: "mean" }), 1 << 30);
    expect(mean.ok && mean.value.enablePrefixCaching).toBe(false);
    const generative = resolveEngineConfig(args, new FakeRunner(), 1 << 30);
    expect(generative.ok && generative.value.pooler).toBeNull();
    const spec = resolveEngineConfig({ ...args, speculativeConfig: { method: "ngram", numSpeculativeTokens: 2 } as never }, new FakeRunner({ poolingType: "last" }), 1 << 30);
    expect(spec.ok ? "" : spec.error).toContain("--speculative-config needs a generative model");
  });
});
