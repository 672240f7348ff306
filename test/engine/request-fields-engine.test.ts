/**
 * Request fields whose effect lives in the engine, on the fake model: cache_salt separates prefix-cache namespaces,
 * priority orders the queue under --scheduling-policy priority (and is refused under fcfs), allowed_token_ids and
 * bad_words restrict what is sampled.
 */
import { describe, expect, test } from "bun:test";
import { EngineCore } from "../../src/engine/engine-core.ts";
import { FakeRunner } from "./fake-runner.ts";
import { engineConfig, makeEngine, prompt, request, runToCompletion } from "./helpers.ts";

describe("engine-side request fields", () => {
  test("cache_salt: the same prompt reuses cached blocks only under the same salt", async () => {
    const p = prompt(48, 3);
    const { engine } = makeEngine();
    engine.addRequest(request("a", p, { maxTokens: 2, cacheSalt: "t1" }));
    await runToCompletion(engine);
    engine.addRequest(request("same", p, { maxTokens: 2, cacheSalt: "t1" }));
    engine.addRequest(request("other", p, { maxTokens: 2, cacheSalt: "t2" }));
    engine.addRequest(request("none", p, { maxTokens: 2 }));
    const { outputs } = await runToCompletion(engine);
    expect(outputs.get("same")!.numCachedTokens).toBe(32);
    expect(outputs.get("other")!.numCachedTokens).toBe(0);
    expect(outputs.get("none")!.numCachedTokens).toBe(0);
    // the salt changes which blocks are shared, never the tokens
    expect(outputs.get("other")!.tokens).toEqual(outputs.get("same")!.tokens);
  });

  test("priority: lower first under --scheduling-policy priority; refused under fcfs", async () => {
    const engine = new EngineCore(new FakeRunner(), { ...engineConfig({ maxNumSeqs: 1 }), schedulingPolicy: "priority" }, 0, () => performance.now(), 1);
    engine.addRequest(request("late-but-urgent-is-second", prompt(8, 1), { maxTokens: 1, priority: 5 }));
    engine.addRequest(request("urgent", prompt(8, 2), { maxTokens: 1, priority: -1 }));
    const first = await engine.step();
    expect(first!.deltas.map((d) => d.requestId)).toEqual(["urgent"]);
    const { engine: fcfs } = makeEngine();
    expect(fcfs.addRequest(request("p", prompt(8, 1), { priority: 1 }))?.code).toBe("invalid_priority");
  });

  test("allowed_token_ids and bad_words restrict sampling", async () => {
    const { engine } = makeEngine();
    engine.addRequest(request("allowed", prompt(8, 4), { maxTokens: 12, temperature: 1, seed: 1, allowedTokenIds: [10, 20, 30] }));
    const free = (await (async () => { const e = makeEngine().engine; e.addRequest(request("free", prompt(8, 4), { maxTokens: 12 })); return (await runToCompletion(e)).outputs.get("free")!.tokens; })());
    // ban the greedy run's first two tokens as a two-token word, and its third token alone
    engine.addRequest(request("banned", prompt(8, 4), { maxTokens: 12, badWordsTokenIds: [[free[0]!, free[1]!], [free[2]!]] }));
    const { outputs } = await runToCompletion(engine);
    for (const t of outputs.get("allowed")!.tokens) expect([10, 20, 30]).toContain(t);
    const banned = outputs.get("banned")!.tokens;
    expect(banned).not.toContain(free[2]!);
    for (let i = 1; i < banned.length; i++) expect([banned[i - 1], banned[i]]).not.toEqual([free[0], free[1]]);
    expect(banned[0]).toBe(free[0]!); // a banned word's first token alone is fine
  });
});
