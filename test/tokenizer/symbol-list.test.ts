/** SymbolList: one symbol per code point (surrogate pairs stay whole), O(1) merges of neighbours. */
import { expect, test } from "bun:test";
import { SymbolList } from "../../src/tokenizer/symbol-list.ts";

test("one symbol per code point, merges join neighbours and unlink the right one", () => {
  const s = new SymbolList("a😀bc");
  expect(s.count).toBe(4);
  expect([...s.pieces()]).toEqual(["a", "😀", "b", "c"]);
  s.merge(2, 3);
  s.merge(0, 1);
  expect([...s.pieces()]).toEqual(["a😀", "bc"]);
  expect(s.lengths).toEqual([3, 0, 2, 0]);
  expect(s.prev[2]).toBe(0);
  s.merge(0, 2);
  expect([...s.pieces()]).toEqual(["a😀bc"]);
  expect(s.next[0]).toBe(-1);
});

test("the empty text has no symbols", () => {
  expect([...new SymbolList("").pieces()]).toEqual([]);
});
