/**
 * deploy/README.md's table of what the Gateway API Inference Extension's endpoint picker reads from a model server
 * (its model-server protocol), checked row by row against a real `fennec serve` process: a series the table marks
 * `yes` is on /metrics with that TYPE and, where the row names labels, every sample carries them; one marked `no` is
 * absent. The table is read from the document, so a row added or changed there is tested as written.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseExposition, type Sample } from "../metrics/exposition.ts";
import { startServer, type ServerProcess } from "../e2e/server-process.ts";

const README = readFileSync(join(import.meta.dir, "..", "..", "deploy", "README.md"), "utf8");

interface Row {
  readonly metric: string;
  readonly series: string;
  readonly labels: readonly string[];
  readonly type: string;
  readonly served: boolean;
}

/** The rows of the table under "What the endpoint picker reads from a model server". */
function protocolRows(): Row[] {
  const section = README.slice(README.indexOf("## What the endpoint picker reads from a model server"));
  const lines = section.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| ---") && !l.startsWith("| Protocol metric"));
  return lines.map((line) => {
    const cells = line.split("|").slice(1, -1).map((c) => c.trim());
    const [metric, , series, label, type, served] = cells as [string, string, string, string, string, string];
    return {
      metric,
      series: series.replace(/`/g, ""),
      labels: label === "" ? [] : label.split(",").map((l) => l.trim().replace(/`/g, "")),
      type, served: served === "yes",
    };
  });
}

/** `# TYPE name kind` lines of an exposition */
function typesOf(text: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1]!, m[2]!);
  return types;
}

let server: ServerProcess;
let text = "";
let samples: Sample[] = [];

beforeAll(async () => {
  server = await startServer(["--threads", "1"]);
  // one request, so every series has been set by a real step, not only at start-up
  const r = await fetch(`${server.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 2 }) });
  expect(r.status).toBe(200);
  text = await (await fetch(`${server.url}/metrics`)).text();
  samples = parseExposition(text);
});
afterAll(async () => { await server?.stop(); });

describe("the endpoint picker's model-server protocol (deploy/README.md) on a live fennec serve", () => {
  const rows = protocolRows();

  test("the table names the protocol's required series and the optional ones", () => {
    expect(rows.map((r) => r.series)).toEqual(expect.arrayContaining(["vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:cache_config_info", "vllm:lora_requests_info"]));
    expect(rows.length).toBeGreaterThanOrEqual(6);
  });

  test.each(rows.map((r) => [`${r.metric}: ${r.series}${r.labels.length ? ` {${r.labels.join(", ")}}` : ""} is ${r.served ? "served" : "absent"}`, r] as const))("%s", (_label, row) => {
    const found = samples.filter((s) => s.name === row.series);
    if (!row.served) {
      expect(found).toEqual([]);
      expect(typesOf(text).has(row.series)).toBe(false);
      return;
    }
    expect(typesOf(text).get(row.series)).toBe(row.type);
    expect(found.length).toBeGreaterThan(0);
    for (const s of found) {
      expect(Number.isFinite(s.value)).toBe(true);
      for (const label of row.labels) expect({ series: row.series, label, value: s.labels[label] ?? null }).toMatchObject({ value: expect.stringMatching(/^\S+$/) });
    }
  });

  test("the label values the prefix-cache scorer reads are the server's real block size and block count", () => {
    const info = samples.find((s) => s.name === "vllm:cache_config_info")!;
    expect(info.labels.block_size).toBe("16");
    expect(Number(info.labels.num_gpu_blocks)).toBeGreaterThan(0);
    expect(Number.isInteger(Number(info.labels.num_gpu_blocks))).toBe(true);
  });

  test("the picker's inference API: /v1/completions and /v1/chat/completions answer the model the server names", async () => {
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string }[] };
    const model = models.data[0]!.id;
    for (const [path, body] of [["/v1/completions", { model, prompt: "Once", max_tokens: 1 }], ["/v1/chat/completions", { model, messages: [{ role: "user", content: "hi" }], max_tokens: 1 }]] as const) {
      const r = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      expect({ path, status: r.status }).toEqual({ path, status: 200 });
      expect(((await r.json()) as { model: string }).model).toBe(model);
    }
  });
});
