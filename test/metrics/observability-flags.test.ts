/** Observability flags of a real `fennec serve`: --pipeline pd --log-stats (online tables on stdout),
 * --disable-log-stats, --show-hidden-metrics-for-version (good and bad), and a bad --stage-config. */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkTables } from "./omni-invariants.ts";
import { parseTables } from "./omni-table-parser.ts";

const CLI = join(import.meta.dir, "../../src/cli.ts");

/** Starts `fennec serve` with `flags`, scrapes /metrics once, stops it. */
async function scrapeWith(flags: string[]): Promise<string> {
  const proc = Bun.spawn([process.execPath, CLI, "serve", "--port", "0", "--threads", "1", ...flags], { stdout: "ignore", stderr: "pipe" });
  try {
    const reader = (proc.stderr as ReadableStream<Uint8Array>).getReader();
    let log = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`fennec serve did not start: ${log}`);
      log += new TextDecoder().decode(value);
      const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
      if (m) return await (await fetch(`${m[1]}/metrics`)).text();
    }
  } finally {
    proc.kill();
    await proc.exited;
  }
}

describe("serve metric flags", () => {
  test("fennec serve --pipeline pd --log-stats: a block of tables on stdout after each request", async () => {
    const proc = Bun.spawn([process.execPath, CLI, "serve", "--port", "0", "--threads", "1", "--pipeline", "pd", "--log-stats"], { stdout: "pipe", stderr: "pipe" });
    try {
      const reader = (proc.stderr as ReadableStream<Uint8Array>).getReader();
      let log = "";
      let base = "";
      while (!base) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`fennec serve did not start: ${log}`);
        log += new TextDecoder().decode(value);
        base = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(log)?.[1] ?? "";
      }
      for (const prompt of ["Once upon a time", "The dog"]) {
        const res = await fetch(`${base}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt, max_tokens: 6, temperature: 0 }) });
        expect(res.status).toBe(200);
        await res.json();
      }
      proc.kill("SIGTERM");
      await proc.exited;
      const stdout = await new Response(proc.stdout).text();
      const tables = parseTables(stdout);
      const overall = tables.map((t, k) => (t.title === "Overall Summary" ? k : -1)).filter((k) => k >= 0);
      expect(overall.length).toBe(2);
      checkTables(tables.slice(0, overall[1]), { numRequests: 1, numStages: 2, transfers: true });
      checkTables(tables.slice(overall[1]), { numRequests: 1, numStages: 2, transfers: true });
      expect(stdout).toContain(`(APIServer pid=${proc.pid}) INFO `);
    } finally {
      proc.kill();
    }
  }, 30_000);

  test("--disable-log-stats: no vllm:* series; process metrics stay", async () => {
    const text = await scrapeWith(["--disable-log-stats"]);
    expect(text).not.toContain("vllm:");
    expect(text).toContain("process_resident_memory_bytes");
  }, 30_000);

  test("--show-hidden-metrics-for-version=0.1 on 0.2.0 shows the legacy aliases with the DEPRECATED note", async () => {
    const text = await scrapeWith(["--show-hidden-metrics-for-version=0.1"]);
    expect(text).toContain("# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc instead.");
    expect(text).toContain('vllm:time_per_output_token_seconds_count{model_name="stories260K",engine="0"} 0');
  }, 30_000);

  test("a bad --stage-config fails at start-up: one line naming the file, the stage and the problem, exit 2", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fennec-serve-flags-"));
    try {
      const file = join(dir, "stages.yaml");
      writeFileSync(file, "stage_args:\n  - stage_id: 0\n  - stage_id: 1\n    input_type: kv_blocks\n    engine_args: {model: missing.gguf}\n");
      const proc = Bun.spawn([process.execPath, CLI, "serve", "--port", "0", "--stage-config", file], { stdout: "pipe", stderr: "pipe" });
      expect(await proc.exited).toBe(2);
      const stderr = await new Response(proc.stderr).text();
      expect(stderr.trim().split("\n")).toEqual([`fennec: ${file}: stage 1: model file not found: ${join(dir, "missing.gguf")}`]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  test("an invalid version string fails at start-up: one line, exit 2", async () => {
    const proc = Bun.spawn([process.execPath, CLI, "serve", "--port", "0", "--show-hidden-metrics-for-version", "zero.one"], { stdout: "pipe", stderr: "pipe" });
    const code = await proc.exited;
    const stderr = await new Response(proc.stderr).text();
    expect(code).toBe(2);
    expect(stderr.trim().split("\n")).toEqual(['fennec: --show-hidden-metrics-for-version: "zero.one" is not a version (expected MAJOR.MINOR such as 0.1)']);
  }, 30_000);
});
