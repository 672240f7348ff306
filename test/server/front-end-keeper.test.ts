/**
 * Which unloaded models keep their front end: at most `maxKept` of them (the oldest released first), none once the
 * model loads again, and none after releaseAll (no model loaded).
 */
import { describe, expect, test } from "bun:test";
import { FrontEndKeeper } from "../../src/server/front-end-keeper.ts";

describe("front-end keeper", () => {
  test("past maxKept the oldest is released; a model kept again moves to the newest; a load takes its own back", () => {
    const keeper = new FrontEndKeeper(2);
    const released: string[] = [];
    for (const name of ["a", "b"]) keeper.keep(name, () => released.push(name));
    keeper.keep("a", () => released.push("a2"));
    keeper.keep("c", () => released.push("c"));
    expect(released).toEqual(["b"]);
    expect(keeper.names()).toEqual(["a", "c"]);
    expect(keeper.take("c")).toBe(true);
    expect(keeper.take("c")).toBe(false);
    expect(keeper.names()).toEqual(["a"]);
    expect(released).toEqual(["b"]);
  });

  test("releaseAll releases every kept front end once", () => {
    const keeper = new FrontEndKeeper(3);
    const released: string[] = [];
    for (const name of ["a", "b", "c"]) keeper.keep(name, () => released.push(name));
    keeper.releaseAll();
    keeper.releaseAll();
    expect(released).toEqual(["a", "b", "c"]);
    expect(keeper.names()).toEqual([]);
  });

  test("maxKept 0 keeps nothing", () => {
    const keeper = new FrontEndKeeper(0);
    let released = 0;
    keeper.keep("a", () => released++);
    expect(released).toBe(1);
    expect(keeper.take("a")).toBe(false);
  });
});
