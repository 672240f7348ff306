/**
 * KV cache events from the engine (vLLM BlockPool / KVCacheManager events) with the fake runner: newly full blocks are
 * BlockStored with vLLM's hashes, a chained parent and one extra-keys entry per block; a prefix-cache hit announces the
 * cached prefix again without a parent; an evicted cached block is one BlockRemoved; a prefix-cache reset is
 * AllBlocksCleared; groups of the hybrid manager carry their index and spec kind. Off: no events, same outputs.
 */
import { describe, expect, test } from "bun:test";
import { EngineCore } from "../../src/engine/engine-core.ts";
import { KvCacheManager } from "../../src/engine/kv-cache-manager.ts";
import { RequestState } from "../../src/engine/request.ts";
import { BlockHasher, externalBlockHash, noneHash, type PrefixCachingHashAlgo } from "../../src/kv-events/block-hash.ts";
import { KvEventQueue } from "../../src/kv-events/kv-event-queue.ts";
import type { BlockStored, KvCacheEvent } from "../../src/kv-events/kv-events.ts";
import { kvCacheGroups } from "../../src/model/kv-cache-groups.ts";
import { FakeRunner } from "./fake-runner.ts";
import { collect, engineConfig, prompt, request, type Collected } from "./helpers.ts";
import type { EngineConfig } from "../../src/engine/engine-sizing.ts";
import { parseKvTransfer } from "../../src/config/kv-transfer-config.ts";

const BLOCK = 16;

function makeEngine(config: Partial<EngineConfig> = {}, opts: { algo?: PrefixCachingHashAlgo; intHashes?: boolean; events?: boolean } = {}): EngineCore {
  const algo = opts.algo ?? "sha256";
  return new EngineCore(new FakeRunner(), engineConfig(config), 0, () => performance.now(), 1234, {
    blockHashing: { algo, seed: "0" },
    kvEvents: opts.events === false ? null : { intHashes: opts.intHashes ?? true },
  });
}

/** Steps until idle; every step's events, in order, and the outputs. */
async function drive(engine: EngineCore, events: KvCacheEvent[] = [], outputs = new Map<string, Collected>()) {
  for (let i = 0; i < 10_000 && engine.hasWork(); i++) {
    const r = await engine.step();
    if (!r) throw new Error("engine has work but scheduled nothing");
    collect(outputs, r.deltas);
    events.push(...engine.takeKvEvents());
  }
  return { events, outputs };
}

const hashesOf = (algo: PrefixCachingHashAlgo, tokens: readonly number[], extra: (i: number) => (string | null)[] | null = () => null) =>
  new BlockHasher(algo, noneHash(algo, "0")).hashFullBlocks(tokens, BLOCK, [], extra).map((d) => externalBlockHash(d, true));

const stored = (events: readonly KvCacheEvent[]) => events.filter((e): e is BlockStored => e.type === "BlockStored");

