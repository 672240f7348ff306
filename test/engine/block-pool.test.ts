/** The block pool: LRU reuse of free blocks, cached blocks surviving until reused, reference counts, usage. */
import { describe, expect, test } from "bun:test";
import { BlockPool } from "../../src/engine/block-pool.ts";

describe("block pool", () => {
  test("hands out free blocks least recently freed first and evicts a cached block only when it is reused", () => {
    const pool = new BlockPool(4);
    const [a, b, c, d] = pool.allocate(4)!;
    expect(pool.allocate(1)).toBeNull();
    expect(pool.usage()).toBe(1);
    pool.cache(a!, "hash-a");
    pool.cache(b!, "hash-b");
    pool.release([b!, a!]); // freed in this order: b is reused first
    pool.release([c!, d!]);
    expect(pool.usage()).toBe(0);
    // still cached while free
    expect(pool.lookup("hash-a")).toBe(a!);
    expect(pool.allocate(1)).toEqual([b!]);
    expect(pool.lookup("hash-b")).toBeNull(); // evicted on reuse
    expect(pool.lookup("hash-a")).toBe(a!);
  });

  test("touching a free cached block takes it off the free queue; shared blocks free at the last release", () => {
    const pool = new BlockPool(3);
    const [a] = pool.allocate(1)!;
    pool.cache(a!, "h");
    pool.touch(a!); // a second request shares it
    expect(pool.refCount(a!)).toBe(2);
    pool.release([a!]);
    expect(pool.numFreeBlocks).toBe(2);
    pool.release([a!]);
    expect(pool.numFreeBlocks).toBe(3);
    pool.touch(pool.lookup("h")!); // a prefix-cache hit on a free block
    expect(pool.numFreeBlocks).toBe(2);
    expect(pool.allocate(2)).not.toContain(a!);
    expect(() => pool.release([a!, a!])).toThrow("released more often than taken");
  });
});
