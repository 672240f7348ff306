// The page at `/` (served from build/web-ui.html, self-contained) and --disable-web-ui; the page's Prometheus reader
// checked against prom-client's own exposition of known observations.
import { describe, expect, test } from "bun:test";
import { Histogram, Registry } from "prom-client";
import { bucketDelta, histogramBuckets, histogramQuantile, parseExposition, sumOf } from "../../src/server/web-ui/prometheus-text.ts";
import { testServer } from "./helpers.ts";

describe("web page route", () => {
  test("GET / answers the page with its script inlined and no outside URL", async () => {
    const res = await testServer().call("GET", "/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/html");
    const html = await res.text();
    expect(html).toContain('<script type="module">');
    expect(html).toContain("/v1/chat/completions");
    expect(html).not.toContain('src="/ui/');
    expect(html.match(/https?:\/\/[^"' )]+/g) ?? []).toEqual([]);
    expect(html.length).toBeLessThan(64 * 1024);
  });

  test("--disable-web-ui: / is a 404 like any unknown path, /docs stays", async () => {
    const server = testServer({ disableWebUi: true });
    expect((await server.call("GET", "/")).status).toBe(404);
    expect((await server.call("GET", "/docs")).status).toBe(200);
  });

  test("with --api-key the page itself stays open (the key guards /v1)", async () => {
    const server = testServer({ apiKey: "k" });
    expect((await server.call("GET", "/")).status).toBe(200);
    expect((await server.call("GET", "/v1/models")).status).toBe(401);
  });
});

describe("the page's Prometheus reader", () => {
  test("sums, bucket deltas and histogram_quantile match the observations", async () => {
    const registry = new Registry();
    const h = new Histogram({ name: "vllm:time_to_first_token_seconds", help: "x", labelNames: ["engine"], buckets: [0.01, 0.1, 1], registers: [registry] });
    for (let i = 0; i < 10; i++) h.observe({ engine: "0" }, 0.005);
    const before = parseExposition(await registry.metrics());
    for (let i = 0; i < 10; i++) h.observe({ engine: "1" }, 0.05);
    for (let i = 0; i < 10; i++) h.observe({ engine: "1" }, 5);
    const after = parseExposition(await registry.metrics());
    expect(sumOf(after, "vllm:time_to_first_token_seconds_count")).toBe(30);
    expect(sumOf(after, "vllm:time_to_first_token_seconds_count", { engine: "1" })).toBe(20);
    const all = histogramBuckets(after, "vllm:time_to_first_token_seconds");
    expect(all).toEqual([{ le: 0.01, count: 10 }, { le: 0.1, count: 20 }, { le: 1, count: 20 }, { le: Infinity, count: 30 }]);
    // rank 15 of 30 lies halfway through the (0.01, 0.1] bucket
    expect(histogramQuantile(0.5, all)).toBeCloseTo(0.055, 9);
    // in the +Inf bucket: the largest finite bound, as Prometheus answers
    expect(histogramQuantile(0.99, all)).toBe(1);
    const window = bucketDelta(all, histogramBuckets(before, "vllm:time_to_first_token_seconds"));
    // only what was observed after the first scrape: 10 in (0.01, 0.1], 10 above 1
    expect(histogramQuantile(0.25, window)).toBeCloseTo(0.01 + 0.09 * 0.5, 9);
    const first = histogramBuckets(before, "vllm:time_to_first_token_seconds");
    expect(histogramQuantile(0.5, bucketDelta(first, first))).toBeNull();
  });
});
