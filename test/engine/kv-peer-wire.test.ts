/** The KV side channel's frames (src/engine/kv-connector/peer-wire.ts): any split of the byte stream gives the same frames. */
import { describe, expect, test } from "bun:test";
import { blocksHeader, controlFrame, FRAME, FrameReader } from "../../src/engine/kv-connector/peer-wire.ts";
import { randomInt, rng } from "../helpers/prng.ts";

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}

describe("KV side-channel frames", () => {
  const blocks = Uint8Array.from({ length: 3 * 40 }, (_, i) => (i * 7) & 0xff); // 3 blocks of 40 bytes
  const stream = concat([
    controlFrame(FRAME.read, { request_id: "r1", block_ids: [4, 5, 6] }),
    blocksHeader(0, 2, 80), blocks.subarray(0, 80),
    blocksHeader(2, 1, 40), blocks.subarray(80),
    controlFrame(FRAME.done, { request_id: "r1" }),
  ]);

  test("frames come out whole and in order however the stream is cut", () => {
    const random = rng(5);
    for (let trial = 0; trial < 50; trial++) {
      const reader = new FrameReader(1024);
      const frames = [];
      for (let at = 0; at < stream.length; ) {
        const n = 1 + randomInt(random, 30);
        const r = reader.push(stream.slice(at, at + n));
        if (!r.ok) throw new Error(r.error);
        frames.push(...r.value);
        at += n;
      }
      expect(frames.map((f) => f.type)).toEqual([FRAME.read, FRAME.blocks, FRAME.blocks, FRAME.done]);
      expect(frames[0]).toEqual({ type: FRAME.read, json: { request_id: "r1", block_ids: [4, 5, 6] } });
      const b = frames.filter((f) => f.type === FRAME.blocks);
      expect(b.map((f) => [f.firstBlock, f.numBlocks])).toEqual([[0, 2], [2, 1]]);
      expect(concat(b.map((f) => f.data))).toEqual(blocks);
    }
  });

  test("a frame over the limit, an unknown type or a control frame that is not JSON is an error, not a hang", () => {
    expect(new FrameReader(16).push(concat([blocksHeader(0, 1, 40), blocks.subarray(0, 40)])).ok).toBe(false);
    const bad = controlFrame(FRAME.done, {});
    bad[4] = 99;
    expect(new FrameReader(16).push(bad)).toEqual({ ok: false, error: "KV side channel: unknown frame type 99" });
    const notJson = controlFrame(FRAME.error, {});
    notJson[5] = 0x7b; notJson[6] = 0x7b;
    expect(new FrameReader(16).push(notJson).ok).toBe(false);
  });
});
