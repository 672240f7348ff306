/** The engine-side event list builds records as vLLM's BlockPool / KVCacheManager do, in the order they happened. */
import { describe, expect, test } from "bun:test";
import { BlockHasher, externalBlockHash, noneHash } from "../../src/kv-events/block-hash.ts";
import { KvEventQueue } from "../../src/kv-events/kv-event-queue.ts";
import { encodeKvEventBatch } from "../../src/kv-events/kv-events.ts";

const hasher = new BlockHasher("sha256", noneHash("sha256", "0"));
const tokens = Array.from({ length: 32 }, (_, i) => i + 100);
const [h0, h1] = hasher.hashFullBlocks(tokens, 16, []) as [Uint8Array, Uint8Array];

describe("KvEventQueue", () => {
  test("stored blocks: external hashes, parent, per-block extra keys, the group's spec, GPU medium", () => {
    const q = new KvEventQueue(true, [{ kind: "full_attention", slidingWindow: null }]);
    q.blocksStored({ hashes: [h1], parent: h0, tokenIds: tokens.slice(16), blockSize: 16, lora: { id: 2, name: "l" }, extraKeys: [["l"]], groupIdx: 0 });
    expect(q.take()).toEqual([{
      type: "BlockStored", blockHashes: [externalBlockHash(h1, true)], parentBlockHash: externalBlockHash(h0, true), tokenIds: tokens.slice(16),
      blockSize: 16, loraId: 2, medium: "GPU", loraName: "l", extraKeys: [["l"]], groupIdx: 0, kvCacheSpecKind: "full_attention",
      kvCacheSpecSlidingWindow: null, locality: null,
    }]);
    expect(q.take()).toEqual([]);
  });

  test("evict then store again keeps that order; clear and tier removals are recorded as they come", () => {
    const q = new KvEventQueue(false, [{ kind: "sliding_window", slidingWindow: 512 }]);
    q.blocksStored({ hashes: [h0, h1], parent: null, tokenIds: tokens, blockSize: 16, lora: null, extraKeys: [null, null], groupIdx: 0 });
    q.blockEvicted(h0, 0);
    q.blocksStored({ hashes: [h0], parent: null, tokenIds: tokens.slice(0, 16), blockSize: 16, lora: null, extraKeys: [null], groupIdx: 0, medium: "CPU" });
    q.tierBlocksRemoved([h0, h1], "STORAGE", 0);
    q.allCleared();
    const events = q.take();
    expect(events.map((e) => [e.type, "medium" in e ? e.medium : null])).toEqual([
      ["BlockStored", "GPU"], ["BlockRemoved", "GPU"], ["BlockStored", "CPU"], ["BlockRemoved", "STORAGE"], ["AllBlocksCleared", null],
    ]);
    // bytes hashes when int hashes are off
    const removed = events[1]!;
    expect(removed.type === "BlockRemoved" && removed.blockHashes).toEqual([h0]);
    // the records encode as they are (the step message carries them to the publisher unchanged)
    expect(encodeKvEventBatch({ ts: 1.25, events, dataParallelRank: 0 })[0]).toBe(0x93);
  });

  test("mismatched token or extra-key counts are bugs", () => {
    const q = new KvEventQueue(true, []);
    expect(() => q.blocksStored({ hashes: [h0], parent: null, tokenIds: tokens, blockSize: 16, lora: null, extraKeys: [null], groupIdx: 0 })).toThrow("token ids");
    expect(() => q.blocksStored({ hashes: [h0], parent: null, tokenIds: tokens.slice(0, 16), blockSize: 16, lora: null, extraKeys: [], groupIdx: 0 })).toThrow("one entry per block");
  });

  test("a group the queue does not know gets no spec fields (vLLM logs and skips it)", () => {
    const q = new KvEventQueue(true, []);
    q.blocksStored({ hashes: [h0], parent: null, tokenIds: tokens.slice(0, 16), blockSize: 16, lora: null, extraKeys: [null], groupIdx: 3 });
    const e = q.take()[0]!;
    expect(e.type === "BlockStored" && [e.kvCacheSpecKind, e.groupIdx]).toEqual([null, 3]);
  });
});
