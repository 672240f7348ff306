/** vLLM's `KV Transfer metrics:` console line for the NIXL connector (src/metrics/nixl-logger.ts). */
import { describe, expect, test } from "bun:test";
import { nixlLogLine } from "../../src/metrics/nixl-logger.ts";

describe("KV Transfer metrics line", () => {
  test("vLLM's keys, Python's rounding, MB = 2^20, throughput = MB / xfer seconds, numpy's P90", () => {
    const line = nixlLogLine([
      { seconds: 0.002, postSeconds: 0.001, bytes: 2 ** 20, descriptors: 20 },
      { seconds: 0.004, postSeconds: 0.0005, bytes: 2 ** 21, descriptors: 30 },
    ], 0);
    // P90 of [2, 4] ms: 2 + 0.9 x 2 = 3.8; throughput 3 MB / 0.006 s = 500
    expect(line).toBe("KV Transfer metrics: Num successful transfers=2, Avg xfer time (ms)=3.0, P90 xfer time (ms)=3.8, Avg post time (ms)=0.75, P90 post time (ms)=0.95, Avg MB per transfer=1.5, Throughput (MB/s)=500.0, Avg number of descriptors=25.0");
  });

  test("only failures: all zeros; nothing at all: no line", () => {
    expect(nixlLogLine([], 2)).toBe("KV Transfer metrics: Num successful transfers=0, Avg xfer time (ms)=0.0, P90 xfer time (ms)=0.0, Avg post time (ms)=0.0, P90 post time (ms)=0.0, Avg MB per transfer=0.0, Throughput (MB/s)=0.0, Avg number of descriptors=0.0");
    expect(nixlLogLine([], 0)).toBeNull();
  });
});
