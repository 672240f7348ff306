// fennec bench's arithmetic (vLLM's calculate_metrics, numpy percentiles, the block layout and file name) on hand-made
// outputs, and `fennec bench throughput|latency` as real processes on the embedded model: vLLM's lines and JSON keys,
// token counts that follow from the options.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { calculateMetrics, defaultResultFilename, percentile, resultBlock, resultJson, type RequestOutput } from "../../src/commands/bench-serve-result.ts";

const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
const dir = mkdtempSync(join(tmpdir(), "fennec-bench-cmd-"));

const output = (o: Partial<RequestOutput>): RequestOutput => ({ success: true, promptLen: 10, outputTokens: 3, ttft: 0.1, itl: [0.02, 0.04], latency: 0.16, startTime: 0, generatedText: "abc", error: "", ...o });

describe("bench serve arithmetic", () => {
  test("percentiles interpolate like numpy; an empty list is numpy on [0]", () => {
    expect(percentile([4, 1, 3, 2], 50)).toBe(2.5);
    expect(percentile([1, 2, 3, 4], 99)).toBeCloseTo(3.97, 10);
    expect(percentile([], 99)).toBe(0);
  });

  test("calculate_metrics: TPOT per request, ITL flattened, failures counted apart, goodput by SLO", () => {
    const outs = [output({}), output({ ttft: 0.3, latency: 0.5, itl: [0.1, 0.1], startTime: 1.5 }), output({ success: false, outputTokens: 0, error: "500" })];
    const m = calculateMetrics(outs, 2, [50], { ttft: 200 });
    expect([m.completed, m.failed, m.totalInput, m.totalOutput]).toEqual([2, 1, 20, 6]);
    expect(m.stats.ttft.mean).toBeCloseTo(200, 9);
    // tpot = (latency - ttft) / (tokens - 1): 30 ms and 100 ms
    expect(m.stats.tpot.mean).toBeCloseTo(65, 9);
    expect(m.stats.itl.median).toBeCloseTo(70, 9);
    expect(m.requestGoodput).toBe(0.5);
    expect(m.outputThroughput).toBe(3);
    // request 1 is active in second 0, request 2 in seconds 1 and 2 (1.5 .. 2.0): never both
    expect(m.maxConcurrentRequests).toBe(1);
    expect(m.maxOutputTokensPerS).toBe(3);
  });

  test("the block: vLLM's rows, widths and conditional lines", () => {
    const m = calculateMetrics([output({})], 1.5, [99, 99.9], null);
    const block = resultBlock(m, { requestRate: 4, maxConcurrency: null, durationS: 1.5, selected: ["ttft", "e2el"] }).split("\n");
    expect(block[0]).toBe("============ Serving Benchmark Result ============");
    expect(block[3]).toBe(`${"Request rate configured (RPS):".padEnd(40)} ${"4.00".padEnd(10)}`);
    expect(block).not.toContain(expect.stringContaining("Maximum request concurrency"));
    expect(block).not.toContain(expect.stringContaining("goodput"));
    expect(block).toContain("---------------Time to First Token----------------");
    expect(block).toContain(`${"P99.9 TTFT (ms):".padEnd(40)} ${"100.00".padEnd(10)}`);
    expect(block).toContain("----------------End-to-end Latency----------------");
    expect(block).not.toContain("---------------Inter-token Latency----------------");
    expect(block[block.length - 1]).toBe("=".repeat(50));
  });

  test("goodput row and --save-detailed lists in vLLM's places", () => {
    const outs = [output({}), output({ success: false, outputTokens: 0, error: "boom" })];
    const m = calculateMetrics(outs, 1, [99], { e2el: 100 });
    const block = resultBlock(m, { requestRate: Infinity, maxConcurrency: 2, durationS: 1, selected: ["ttft"] }).split("\n");
    expect(block.indexOf(`${"Request goodput (req/s):".padEnd(40)} ${"0.00".padEnd(10)}`)).toBe(block.findIndex((l) => l.startsWith("Request throughput")) + 1);
    const header = { date: "d", backend: "openai-chat", label: null, modelId: "m", tokenizerId: "t", numPrompts: 2, metadata: { box: "pi5" }, requestRate: Infinity, burstiness: 1, maxConcurrency: 2 };
    const json = resultJson(header, m, outs, 1, ["ttft"], true);
    const keys = Object.keys(json);
    expect(keys.slice(0, 11)).toEqual(["date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "box", "request_rate", "burstiness", "max_concurrency"]);
    expect(keys.slice(keys.indexOf("total_token_throughput") + 1, keys.indexOf("max_output_tokens_per_s"))).toEqual(["input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors"]);
    expect([json.output_lens, json.errors, json.request_goodput]).toEqual([[3, 0], ["", "boom"], 0]);
    expect(Object.keys(resultJson(header, m, outs, 1, ["ttft"], false))).not.toContain("ttfts");
  });

  test("default result file name as vLLM writes it", () => {
    expect(defaultResultFilename("openai", Infinity, null, "org/model", "20260101-120000")).toBe("openai-infqps-model-20260101-120000.json");
    expect(defaultResultFilename("x", 10, 4, "m", "d")).toBe("x-10.0qps-concurrency4-m-d.json");
    expect(defaultResultFilename("x", 2.5, null, "m", "d")).toBe("x-2.5qps-m-d.json");
  });
});

function fennec(args: readonly string[]): { code: number | null; stdout: string; stderr: string } {
  const r = Bun.spawnSync([process.execPath, CLI, ...args], { stdout: "pipe", stderr: "pipe", timeout: 60_000 });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

describe("offline benches on the embedded model", () => {
  test("bench throughput: vLLM's three lines and JSON keys; the counts follow from the options", () => {
    const out = join(dir, "throughput.json");
    const r = fennec(["bench", "throughput", "--num-prompts", "6", "--random-input-len", "20", "--random-output-len", "10", "--output-json", out, "--threads", "1"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Throughput: \d+\.\d\d requests\/s, \d+\.\d\d total tokens\/s, \d+\.\d\d output tokens\/s\nTotal num prompt tokens:  120\nTotal num output tokens:  60\n$/);
    const json = JSON.parse(readFileSync(out, "utf8"));
    expect(Object.keys(json)).toEqual(["elapsed_time", "num_requests", "total_num_tokens", "requests_per_second", "tokens_per_second"]);
    expect([json.num_requests, json.total_num_tokens]).toEqual([6, 180]);
    expect(json.tokens_per_second).toBeCloseTo(180 / json.elapsed_time, 6);
  });

  test("bench latency: vLLM's lines (percentiles 10..99) and JSON", () => {
    const out = join(dir, "latency.json");
    const r = fennec(["bench", "latency", "--batch-size", "2", "--input-len", "8", "--output-len", "8", "--num-iters-warmup", "1", "--num-iters", "3", "--output-json", out, "--threads", "1"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe("Warming up...");
    expect(lines[1]).toMatch(/^Avg latency: \d+\.\d+ seconds$/);
    expect(lines.slice(2).map((l) => l.split("%")[0])).toEqual(["10", "25", "50", "75", "90", "99"]);
    const json = JSON.parse(readFileSync(out, "utf8"));
    expect(Object.keys(json)).toEqual(["avg_latency", "latencies", "percentiles"]);
    expect(json.latencies).toHaveLength(3);
    expect(json.avg_latency).toBeCloseTo(json.latencies.reduce((s: number, x: number) => s + x, 0) / 3, 9);
    expect(Object.keys(json.percentiles)).toEqual(["10", "25", "50", "75", "90", "99"]);
  });
});
