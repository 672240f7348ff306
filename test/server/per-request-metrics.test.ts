// The per-request `metrics` formulas (vLLM reference §3.2), including vLLM's own unit-test numbers.
import { describe, expect, test } from "bun:test";
import { perRequestMetrics, perRequestMetricsApply, perRequestMetricsToWire } from "../../src/metrics/per-request.ts";

const times = (queued: number | null, scheduled: number | null, first: number | null, last: number | null) =>
  ({ arrivalMs: 100, queuedMs: queued, scheduledMs: scheduled, firstTokenMs: first, lastTokenMs: last });

describe("perRequestMetrics", () => {
  test("vLLM's builder case: queued 0.5 s, scheduled 1.0, first 1.5, last 2.5, 10 tokens", () => {
    const m = perRequestMetrics(times(500, 1000, 1500, 2500), 10);
    expect(m.timeToFirstTokenMs).toBe(500);
    expect(m.generationTimeMs).toBe(1000);
    expect(m.queueTimeMs).toBe(500);
    expect(m.meanItlMs).toBeCloseTo(1000 / 9, 10);
    expect(m.tokensPerSecond).toBeCloseTo(10 / 1.5, 10);
  });

  test("one token: no inter-token latency, the rest still computed", () => {
    const m = perRequestMetrics(times(10, 20, 50, 50), 1);
    expect(m.meanItlMs).toBeNull();
    expect(m.generationTimeMs).toBe(0);
    expect(m.tokensPerSecond).toBeCloseTo(1 / 0.03, 10);
  });

  test.each([
    ["queued", times(null, 20, 50, 90), ["queueTimeMs"]],
    ["scheduled", times(10, null, 50, 90), ["queueTimeMs", "timeToFirstTokenMs", "tokensPerSecond"]],
    ["first token", times(10, 20, null, 90), ["timeToFirstTokenMs", "generationTimeMs", "meanItlMs"]],
    ["last token", times(10, 20, 50, null), ["generationTimeMs", "meanItlMs", "tokensPerSecond"]],
  ] as const)("missing %s timestamp -> exactly its fields are null", (_, t, nulls) => {
    const m = perRequestMetrics(t, 5);
    for (const [key, value] of Object.entries(m)) expect(value === null).toBe((nulls as readonly string[]).includes(key));
  });

  test("zero inference interval gives no tokens_per_second (no division by zero)", () => {
    expect(perRequestMetrics(times(10, 20, 20, 20), 1).tokensPerSecond).toBeNull();
  });

  test("suppressed for n > 1 and for several prompts", () => {
    expect(perRequestMetricsApply(1, 1)).toBe(true);
    expect(perRequestMetricsApply(2, 1)).toBe(false);
    expect(perRequestMetricsApply(1, 2)).toBe(false);
  });

  test("wire form: snake_case; stream chunks drop nulls, bodies keep them", () => {
    const m = perRequestMetrics(times(10, 20, 50, 50), 1);
    expect(Object.keys(perRequestMetricsToWire(m, false))).toEqual(["time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms", "tokens_per_second"]);
    expect(perRequestMetricsToWire(m, false).mean_itl_ms).toBeNull();
    expect("mean_itl_ms" in perRequestMetricsToWire(m, true)).toBe(false);
  });
});
