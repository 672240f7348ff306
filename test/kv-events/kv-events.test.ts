/**
 * Event batches encode to the bytes msgspec writes for vLLM's structs (fixtures.json, from make-fixtures.py), and an
 * independent msgpack decoder reads them back as vLLM's consumers do.
 */
import { describe, expect, test } from "bun:test";
import { decode } from "@msgpack/msgpack";
import { encodeKvEventBatch, type KvEventBatch, MEDIUM } from "../../src/kv-events/kv-events.ts";
import fixtures from "./fixtures.json";

const H = [2n ** 64n - 1n, 15760518052499183552n, 7n, 2n ** 32n, 2n ** 53n + 1n] as const;

/** The same batches make-fixtures.py builds with msgspec. */
const BATCHES: Record<string, KvEventBatch> = {
  "stored as the primary pool emits it": {
    ts: 1789095808.83, dataParallelRank: 0,
    events: [{
      type: "BlockStored", blockHashes: [H[1], H[0]], parentBlockHash: null, tokenIds: Array.from({ length: 32 }, (_, i) => i),
      blockSize: 16, loraId: null, medium: MEDIUM.primary, loraName: null, extraKeys: [null, null], groupIdx: 0, kvCacheSpecKind: "full_attention",
    }],
  },
  "stored with lora, parent, offload tier, locality": {
    ts: 1.5, dataParallelRank: 2,
    events: [{
      type: "BlockStored", blockHashes: [H[2], H[3], H[4]], parentBlockHash: H[1], tokenIds: [1, 200, 70000], blockSize: 1, loraId: 3,
      medium: MEDIUM.cpu, loraName: "sql-lora", extraKeys: [["sql-lora"], ["sql-lora", ["img", -2]], null], groupIdx: 1,
      kvCacheSpecKind: "sliding_window", kvCacheSpecSlidingWindow: 4096, locality: "LOCAL",
    }],
  },
  "removed and cleared": {
    ts: 1700000000.0, dataParallelRank: 0,
    events: [
      { type: "BlockRemoved", blockHashes: [H[0]], medium: MEDIUM.primary, groupIdx: 0 },
      { type: "BlockRemoved", blockHashes: [H[2], H[3]], medium: MEDIUM.storage },
      { type: "AllBlocksCleared" },
    ],
  },
  "byte hashes": {
    ts: 0.25, dataParallelRank: 0,
    events: [{
      type: "BlockStored", blockHashes: [Uint8Array.from({ length: 32 }, (_, i) => i)], parentBlockHash: new Uint8Array(32), tokenIds: [],
      blockSize: 0, loraId: null, medium: null, loraName: null, groupIdx: 0,
    }],
  },
  "no rank": { ts: 2.0, dataParallelRank: null, events: [{ type: "AllBlocksCleared" }] },
};

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

describe("msgpack bytes equal msgspec's", () => {
  test("every fixture batch has a TS twin", () => {
    expect(Object.keys(BATCHES).sort()).toEqual(Object.keys(fixtures.batches).sort());
  });

  test.each(Object.entries(BATCHES))("%s", (name, batch) => {
    expect(hex(encodeKvEventBatch(batch))).toBe((fixtures.batches as Record<string, string>)[name]!);
  });
});

describe("decoded by another msgpack implementation", () => {
  test("the batch is [ts, events, rank]; events are maps with type first and defaults left out", () => {
    const bytes = encodeKvEventBatch(BATCHES["stored with lora, parent, offload tier, locality"]!);
    const [ts, events, rank] = decode(bytes, { useBigInt64: true }) as [number, Record<string, unknown>[], bigint | number];
    expect(ts).toBe(1.5);
    expect(Number(rank)).toBe(2);
    const e = events[0]!;
    expect(Object.keys(e)).toEqual([
      "type", "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys",
      "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window", "locality",
    ]);
    expect((e["block_hashes"] as unknown[]).map((h) => BigInt(h as number))).toEqual([H[2], H[3], H[4]]);
    expect(e["extra_keys"]).toEqual([["sql-lora"], ["sql-lora", ["img", -2]], null]);
  });

  test("a removal without group_idx has only type, block_hashes, medium", () => {
    const bytes = encodeKvEventBatch({ ts: 3.25, dataParallelRank: 0, events: [{ type: "BlockRemoved", blockHashes: [5n], medium: "GPU" }] });
    const [, events] = decode(bytes) as [number, Record<string, unknown>[]];
    expect(events[0]).toEqual({ type: "BlockRemoved", block_hashes: [5], medium: "GPU" });
  });

  test("ts stays a float64 even when it is a whole number (a Python float)", () => {
    const bytes = encodeKvEventBatch({ ts: 1700000000, dataParallelRank: 0, events: [] });
    expect(bytes[1]).toBe(0xcb);
    expect(hex(bytes)).toBe("93" + "cb41d954fc40000000" + "90" + "00");
  });

  test("hashes take msgpack's shortest int form, as msgspec writes Python ints", () => {
    const enc = (h: bigint): string => hex(encodeKvEventBatch({ ts: 0.5, dataParallelRank: 0, events: [{ type: "BlockRemoved", blockHashes: [h], medium: null }] }));
    expect(enc(7n)).toContain("91" + "07");
    expect(enc(300n)).toContain("91" + "cd012c");
    expect(enc(2n ** 32n - 1n)).toContain("91" + "ceffffffff");
    expect(enc(2n ** 32n)).toContain("91" + "cf0000000100000000");
  });

  test("a non-integer token id is a bug, not a float on the wire", () => {
    expect(() => encodeKvEventBatch({
      ts: 1.5, dataParallelRank: 0,
      events: [{ type: "BlockStored", blockHashes: [], parentBlockHash: null, tokenIds: [1.5], blockSize: 1, loraId: null, medium: null, loraName: null }],
    })).toThrow("not an integer");
  });
});
