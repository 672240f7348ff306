// n > 1 bookkeeping (vLLM parallel_sampling.py ParentRequest): child ids and seeds, and the parent's figures handed on
// once, with the child that finishes it.
import { describe, expect, test } from "bun:test";
import { DEFAULT_SAMPLING_PARAMS } from "../../src/engine/sampling-params.ts";
import { childRequestIds, childSampling, ParentRequestCounter } from "../../src/frontend/parallel-sampling.ts";

describe("parallel sampling", () => {
  test("children are `${index}_${id}` with seed + index; n = 1 keeps the request's own id and params", () => {
    expect(childRequestIds("cmpl-1", 3)).toEqual(["0_cmpl-1", "1_cmpl-1", "2_cmpl-1"]);
    expect(childRequestIds("cmpl-1", 1)).toEqual(["cmpl-1"]);
    const parent = { ...DEFAULT_SAMPLING_PARAMS, n: 3, seed: 10 };
    expect([0, 1, 2].map((i) => childSampling(parent, i)).map((s) => [s.n, s.seed])).toEqual([[1, 10], [1, 11], [1, 12]]);
    expect(childSampling({ ...parent, seed: null }, 2).seed).toBeNull();
    const single = { ...DEFAULT_SAMPLING_PARAMS, n: 1, seed: 5 };
    expect(childSampling(single, 0)).toBe(single);
  });

  test("the parent is reported once, by its last child, with the longest child's tokens", () => {
    const counter = new ParentRequestCounter(3);
    expect(counter.childFinished(3, false)).toBeNull();
    expect(counter.childFinished(9, false)).toBeNull();
    expect(counter.childFinished(5, false)).toEqual({ n: 3, maxNumGenerationTokens: 9 });
  });

  test("a child the client abandoned: the parent is never reported; n = 1 has no parent", () => {
    const counter = new ParentRequestCounter(2);
    expect(counter.childFinished(4, false)).toBeNull();
    expect(counter.childFinished(1, true)).toBeNull();
    expect(new ParentRequestCounter(1).childFinished(7, false)).toBeNull();
  });
});