describe("engine KV events", () => {
  test("a prompt's full blocks, then the blocks its output fills, with vLLM's hashes and a chained parent", async () => {
    const engine = makeEngine();
    const p = prompt(40, 1);
    engine.addRequest(request("a", p, { maxTokens: 16 }));
    const { events, outputs } = await drive(engine);
    const out = outputs.get("a")!.tokens;
    const all = [...p, ...out];
    const want = hashesOf("sha256", all);
    const s = stored(events);
    expect(s.map((e) => e.blockHashes.length)).toEqual([2, 1]);
    expect(s[0]).toEqual({
      type: "BlockStored", blockHashes: want.slice(0, 2), parentBlockHash: null, tokenIds: p.slice(0, 32), blockSize: BLOCK,
      loraId: null, medium: "GPU", loraName: null, extraKeys: [null, null], groupIdx: 0, kvCacheSpecKind: "full_attention",
      kvCacheSpecSlidingWindow: null, locality: null,
    });
    // block 2 holds the last 8 prompt tokens and the first 8 generated ones
    expect(s[1]!.blockHashes).toEqual([want[2]!]);
    expect(s[1]!.parentBlockHash).toBe(want[1]!);
    expect(s[1]!.tokenIds).toEqual(all.slice(32, 48));
    expect(events.every((e) => e.type === "BlockStored")).toBe(true);
  });

  test("sha256_cbor hashes, and 32-byte digests when int hashes are off", async () => {
    const p = prompt(33, 2);
    const cbor = makeEngine({}, { algo: "sha256_cbor" });
    cbor.addRequest(request("a", p, { maxTokens: 1 }));
    expect(stored((await drive(cbor)).events)[0]!.blockHashes).toEqual(hashesOf("sha256_cbor", p));

    const bytes = makeEngine({}, { intHashes: false });
    bytes.addRequest(request("a", p, { maxTokens: 1 }));
    const first = stored((await drive(bytes)).events)[0]!;
    const digests = new BlockHasher("sha256", noneHash("sha256", "0")).hashFullBlocks(p, BLOCK, []);
    expect(first.blockHashes).toEqual(digests);
  });

  test("the cache salt goes into block 0's hash and its extra keys only", async () => {
    const engine = makeEngine();
    const p = prompt(40, 3);
    engine.addRequest(request("a", p, { maxTokens: 1, cacheSalt: "tenant-1" }));
    const s = stored((await drive(engine)).events)[0]!;
    expect(s.extraKeys).toEqual([["tenant-1"], null]);
    expect(s.blockHashes).toEqual(hashesOf("sha256", p, (i) => (i === 0 ? ["tenant-1"] : null)));
    expect(s.blockHashes[0]).not.toBe(hashesOf("sha256", p)[0]);
  });

  test("a prefix-cache hit announces the whole cached prefix again, with no parent", async () => {
    const engine = makeEngine();
    const p = prompt(50, 4);
    engine.addRequest(request("a", p, { maxTokens: 2 }));
    await drive(engine);
    engine.addRequest(request("b", [...p.slice(0, 48), 7, 8, 9], { maxTokens: 2 }));
    const { events } = await drive(engine);
    const want = hashesOf("sha256", p);
    expect(stored(events)[0]).toMatchObject({ blockHashes: want.slice(0, 3), parentBlockHash: null, tokenIds: p.slice(0, 48), extraKeys: [null, null, null] });
  });

  test("an evicted cached block is one BlockRemoved, and the prefix computed again is stored again", async () => {
    const engine = makeEngine({ numBlocks: 6 });
    const p = prompt(33, 5);
    engine.addRequest(request("a", p, { maxTokens: 2 }));
    const events: KvCacheEvent[] = [];
    await drive(engine, events);
    // 6 blocks of other tokens take every block of the pool
    engine.addRequest(request("b", prompt(80, 6), { maxTokens: 10 }));
    await drive(engine, events);
    engine.addRequest(request("c", p, { maxTokens: 2 }));
    await drive(engine, events);
    const [h0, h1] = hashesOf("sha256", p);
    const removed = events.map((e, i) => [e, i] as const).filter(([e]) => e.type === "BlockRemoved");
    const removedHashes = removed.map(([e]) => (e.type === "BlockRemoved" ? e.blockHashes : []));
    expect(removedHashes.every((h) => h.length === 1)).toBe(true);
    expect(removedHashes.flat()).toEqual(expect.arrayContaining([h0!, h1!]));
    expect(removed[0]![0]).toEqual({ type: "BlockRemoved", blockHashes: [expect.anything()], medium: "GPU", groupIdx: 0 });
    const lastRemovedOfP = Math.max(...removed.filter(([e]) => e.type === "BlockRemoved" && (e.blockHashes[0] === h0 || e.blockHashes[0] === h1)).map(([, i]) => i));
    const restored = events.findIndex((e, i) => i > lastRemovedOfP && e.type === "BlockStored" && e.blockHashes[0] === h0);
    expect(restored).toBeGreaterThan(lastRemovedOfP);
  });

  test("a prefix-cache reset is AllBlocksCleared", async () => {
    const engine = makeEngine();
    engine.kv.pool.resetPrefixCache();
    expect(engine.takeKvEvents()).toEqual([{ type: "AllBlocksCleared" }]);
    expect(engine.takeKvEvents()).toEqual([]);
  });

  test("off: no events, the same output", async () => {
    const p = prompt(40, 8);
    const on = makeEngine();
    const off = makeEngine({}, { events: false });
    on.addRequest(request("a", p, { maxTokens: 20 }));
    off.addRequest(request("a", p, { maxTokens: 20 }));
    const a = await drive(on);
    const b = await drive(off);
    expect(a.events.length).toBeGreaterThan(0);
    expect(b.events).toEqual([]);
    expect(b.outputs.get("a")!.tokens).toEqual(a.outputs.get("a")!.tokens);
  });

  test("the hybrid manager's groups: one event per group with its index and spec kind", () => {
    const groups = kvCacheGroups({ ...new FakeRunner().config, numLayers: 2, slidingLayers: [false, true], slidingWindow: 32 });
    const queue = new KvEventQueue(true, [{ kind: "full_attention", slidingWindow: null }, { kind: "sliding_window", slidingWindow: 32 }]);
    const kv = new KvCacheManager({ numBlocks: 16, blockSize: BLOCK, enablePrefixCaching: true, kvCacheGroups: groups }, queue);
    const hasher = new BlockHasher("sha256", noneHash("sha256", "0"));
    const p = prompt(40, 9);
    const r = new RequestState(request("a", p), 512, 0, 1, hasher);
    expect(kv.allocateSlots(r, 40)).not.toBeNull();
    r.numComputedTokens = 40;
    kv.cacheFullBlocks(r);
    const events = stored(queue.take());
    const want = hashesOf("sha256", p);
    expect(events.map((e) => [e.groupIdx, e.kvCacheSpecKind, e.kvCacheSpecSlidingWindow, e.blockHashes])).toEqual([
      [0, "full_attention", null, want],
      [1, "sliding_window", 32, want],
    ]);
  });

  test("the CPU offload tier: a finished write is BlockStored with medium CPU, a dropped slot BlockRemoved", async () => {
    // the fake runner's blocks are 64 bytes: a tier of 3 slots
    const parsed = parseKvTransfer({
      kvOffloadingSize: null, kvOffloadingBackend: "native", useSimpleKvOffload: false, enablePrefixCaching: true,
      kvTransferConfig: JSON.stringify({ kv_connector: "SimpleCPUOffloadConnector", kv_role: "kv_both", kv_connector_extra_config: { cpu_bytes_to_use: 192 } }),
    }, BLOCK);
    if (!parsed.ok) throw new Error(parsed.error);
    const engine = makeEngine({ kvOffload: parsed.value.config });
    const events: KvCacheEvent[] = [];
    const prompts = [prompt(33, 11), prompt(33, 12), prompt(33, 13)];
    for (const [i, p] of prompts.entries()) {
      engine.addRequest(request(`r${i}`, p, { maxTokens: 3 }));
      await drive(engine, events);
      await engine.offload!.settle();
    }
    // a last request lets the settled writes of the one before reach the event list
    engine.addRequest(request("last", prompt(5, 14), { maxTokens: 1 }));
    await drive(engine, events);
    const cpuStored = events.filter((e): e is BlockStored => e.type === "BlockStored" && e.medium === "CPU");
    expect(cpuStored.length).toBeGreaterThan(0);
    for (const e of cpuStored) expect(e).toMatchObject({ parentBlockHash: null, tokenIds: [], blockSize: BLOCK, groupIdx: 0 });
    const storedHashes = cpuStored.flatMap((e) => e.blockHashes);
    expect(storedHashes).toEqual(expect.arrayContaining(hashesOf("sha256", prompts[0]!)));
    const cpuRemoved = events.map((e, i) => [e, i] as const).filter(([e]) => e.type === "BlockRemoved" && e.medium === "CPU");
    // six blocks through three slots: at least three were dropped, each after it was stored there
    expect(cpuRemoved.length).toBeGreaterThanOrEqual(3);
    for (const [e, i] of cpuRemoved) {
      if (e.type !== "BlockRemoved") continue;
      expect(e.groupIdx).toBe(0);
      expect(events.slice(0, i).some((s) => s.type === "BlockStored" && s.medium === "CPU" && s.blockHashes.includes(e.blockHashes[0]!))).toBe(true);
    }
  });
});
