/**
 * The log of a served run, read as an operator would: the real server as a process, real requests with the
 * openai client. Every line has vLLM's shape (LEVEL MM-DD HH:MM:SS [source] message), one uvicorn-style access line
 * per request, the periodic `Engine 000: Avg prompt throughput ...` line while the engine is busy, no stack trace;
 * with --log-format json every line parses as an object with those fields.
 */
import { afterAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { startServer, type ServerProcess } from "./server-process.ts";

const LINE = /^(DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2} \[[^\]]+\] .+$/;
const ACCESS = /\[access\] 127\.0\.0\.1:\d+ - "(GET|POST|OPTIONS) (\S+) HTTP\/1\.1" (\d{3}) [A-Za-z ]+$/;
const servers: ServerProcess[] = [];
afterAll(async () => { for (const s of servers) await s.stop(); });

/** Streams that keep the engine busy for a while, plus a 404 and a bad request. */
async function traffic(url: string): Promise<{ streams: number; completions: number }> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });
  const streams = 4;
  const completions = 3;
  await Promise.all([
    ...Array.from({ length: streams }, async () => {
      const stream = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Once" }], max_tokens: 400, stream: true, temperature: 0 });
      for await (const _chunk of stream) { /* drain */ }
    }),
    ...Array.from({ length: completions }, () => client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 400 })),
  ]);
  expect((await fetch(`${url}/no/such/route`)).status).toBe(404);
  expect((await fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: "{" })).status).toBe(400);
  return { streams, completions };
}

