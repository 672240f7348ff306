/**
 * deploy/grafana/fennec-dashboard.json against a real Prometheus (Debian's, installed by scripts/install-test-deps.sh)
 * scraping loaded fennec servers with deploy/prometheus/prometheus.yml's job (targets and interval changed for the
 * test): one server with speculative decoding (ngram) and a KV offload tier, one with disaggregated prefill/decode
 * stages. Every panel's every query, with Grafana's variables filled in, must return at least one series with a
 * finite value (vLLM's own dashboards, evaluated this way, return data for 110 of 111 queries).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startServer, type ServerProcess } from "../e2e/server-process.ts";

const ROOT = join(import.meta.dir, "..", "..");
interface Panel { type: string; title: string; targets?: { expr: string }[] }
const dashboard = JSON.parse(readFileSync(join(ROOT, "deploy", "grafana", "fennec-dashboard.json"), "utf8")) as { panels: Panel[] };
const scrape = Bun.YAML.parse(readFileSync(join(ROOT, "deploy", "prometheus", "prometheus.yml"), "utf8")) as { global: Record<string, string>; scrape_configs: { job_name: string; metrics_path: string; static_configs: { targets: string[] }[] }[] };

const dir = mkdtempSync(join(tmpdir(), "fennec-dashboard-"));
const servers: ServerProcess[] = [];
let prometheus: ReturnType<typeof Bun.spawn> | null = null;
afterAll(async () => {
  prometheus?.kill();
  for (const s of servers) await s.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Grafana's variables as a dashboard user sees them with "All" selected. */
const fill = (expr: string): string => expr.replaceAll("$__rate_interval", "1m").replaceAll("$model_name", ".*").replaceAll("$job", ".*");

async function load(url: string, rounds: number): Promise<void> {
  // a repeated story: prefix-cache hits, n-gram drafts that get accepted, blocks for the offload tier
  const prompt = "Once upon a time there was a little girl named Lily. She liked to play. Once upon a time there was a little girl named Lily.";
  for (let r = 0; r < rounds; r++) {
    await Promise.all(Array.from({ length: 3 }, (_, i) => fetch(`${url}/v1/completions`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: i === 0 ? prompt : `${prompt} ${r} ${i}`, max_tokens: 24, temperature: 0, stream: i === 1 }),
    }).then((res) => res.text())));
  }
}

describe("Grafana dashboard on a real Prometheus", () => {
  test("every panel query returns data", async () => {
    const [spec, pd] = await Promise.all([
      startServer(["--threads", "1", "--speculative-config", '{"method":"ngram","num_speculative_tokens":3}', "--kv-offloading-size", "0.05", "--max-num-seqs", "4"]),
      startServer(["--threads", "1", "--pipeline", "pd"]),
    ]);
    servers.push(spec, pd);
    const job = scrape.scrape_configs[0]!;
    const config = { global: { ...scrape.global, scrape_interval: "1s", evaluation_interval: "1s" }, scrape_configs: [{ ...job, static_configs: [{ targets: [spec, pd].map((s) => new URL(s.url).host) }] }] };
    writeFileSync(join(dir, "prometheus.yml"), JSON.stringify(config)); // JSON is YAML
    const promPort = freePort();
    prometheus = Bun.spawn(["prometheus", `--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${promPort}`, "--log.level=error"], { stdout: "ignore", stderr: "ignore" });
    const api = `http://127.0.0.1:${promPort}/api/v1/query`;
    // both targets scraped and up before the load, so the rates have a sample before the traffic
    const upCount = async (): Promise<number> => {
      try {
        const body = (await (await fetch(`${api}?query=${encodeURIComponent("sum(up)")}`)).json()) as { data?: { result: { value: [number, string] }[] } };
        return Number(body.data?.result[0]?.value[1] ?? 0);
      } catch { return 0; }
    };
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && (await upCount()) < 2) await Bun.sleep(250);
    expect(await upCount()).toBe(2);
    // load across several scrapes so every rate() has two samples with traffic between them
    for (let i = 0; i < 4; i++) {
      await Promise.all([load(spec.url, 2), load(pd.url, 2)]);
      await Bun.sleep(700);
    }
    await Bun.sleep(1500);
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: fill(t.expr) })));
    expect(exprs.length).toBeGreaterThan(40);
    const empty: string[] = [];
    for (const { panel, expr } of exprs) {
      const body = (await (await fetch(`${api}?query=${encodeURIComponent(expr)}`)).json()) as { status: string; error?: string; data?: { result: { value: [number, string] }[] } };
      if (body.status !== "success") { empty.push(`${panel}: ${expr}: ${body.error}`); continue; }
      const values = (body.data?.result ?? []).map((r) => Number(r.value[1]));
      if (!values.some(Number.isFinite)) empty.push(`${panel}: ${expr} -> ${JSON.stringify(values)}`);
    }
    expect(empty).toEqual([]);
  }, 120_000);
});
