/** The deprecation policy run against injected versions: deprecated in X.Y -> shown with a note, hidden, removed. */
import { describe, expect, test } from "bun:test";
import { MetricsRecorder } from "../../src/metrics/recorder.ts";
import { CATALOGUE, METRIC_KEYS, type MetricKey } from "../../src/metrics/catalogue.ts";
import { makeDeprecationGate, parseVersion, phaseOf } from "../../src/metrics/deprecation.ts";
import pkg from "../../package.json" with { type: "json" };

const LEGACY = ["vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_hits_total", "vllm:time_per_output_token_seconds"];

async function exposition(version: string, flag: string | null): Promise<string> {
  const gate = makeDeprecationGate(version, flag);
  if (!gate.ok) throw new Error(gate.error);
  const recorder = new MetricsRecorder({ modelName: "m", maxModelLen: 256, logStats: true, enableMfuMetrics: false, deprecation: gate.value, processMetrics: false });
  return recorder.exposition();
}

function families(text: string): Set<string> {
  return new Set(text.split("\n").filter((l) => l.startsWith("# TYPE ")).map((l) => l.split(" ")[2]!));
}

function helpOf(text: string, name: string): string | undefined {
  return text.split("\n").find((l) => l.startsWith(`# HELP ${name} `))?.slice(`# HELP ${name} `.length);
}

describe("deprecation phases (legacy aliases deprecated in 0.1)", () => {
  test("0.1.x: shown, help says DEPRECATED: Use <new> instead.", async () => {
    const text = await exposition("0.1.3", null);
    for (const name of LEGACY) expect(families(text).has(name)).toBe(true);
    expect(helpOf(text, "vllm:gpu_cache_usage_perc")).toBe("GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc instead.");
    expect(helpOf(text, "vllm:time_per_output_token_seconds")).toBe("Histogram of time per output token in seconds. DEPRECATED: Use vllm:inter_token_latency_seconds instead.");
    expect(helpOf(text, "vllm:kv_cache_usage_perc")).toBe("KV-cache usage. 1 means 100 percent usage.");
  });

  test("0.2.x (fennec's release): hidden by default", async () => {
    const text = await exposition("0.2.0", null);
    for (const name of LEGACY) expect(families(text).has(name)).toBe(false);
    expect(families(text).has("vllm:kv_cache_usage_perc")).toBe(true);
  });

  test("0.2.x with --show-hidden-metrics-for-version=0.1: shown again, with the note", async () => {
    const text = await exposition("0.2.0", "0.1");
    for (const name of LEGACY) expect(families(text).has(name)).toBe(true);
    expect(helpOf(text, "vllm:gpu_prefix_cache_hits_total")).toContain("DEPRECATED: Use vllm:prefix_cache_hits_total instead.");
  });

  test.each(["0.0", "0.1.0", "0.3", "1.1"])("0.2.x with a well-formed but not previous-minor version %p: still hidden", async (flag) => {
    const text = await exposition("0.2.0", flag);
    for (const name of LEGACY) expect(families(text).has(name)).toBe(false);
  });

  test("0.3.x: removed, even with the escape hatch", async () => {
    for (const flag of [null, "0.2", "0.1"]) {
      const text = await exposition("0.3.1", flag);
      for (const name of LEGACY) expect(families(text).has(name)).toBe(false);
    }
  });

  test.each(["abc", "0", "0.x", "", "v1..2"])("an invalid version string %p is a one-line start-up error", (flag) => {
    const gate = makeDeprecationGate("0.2.0", flag);
    expect(gate.ok).toBe(false);
    if (!gate.ok) {
      expect(gate.error).toContain("--show-hidden-metrics-for-version");
      expect(gate.error).not.toContain("\n");
    }
  });

  test("phase table", () => {
    const v = (s: string) => { const p = parseVersion(s); if (!p.ok) throw new Error(p.error); return p.value; };
    expect(phaseOf(v("0.1"), v("0.0.9"))).toBe("current");
    expect(phaseOf(v("0.1"), v("0.1.0"))).toBe("deprecated");
    expect(phaseOf(v("0.1"), v("0.2.5"))).toBe("hidden");
    expect(phaseOf(v("0.1"), v("0.3.0"))).toBe("removed");
    expect(phaseOf(v("0.1"), v("1.0.0"))).toBe("removed");
  });

  test("fennec's own version puts the legacy aliases in their hidden phase", () => {
    const running = parseVersion(pkg.version);
    expect(running.ok).toBe(true);
    if (!running.ok) return;
    for (const key of METRIC_KEYS) {
      const def = CATALOGUE[key];
      if (!LEGACY.includes(def.name)) continue;
      const since = parseVersion(def.deprecatedIn ?? "");
      expect(since.ok).toBe(true);
      if (since.ok) expect(phaseOf(since.value, running.value)).toBe("hidden");
      expect(CATALOGUE[def.replacedBy as MetricKey]).toBeDefined();
    }
  });
});