describe("server log", () => {
  test("text: vLLM's line shape on every line, one access line per request, the stats line while busy, no stack trace", async () => {
    const server = await startServer(["--threads", "1", "--max-num-seqs", "8", "--enable-log-requests"], { env: { VLLM_LOG_STATS_INTERVAL: "0.1" } });
    servers.push(server);
    const { streams, completions } = await traffic(server.url);
    await Bun.sleep(1200); // one more stats interval after the last token
    const lines = server.log().trimEnd().split("\n");
    const bad = lines.filter((l) => !LINE.test(l));
    expect(bad).toEqual([]);
    expect(lines.filter((l) => /^\s+at /.test(l) || l.includes("    at "))).toEqual([]);
    const access = lines.map((l) => ACCESS.exec(l)).filter((m) => m !== null);
    const count = (method: string, path: string, status: string) => access.filter((m) => m[1] === method && m[2] === path && m[3] === status).length;
    expect(count("POST", "/v1/chat/completions", "200")).toBe(streams);
    expect(count("POST", "/v1/completions", "200")).toBe(completions);
    expect(count("GET", "/no/such/route", "404")).toBe(1);
    expect(count("POST", "/v1/completions", "400")).toBe(1);
    // every /health poll of the start-up wait is a request too
    expect(count("GET", "/health", "200")).toBeGreaterThanOrEqual(1);
    // --enable-log-requests: one line per request that reached the engine
    expect(lines.filter((l) => / Received request \S+: prompt: '.*', params: SamplingParams\(n=1, /.test(l))).toHaveLength(streams + completions);
    const stats = lines.filter((l) => /^INFO .* \[loggers\.ts\] Engine 000: Avg prompt throughput: \d+\.\d tokens\/s, Avg generation throughput: \d+\.\d tokens\/s, Running: \d+ reqs, Waiting: \d+ reqs, GPU KV cache usage: \d+\.\d%, Prefix cache hit rate: \d+\.\d%$/.test(l));
    expect(stats.length).toBeGreaterThanOrEqual(1);
    // while busy: some interval saw requests running and tokens generated
    expect(stats.some((l) => /Running: [1-9]\d* reqs/.test(l) && !/Avg generation throughput: 0\.0 /.test(l))).toBe(true);
  }, 120_000);

  test("json: every line parses, with time, level, source and message; DEBUG shows the idle stats lines", async () => {
    const server = await startServer(["--threads", "1", "--log-format", "json"], { env: { VLLM_LOG_STATS_INTERVAL: "0.3", VLLM_LOGGING_LEVEL: "DEBUG" } });
    servers.push(server);
    await traffic(server.url);
    await Bun.sleep(1000);
    const lines = server.log().trimEnd().split("\n");
    const records = lines.map((l) => JSON.parse(l) as { time: string; level: string; source: string; message: string });
    for (const r of records) {
      expect(Object.keys(r).sort()).toEqual(["level", "message", "source", "time"]);
      expect(Number.isNaN(Date.parse(r.time))).toBe(false);
    }
    expect(records.filter((r) => r.source === "access" && r.message.includes('"POST /v1/chat/completions HTTP/1.1" 200 OK'))).toHaveLength(4);
    // idle intervals are DEBUG lines, as in vLLM (no noise at INFO on an idle server)
    expect(records.some((r) => r.level === "DEBUG" && r.message.startsWith("Engine 000: Avg prompt throughput: 0.0 tokens/s"))).toBe(true);
  }, 120_000);

  test("--enable-log-outputs: one line per finished answer with its text, token ids and finish reason, cut to --max-log-len", async () => {
    const server = await startServer(["--threads", "1", "--enable-log-requests", "--enable-log-outputs", "--max-log-len", "3"]);
    servers.push(server);
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
    const answer = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 6, temperature: 0 });
    await Bun.sleep(100);
    const line = server.log().split("\n").find((l) => l.includes("[logger.ts] Generated response "));
    expect(line).toMatch(/^INFO .* \[logger\.ts\] Generated response \S+: output: '.*', output_token_ids: \[\d+, \d+, \d+\], finish_reason: length$/);
    expect(line).toContain(`output: '${answer.choices[0]!.text.slice(0, 3).replace(/'/g, "\\'").replace(/\n/g, "\\n")}'`);
    await server.stop();
  }, 60_000);

  test("VLLM_LOGGING_LEVEL=DEBUG: per-step scheduling lines, per-request prefix-cache hits, grammar compile times; INFO has none", async () => {
    const debug = await startServer(["--threads", "1"], { env: { VLLM_LOGGING_LEVEL: "DEBUG" } });
    servers.push(debug);
    const client = new OpenAI({ baseURL: `${debug.url}/v1`, apiKey: "none", maxRetries: 0 });
    const prompt = "Once upon a time there was a little girl who lived in a village near the forest";
    // the same prompt twice: the second finds the first one's full blocks in the prefix cache
    for (let i = 0; i < 2; i++) await client.completions.create({ model: "stories260K", prompt, max_tokens: 8, temperature: 0 });
    await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Pick" }], max_tokens: 8, response_format: { type: "json_object" } });
    await Bun.sleep(200);
    const lines = debug.log().trimEnd().split("\n");
    const steps = lines.filter((l) => /^DEBUG .* \[scheduler\.ts\] Engine 000 step \d+: scheduled \d+ seqs, \d+ prompt \+ \d+ generation tokens; running \d+, waiting \d+, preempted \d+; prefix cache hits \d+ of \d+ tokens; KV cache \d+\.\d% used; \d+\.\d ms$/.test(l));
    expect(steps.length).toBeGreaterThanOrEqual(3);
    const finished = lines.map((l) => /\[scheduler\.ts\] Request \S+ finished \(\w+\): (\d+) prompt tokens, (\d+) of them prefix-cache hits/.exec(l)).filter((m) => m !== null);
    expect(finished.length).toBe(3);
    expect(Number(finished[0]![2])).toBe(0);
    expect(Number(finished[1]![2])).toBeGreaterThan(0);
    expect(lines.some((l) => /^DEBUG .* \[scheduler\.ts\] Request \S+: grammar compiled in \d+\.\d ms$/.test(l))).toBe(true);
    await debug.stop();
    const info = await startServer(["--threads", "1"]);
    servers.push(info);
    await new OpenAI({ baseURL: `${info.url}/v1`, apiKey: "none", maxRetries: 0 }).completions.create({ model: "stories260K", prompt, max_tokens: 8 });
    await Bun.sleep(100);
    expect(info.log()).not.toContain("DEBUG ");
    expect(info.log()).not.toContain("[scheduler.ts]");
    await info.stop();
  }, 120_000);

  test("--disable-uvicorn-access-log and --uvicorn-log-level warning: no access lines", async () => {
    for (const flags of [["--disable-uvicorn-access-log"], ["--uvicorn-log-level", "warning"]]) {
      const server = await startServer(["--threads", "1", ...flags]);
      servers.push(server);
      expect((await fetch(`${server.url}/v1/models`)).status).toBe(200);
      await Bun.sleep(100);
      expect(server.log()).not.toContain("[access]");
      expect(server.log()).toContain("[serve.ts] fennec ");
      await server.stop();
    }
  }, 120_000);
});
