/** The bounded response store: LRU by count and by bytes, running background responses never evicted. */
import { describe, expect, test } from "bun:test";
import { newStoredResponse, ResponseStore, RESPONSE_STORE_LIMITS } from "../../src/server/openai/responses/response-store.ts";

const entry = (id: string, text = "x", background = false) => newStoredResponse(id, { id, text }, [{ role: "user", content: text }], background);

describe("ResponseStore", () => {
  test("the defaults are 1024 responses and 64 MiB", () => {
    expect(RESPONSE_STORE_LIMITS).toEqual({ maxEntries: 1024, maxBytes: 64 * 1024 * 1024 });
  });

  test("over the count, the least recently used goes first (a get counts as a use)", () => {
    const store = new ResponseStore({ maxEntries: 2, maxBytes: 1 << 20 });
    store.put(entry("a"));
    store.put(entry("b"));
    expect(store.get("a")).toBeDefined();
    store.put(entry("c"));
    expect(store.get("b")).toBeUndefined();
    expect(store.get("a")).toBeDefined();
    expect(store.get("c")).toBeDefined();
    expect(store.size).toBe(2);
  });

  test("over the bytes, old entries go until the total fits; the byte count follows", () => {
    const store = new ResponseStore({ maxEntries: 100, maxBytes: 1000 });
    for (const id of ["a", "b", "c"]) store.put(entry(id, "y".repeat(200)));
    expect(store.size).toBe(2);
    expect(store.get("a")).toBeUndefined();
    expect(store.bytes).toBeLessThanOrEqual(1000);
    expect(store.bytes).toBeGreaterThan(800);
    store.delete("b");
    store.delete("c");
    expect(store.bytes).toBe(0);
  });

  test("a running background response is not evicted; once done it is measured and can go", () => {
    const store = new ResponseStore({ maxEntries: 1, maxBytes: 1 << 20 });
    const running = entry("bg", "z", true);
    store.put(running);
    store.put(entry("a"));
    expect(store.get("bg")).toBe(running);
    expect(store.get("a")).toBeUndefined();
    running.done = true;
    store.measure(running);
    expect(store.bytes).toBeGreaterThan(0);
    store.put(entry("b"));
    expect(store.get("bg")).toBeUndefined();
  });
});
