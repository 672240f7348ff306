/**
 * Which unloaded models keep their front end: each for its keep-alive after the unload (negative: no time limit), at
 * most `maxKept` of them (the oldest released first), none once the model loads again.
 */
import { describe, expect, test } from "bun:test";
import { FrontEndKeeper } from "../../src/server/front-end-keeper.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("front-end keeper", () => {
  test("a kept front end is released after its keep-alive, unless its model loads first", async () => {
    const keeper = new FrontEndKeeper(4);
    const released: string[] = [];
    keeper.keep("a", 30, () => released.push("a"));
    keeper.keep("b", 30, () => released.push("b"));
    keeper.keep("c", -1, () => released.push("c"));
    expect(keeper.take("b")).toBe(true);
    expect(keeper.take("b")).toBe(false);
    await sleep(80);
    expect(released).toEqual(["a"]);
    expect(keeper.names()).toEqual(["c"]);
  });

  test("past maxKept the oldest is released; a model kept again moves to the newest", () => {
    const keeper = new FrontEndKeeper(2);
    const released: string[] = [];
    for (const name of ["a", "b"]) keeper.keep(name, -1, () => released.push(name));
    keeper.keep("a", -1, () => released.push("a2"));
    keeper.keep("c", -1, () => released.push("c"));
    expect(released).toEqual(["b"]);
    expect(keeper.names()).toEqual(["a", "c"]);
  });

  test("maxKept 0 keeps nothing", () => {
    const keeper = new FrontEndKeeper(0);
    let released = 0;
    keeper.keep("a", -1, () => released++);
    expect(released).toBe(1);
    expect(keeper.take("a")).toBe(false);
  });
});
