/**
 * `--stage-config` with stage 0 in another process (`url`): a real fennec prefill server (NixlConnector kv_producer)
 * and a real `fennec serve --stage-config ... --kv-transfer-config kv_consumer --log-stats` whose local stage 1 pulls
 * the prompt's blocks from it. Greedy output equals a single server's (completions and chat, streamed or not, 1 and 4
 * at once), the omni TransferEdgeStats table prints the real read (its size = the bytes vllm:nixl_bytes_transferred
 * counted for it), and a chain that needs the connector without it is refused at start-up with one line.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseTables } from "../metrics/omni-table-parser.ts";
import { parseExposition, sampleValue } from "../metrics/exposition.ts";
import { runServeExpectingExit, startServer, type ServerProcess } from "./server-process.ts";
import { post } from "./pd-peers.ts";

const ENGINE = ["--threads", "1", "--max-num-seqs", "4"];
const dir = mkdtempSync(join(tmpdir(), "fennec-remote-stage-"));
let single: ServerProcess, prefill: ServerProcess, chained: ServerProcess;
let config = "";

beforeAll(async () => {
  [single, prefill] = await Promise.all([
    startServer(ENGINE),
    startServer([...ENGINE, "--kv-transfer-config", JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_producer", kv_ip: "127.0.0.1", kv_port: 0 })]),
  ]);
  config = join(dir, "remote-prefill.yaml");
  writeFileSync(config, `stage_args:\n  - stage_id: 0\n    url: ${prefill.url}\n  - stage_id: 1\n    input_type: kv_blocks\n`);
  chained = await startServer([...ENGINE, "--stage-config", config, "--log-stats", "--kv-transfer-config", JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_consumer" })]);
}, 240_000);
afterAll(async () => {
  await Promise.all([single, prefill, chained].map((s) => s?.stop()));
  rmSync(dir, { recursive: true, force: true });
});

async function textOf(r: Response, chat: boolean, stream: boolean): Promise<string> {
  expect(r.status).toBe(200);
  if (!stream) {
    const body = (await r.json()) as { choices: { text?: string; message?: { content: string } }[] };
    return chat ? body.choices[0]!.message!.content : body.choices[0]!.text!;
  }
  let text = "";
  for (const line of (await r.text()).split("\n")) {
    if (!line.startsWith("data: {")) continue;
    const chunk = JSON.parse(line.slice(6)) as { choices: { text?: string; delta?: { content?: string } }[] };
    text += chat ? chunk.choices[0]?.delta?.content ?? "" : chunk.choices[0]?.text ?? "";
  }
  return text;
}

const PROMPTS = ["Once upon a time", "The little dog ran to the park and", "Lily saw a big red ball", "Tom had a toy car"];

describe("a pipeline whose prefill stage runs in another fennec process", () => {
  for (const chat of [false, true]) {
    for (const stream of [false, true]) {
      test(`${chat ? "chat" : "completions"}${stream ? ", streamed" : ""}: greedy output equals a single server's, 1 then 4 at once`, async () => {
        const path = chat ? "chat" : "completions";
        const body = (p: string): Record<string, unknown> => ({ ...(chat ? { messages: [{ role: "user", content: p }] } : { prompt: p }), max_tokens: 10, temperature: 0, ignore_eos: true, stream });
        for (const batch of [PROMPTS.slice(0, 1), PROMPTS]) {
          const [expected, got] = await Promise.all([
            Promise.all(batch.map(async (p) => textOf(await post(single.url, path, body(p)), chat, stream))),
            Promise.all(batch.map(async (p) => textOf(await post(chained.url, path, body(p)), chat, stream))),
          ]);
          expect(got).toEqual(expected);
        }
      }, 120_000);
    }
  }

  test("the TransferEdgeStats row is the real read: its size is the bytes the decode engine counted, with tx / in-flight times", async () => {
    const before = parseExposition(await (await fetch(`${chained.url}/metrics`)).text());
    const logBefore = chained.log().length;
    const r = await post(chained.url, "completions", { prompt: "The little dog ran to the park and saw a big red ball", max_tokens: 4, temperature: 0 });
    expect(r.status).toBe(200);
    const id = ((await r.json()) as { id: string }).id;
    const after = parseExposition(await (await fetch(`${chained.url}/metrics`)).text());
    const bytes = sampleValue(after, "vllm:nixl_bytes_transferred_sum") - sampleValue(before, "vllm:nixl_bytes_transferred_sum");
    expect(sampleValue(after, "vllm:nixl_xfer_time_seconds_count") - sampleValue(before, "vllm:nixl_xfer_time_seconds_count")).toBe(1);
    expect(bytes).toBeGreaterThan(0);
    const deadline = Date.now() + 5000;
    while (!chained.log().slice(logBefore).includes(`[TransferEdgeStats [request_id=${id}]]`) && Date.now() < deadline) await Bun.sleep(50);
    const tables = parseTables(chained.log().slice(logBefore));
    const edge = tables.find((t) => t.title === `TransferEdgeStats [request_id=${id}]`)!;
    expect(edge.headers).toEqual(["Field", "0->1"]);
    const cell = (field: string): number => Number((edge.rows.get(field)?.get("0->1") ?? "0").replace(/,/g, ""));
    expect(cell("size_kbytes")).toBeCloseTo(bytes / 1024, 3);
    expect(cell("tx_time_ms")).toBeGreaterThan(0);
    expect(cell("in_flight_time_ms")).toBeGreaterThan(0);
    // stage 0 is the remote prefill (one token), stage 1 the local decode of every generated token
    const stages = tables.find((t) => t.title === `StageRequestStats [request_id=${id}]`)!;
    expect(stages.rows.get("num_tokens_out")?.get("0")).toBe("1");
    expect(stages.rows.get("num_tokens_out")?.get("1")).toBe("4");
  }, 60_000);

  test("the prefill server's own /metrics and access log show each prefill leg", async () => {
    const m = parseExposition(await (await fetch(`${prefill.url}/metrics`)).text());
    expect(sampleValue(m, "vllm:request_success_total")).toBeGreaterThanOrEqual(21);
    expect(prefill.log()).toMatch(/\[access\] 127\.0\.0\.1:\d+ - "POST \/v1\/completions HTTP\/1\.1" 200 OK/);
  });

  test("without a NixlConnector consumer the chain is refused at start-up: one line, exit 2", async () => {
    const { code, output } = await runServeExpectingExit(["--port", "0", "--stage-config", config]);
    expect(code).toBe(2);
    expect(output.trim().split("\n")).toHaveLength(1);
    expect(output).toContain(`stage 0 runs at ${prefill.url}: start with --kv-transfer-config`);
  });

  test("the prefill server gone: a request fails with a 500 naming it, at once", async () => {
    await prefill.stop();
    const started = performance.now();
    const r = await post(chained.url, "completions", { prompt: "Once upon a time", max_tokens: 4 });
    expect(r.status).toBe(500);
    expect(((await r.json()) as { error: { message: string } }).error.message).toStartWith(`stage 0 (prefill server ${prefill.url}) cannot be reached`);
    expect(performance.now() - started).toBeLessThan(5000);
    expect((await fetch(`${chained.url}/health`)).status).toBe(200);
  }, 30_000);
});
