/** The main-thread output processor: incremental text, stop strings across token boundaries, hold-back, flush. */
import { describe, expect, test } from "bun:test";
import { SequenceOutputProcessor } from "../../src/frontend/output-processor.ts";
import type { RequestDelta } from "../../src/engine/protocol.ts";
import { DEFAULT_SAMPLING_PARAMS, type SamplingParams } from "../../src/engine/sampling-params.ts";
import type { FinishReason } from "../../src/engine/stats.ts";
import { createFakeTokenizer } from "../engine/fake-tokenizer.ts";

/** token ids whose fake text is `s` ("a" -> 26, ...) */
const ids = (s: string): number[] => [...s].map((c) => c.charCodeAt(0) - 97 + 26);
const delta = (tokens: number[], finishReason?: FinishReason): RequestDelta => ({
  requestId: "r", newTokenIds: tokens, numCachedTokens: 0, ...(finishReason ? { finishReason, stopReason: null } : {}),
  times: { arrivalMs: 0, queuedMs: null, scheduledMs: null, firstTokenMs: null, lastTokenMs: null },
});
const processor = (p: Partial<SamplingParams>) => new SequenceOutputProcessor(createFakeTokenizer(), 0, { ...DEFAULT_SAMPLING_PARAMS, ...p });

describe("output processor", () => {
  test("streams text deltas that add up to the full text", () => {
    const proc = processor({});
    const parts = ["hel", "lo", " ", "wor", "ld"].filter((s) => s !== " ").map((s) => proc.process(delta(ids(s))).output.textDelta);
    expect(parts.join("")).toBe("helloworld");
  });

  test("a stop string split across tokens ends the sequence, truncates it and asks for an engine abort", () => {
    const proc = processor({ stop: ["xyz"] });
    const out: string[] = [];
    out.push(proc.process(delta(ids("abcx"))).output.textDelta);
    out.push(proc.process(delta(ids("y"))).output.textDelta);
    const last = proc.process(delta(ids("zqq")));
    out.push(last.output.textDelta);
    expect(out.join("")).toBe("abc");
    // the last 2 characters are held back each time: they could be the start of "xyz"
    expect(out.slice(0, 2)).toEqual(["ab", "c"]);
    expect(last.output.finishReason).toBe("stop");
    expect(last.output.stopReason).toBe("xyz");
    expect(last.abortEngine).toBe(true);
  });

  test("include_stop_str_in_output keeps the stop string and holds nothing back", () => {
    const proc = processor({ stop: ["xyz"], includeStopStrInOutput: true });
    expect(proc.process(delta(ids("abx"))).output.textDelta).toBe("abx");
    const last = proc.process(delta(ids("yzq")));
    expect(last.output.textDelta).toBe("yz");
    expect(last.output.finishReason).toBe("stop");
  });

  test("the earliest of several stop strings wins; held-back text is released at the engine's finish", () => {
    const proc = processor({ stop: ["long-stop", "cd"] });
    const a = proc.process(delta(ids("abcdef")));
    expect(a.output.textDelta).toBe("ab");
    expect(a.output.stopReason).toBe("cd");
    const held = processor({ stop: ["qqq"] });
    expect(held.process(delta(ids("abq"))).output.textDelta).toBe("a");
    const end = held.process(delta(ids("r"), "length"));
    expect(end.output.textDelta).toBe("bqr");
    expect(end.output.finishReason).toBe("length");
    expect(end.abortEngine).toBe(false);
  });
});
