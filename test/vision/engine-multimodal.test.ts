/**
 * The engine side of images: a request's media items keep whole across chunked-prefill steps when they attend ahead
 * (vLLM's disable_chunked_mm_input), and key the prefix cache by their content hash (vLLM's mm extra keys), since
 * every placeholder row is the same token.
 */
import { describe, expect, test } from "bun:test";
import type { EngineRequest, MultimodalInput } from "../../src/engine/protocol.ts";
import { RequestState } from "../../src/engine/request.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../../src/engine/sampling-params.ts";

const item = (identifier: string, offset: number, length: number, attendAhead = true): MultimodalInput =>
  ({ identifier, offset, length, embeddings: new Float32Array(length * 4), attendAhead });
const request = (multimodal: MultimodalInput[], prompt = Array.from({ length: 40 }, () => 7)): RequestState => {
  const r: EngineRequest = { requestId: "r", promptTokenIds: prompt, sampling: { ...DEFAULT_SAMPLING_PARAMS, maxTokens: 4 }, arrivalMs: 0, multimodal };
  return new RequestState(r, 128, 0, 1);
};

describe("media items in the engine", () => {
  test("a chunk that would end inside an item that attends ahead stops before it; one that holds it whole is kept", () => {
    const r = request([item("a", 10, 18)]);
    expect(r.keepItemsWhole(0, 16, 64)).toBe(10); // would split [10, 28): stop at 10
    expect(r.keepItemsWhole(0, 28, 64)).toBe(28); // holds it whole
    expect(r.keepItemsWhole(10, 8, 64)).toBe(0); // starts at the item with too little budget left: wait for the next step
    expect(r.keepItemsWhole(10, 8, 8)).toBe(8); // a step could never hold it: split rather than wait forever
    expect(r.keepItemsWhole(30, 5, 64)).toBe(5); // after it
    expect(request([item("a", 10, 18, false)]).keepItemsWhole(0, 16, 64)).toBe(16); // a causal item may be split
  });

  test("the prefix-cache keys of the blocks an item covers carry its hash and offset; identical tokens, other image: other hashes", () => {
    const a = request([item("hash-a", 10, 18)]);
    const b = request([item("hash-b", 10, 18)]);
    const bs = 8;
    expect(a.blockExtraKeys(0, bs)).toBeNull(); // [0, 8) is before the item
    expect(a.blockExtraKeys(1, bs)).toEqual([["hash-a", 2]]); // [8, 16): the item starts 2 into the block
    expect(a.blockExtraKeys(3, bs)).toEqual([["hash-a", -14]]);
    expect(a.blockHash(0, bs)).toBe(b.blockHash(0, bs)!);
    expect(a.blockHash(1, bs)).not.toBe(b.blockHash(1, bs)!);
    expect(a.blockHash(4, bs)).not.toBe(b.blockHash(4, bs)!); // chained: everything after the image differs too
  });
});
