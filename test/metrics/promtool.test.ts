/**
 * The exposition passes `promtool check metrics` (no parse error; only the two lint findings vLLM's own names always
 * cause), served through the /metrics route; and a real Prometheus scrapes it on loopback and answers a
 * histogram_quantile query over vllm:time_to_first_token_seconds_bucket.
 * Needs the Debian `prometheus` package (promtool + prometheus on PATH; .ci/run installs it).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { IterationStats as StepStats } from "../../src/frontend/iteration-stats.ts";
import { makeDeprecationGate } from "../../src/metrics/deprecation.ts";
import { MetricsRecorder } from "../../src/metrics/recorder.ts";
import { metricsRoute } from "../../src/server/metrics-route.ts";

const ALLOWED_LINT = [/ metric names should not contain ':'$/, /^vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix$/];

function busyRecorder(showHidden: string | null): MetricsRecorder {
  const gate = makeDeprecationGate("0.2.0", showHidden);
  if (!gate.ok) throw new Error(gate.error);
  const r = new MetricsRecorder({ modelName: "stories260K", maxModelLen: 512, logStats: true, enableMfuMetrics: false, deprecation: gate.value, cacheConfig: { block_size: 16, enable_prefix_caching: true } });
  const base: StepStats = {
    engineIndex: 0, batchId: 0, stepStartMs: 0, stepEndMs: 1, batchSize: 1, numPromptTokens: 0, numGenerationTokens: 1, numPreempted: 0,
    numRunning: 1, numWaiting: 0, kvCacheUsage: 0.25, prefixCacheQueries: 0, prefixCacheHits: 0, timeToFirstTokensS: [], interTokenLatenciesS: [],
  };
  // TTFTs spread over buckets so the quantile lands inside a bucket
  for (const ttft of [0.003, 0.007, 0.015, 0.03, 0.05]) r.onStep({ ...base, numPromptTokens: 9, timeToFirstTokensS: [ttft] });
  r.onStep({ ...base, interTokenLatenciesS: [0.02] });
  return r;
}

async function promtool(text: string): Promise<{ code: number; findings: string[] }> {
  const proc = Bun.spawn(["promtool", "check", "metrics"], { stdin: new Blob([text]), stdout: "pipe", stderr: "pipe" });
  const out = (await new Response(proc.stdout).text()) + (await new Response(proc.stderr).text());
  return { code: await proc.exited, findings: out.split("\n").filter((l) => l.trim() !== "") };
}

const hasPrometheus = Bun.which("promtool") !== null && Bun.which("prometheus") !== null;
const maybe = hasPrometheus ? describe : describe.skip;
const cleanups: (() => void)[] = [];
afterAll(() => { for (const c of cleanups) c(); });

maybe("promtool and Prometheus (skipped without the prometheus package)", () => {
  test.each([[null], ["0.1"]])("promtool check metrics on the scraped output (show hidden = %p)", async (flag) => {
    const app = metricsRoute(busyRecorder(flag));
    const res = await app.handle(new Request("http://127.0.0.1/metrics"));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const text = await res.text();
    const { findings } = await promtool(text);
    const unexpected = findings.filter((f) => !ALLOWED_LINT.some((re) => re.test(f)));
    expect(unexpected).toEqual([]);
    expect(findings.some((f) => f.startsWith("vllm:iteration_tokens_total non-counter"))).toBe(true);
  });

  test("a real Prometheus scrapes /metrics on loopback and answers histogram_quantile over TTFT", async () => {
    const server = metricsRoute(busyRecorder(null)).listen({ hostname: "127.0.0.1", port: 0 });
    cleanups.push(() => void server.stop());
    const fennecPort = server.server!.port;
    const dir = mkdtempSync(join(tmpdir(), "fennec-prom-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, "prometheus.yml"), [
      "global:", "  scrape_interval: 1s", "  evaluation_interval: 1s", "scrape_configs:", "  - job_name: fennec",
      `    static_configs:`, `      - targets: ["127.0.0.1:${fennecPort}"]`, "",
    ].join("\n"));
    // a free port for Prometheus: bind port 0, read it, release it
    const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const promPort = probe.port;
    probe.stop(true);
    const prom = Bun.spawn([
      "prometheus", `--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${promPort}`, "--log.level=error",
    ], { stdout: "ignore", stderr: "pipe" });
    cleanups.push(() => prom.kill());
    const query = encodeURIComponent('histogram_quantile(0.5, sum by (le) (vllm:time_to_first_token_seconds_bucket{model_name="stories260K"}))');
    let result: { value: [number, string] }[] = [];
    const deadline = Date.now() + 40_000;
    while (Date.now() < deadline && result.length === 0) {
      await Bun.sleep(500);
      try {
        const res = await fetch(`http://127.0.0.1:${promPort}/api/v1/query?query=${query}`);
        const body = (await res.json()) as { status: string; data?: { result: { value: [number, string] }[] } };
        if (body.status === "success") result = body.data?.result ?? [];
      } catch { /* not up yet */ }
    }
    expect(result.length).toBe(1);
    // 5 samples: 0.003 | 0.007 | 0.015 | 0.03 | 0.05 -> the median lies in the (0.01, 0.02] bucket
    const median = Number(result[0]!.value[1]);
    expect(median).toBeGreaterThan(0.01);
    expect(median).toBeLessThanOrEqual(0.02);
  }, 60_000);
});
