/**
 * `fennec proxy` as a real process between the official openai client (and plain fetch) and small stand-in HTTP
 * servers. The stand-ins stand in for vLLM (or fennec) prefill and decode instances: they speak only the wire protocol
 * of vLLM's NixlConnector (vllm-engine-features.md 4.2: a prefill leg with kv_transfer_params {do_remote_decode: true},
 * max_tokens 1, stream false, answered with {do_remote_prefill: true, remote_engine_id, remote_block_ids, ...}; a
 * decode leg given those params), so the test shows the proxy works with any server that speaks them, and can make a
 * leg fail in each way (an HTTP error, no answer, a cut stream).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { PREFILL_KV_TRANSFER_PARAMS } from "../../src/util/nixl-params.ts";
import { freePort, serverCommand, startServer, type ServerProcess } from "./server-process.ts";

interface Received {
  readonly standIn: string;
  readonly path: string;
  readonly body: Record<string, unknown>;
  readonly requestId: string | null;
  readonly authorization: string | null;
}

interface StandIn {
  readonly name: string;
  readonly url: string;
  readonly received: Received[];
  /** decode stand-ins: request ids whose connection closed before the answer ended */
  readonly closedEarly: string[];
  healthy: boolean;
  close(): Promise<void>;
}

const PROXY_TIMEOUT_S = 1;

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => { let text = ""; req.on("data", (c) => { text += c; }); req.on("end", () => resolve(text)); });
}

function json(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) }).end(text);
}

/** What the stand-in was asked for: the prompt or the last message, which names the behaviour under test. */
function promptOf(body: Record<string, unknown>): string {
  if (typeof body.prompt === "string") return body.prompt;
  const messages = body.messages as { content: string }[] | undefined;
  return messages?.at(-1)?.content ?? "";
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A prefill instance: answers one token and the params that tell the decode side where its blocks are. */
async function prefillStandIn(name: string): Promise<StandIn> {
  const received: Received[] = [];
  const standIn = { name, received, closedEarly: [], healthy: true } as unknown as StandIn & { url: string; close: () => Promise<void> };
  const server = createServer(async (req, res) => {
    if (req.method === "GET" && req.url === "/health") { res.writeHead(standIn.healthy ? 200 : 503).end(); return; }
    const body = JSON.parse(await readBody(req)) as Record<string, unknown>;
    const requestId = (req.headers["x-request-id"] as string | undefined) ?? null;
    received.push({ standIn: name, path: req.url ?? "", body, requestId, authorization: (req.headers.authorization as string | undefined) ?? null });
    const prompt = promptOf(body);
    if (prompt === "prefill-400") { json(res, 400, { error: { message: "This model's maximum context length is 8 tokens", type: "BadRequestError", param: "prompt", code: 400 } }); return; }
    if (prompt === "prefill-hangs") return; // never answers
    if (prompt === "prefill-not-json") { res.writeHead(200, { "content-type": "application/json" }).end("<html>gateway</html>"); return; }
    const params = prompt === "prefill-no-params" ? null : {
      do_remote_prefill: true, do_remote_decode: false, remote_engine_id: `${name}-engine`, remote_block_ids: [[3, 4]],
      remote_request_id: requestId, remote_host: "127.0.0.1", remote_port: 5600, tp_size: 1, remote_num_tokens: 7, remote_blocks_expiry_time: null, transfer_mode: "pull",
    };
    json(res, 200, { id: `cmpl-${name}`, object: "text_completion", choices: [{ index: 0, text: "P", finish_reason: "length" }], kv_transfer_params: params });
  });
  standIn.url = await listen(server);
  standIn.close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return standIn;
}

/** A decode instance: its answer names the engine whose blocks it was given, so the test sees the whole chain. */
async function decodeStandIn(name: string): Promise<StandIn> {
  const received: Received[] = [];
  const closedEarly: string[] = [];
  const standIn = { name, received, closedEarly, healthy: true } as unknown as StandIn & { url: string; close: () => Promise<void> };
  const server = createServer(async (req, res) => {
    if (req.method === "GET" && req.url === "/health") { res.writeHead(standIn.healthy ? 200 : 503).end(); return; }
    if (req.method === "GET" && req.url === "/v1/models") { json(res, 200, { object: "list", data: [{ id: "stand-in-model", object: "model", owned_by: name }] }); return; }
    const body = JSON.parse(await readBody(req)) as Record<string, unknown>;
    const requestId = (req.headers["x-request-id"] as string | undefined) ?? null;
    received.push({ standIn: name, path: req.url ?? "", body, requestId, authorization: (req.headers.authorization as string | undefined) ?? null });
    const prompt = promptOf(body);
    if (prompt === "decode-500") { json(res, 500, { error: { message: "EngineCore died", type: "InternalServerError", param: null, code: 500 } }); return; }
    const kv = body.kv_transfer_params as { remote_engine_id?: string } | undefined;
    const words = ["decoded", "from", kv?.remote_engine_id ?? "recomputed", `by ${name}`];
    const chat = req.url === "/v1/chat/completions";
    if (body.stream !== true) {
      json(res, 200, chat
        ? { id: "chatcmpl-d", object: "chat.completion", created: 0, model: "stand-in-model", choices: [{ index: 0, message: { role: "assistant", content: words.join(" ") }, finish_reason: "stop" }], kv_transfer_params: null }
        : { id: "cmpl-d", object: "text_completion", created: 0, model: "stand-in-model", choices: [{ index: 0, text: words.join(" "), finish_reason: "stop" }], kv_transfer_params: null });
      return;
    }
    res.on("close", () => { if (!res.writableFinished && requestId !== null) closedEarly.push(requestId); });
    res.writeHead(200, { "content-type": "text/event-stream" });
    const chunk = (word: string, i: number): string => `data: ${JSON.stringify(chat
      ? { id: "chatcmpl-d", object: "chat.completion.chunk", created: 0, model: "stand-in-model", choices: [{ index: 0, delta: i === 0 ? { role: "assistant", content: word } : { content: ` ${word}` }, finish_reason: null }] }
      : { id: "cmpl-d", object: "text_completion", created: 0, model: "stand-in-model", choices: [{ index: 0, text: i === 0 ? word : ` ${word}`, finish_reason: null }] })}\n\n`;
    for (let i = 0; i < words.length; i++) {
      // the cut comes once the two chunks are on the wire (destroy() right after write() may drop them unsent)
      if (prompt === "decode-cut" && i === 1) { res.write(chunk(words[i]!, i), () => setTimeout(() => res.socket?.destroy(), 50)); return; }
      res.write(chunk(words[i]!, i));
      if (prompt === "decode-slow") await Bun.sleep(400);
      if (res.destroyed) return;
    }
    res.end("data: [DONE]\n\n");
  });
  standIn.url = await listen(server);
  standIn.close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return standIn;
}

const PROXY = [...serverCommand().slice(0, -1), "proxy"];
let p1: StandIn, p2: StandIn, d1: StandIn, d2: StandIn;
let proxy: ServerProcess;

beforeAll(async () => {
  [p1, p2, d1, d2] = await Promise.all([prefillStandIn("p1"), prefillStandIn("p2"), decodeStandIn("d1"), decodeStandIn("d2")]);
  // host:port (disagg_proxy_demo.py's form) and a base URL ending in /v1 (the OpenAI client's) both name a server
  proxy = await startServer(["--prefill", p1.url, p2.url.replace("http://", ""), "--decode", `${d1.url}/v1`, d2.url, "--upstream-timeout", String(PROXY_TIMEOUT_S)], { command: PROXY });
});
afterAll(async () => {
  await proxy?.stop();
  await Promise.all([p1, p2, d1, d2].map((s) => s?.close()));
});

const legsOf = (requestId: string): { prefill: Received[]; decode: Received[] } => ({
  prefill: [...p1.received, ...p2.received].filter((r) => r.requestId === requestId),
  decode: [...d1.received, ...d2.received].filter((r) => r.requestId === requestId),
});

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${proxy.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });
}

describe("fennec proxy: the two legs (stand-in servers for vLLM instances)", () => {
  test("round robin: four requests go to p1, p2, p1, p2 and d1, d2, d1, d2, each decode leg with its own prefill leg's params", async () => {
    const order: [string, string][] = [];
    for (let i = 0; i < 4; i++) {
      const r = await post("/v1/completions", { model: "m", prompt: `round ${i}`, max_tokens: 5 });
      expect(r.status).toBe(200);
      const id = r.headers.get("x-request-id")!;
      const legs = legsOf(id);
      expect(legs.prefill).toHaveLength(1);
      expect(legs.decode).toHaveLength(1);
      order.push([legs.prefill[0]!.standIn, legs.decode[0]!.standIn]);
      const text = ((await r.json()) as { choices: { text: string }[] }).choices[0]!.text;
      expect(text).toBe(`decoded from ${legs.prefill[0]!.standIn}-engine by ${legs.decode[0]!.standIn}`);
    }
    expect(order).toEqual([["p1", "d1"], ["p2", "d2"], ["p1", "d1"], ["p2", "d2"]]);
  });

  test("completions: the prefill leg gets vLLM's params, one token, no stream; the decode leg the original request plus the params answered", async () => {
    const body = { model: "m", prompt: "hello", max_tokens: 9, min_tokens: 2, temperature: 0, stream: true, stream_options: { include_usage: true } };
    const r = await post("/v1/completions", body, { authorization: "Bearer secret-token", "x-request-id": "req-abc" });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toStartWith("text/event-stream");
    const text = await r.text();
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    const { prefill, decode } = legsOf("req-abc");
    expect(prefill).toHaveLength(1);
    expect(decode).toHaveLength(1);
    const { stream_options: _so, min_tokens: _mt, ...rest } = body;
    expect(prefill[0]!.body).toEqual({ ...rest, stream: false, max_tokens: 1, kv_transfer_params: { ...PREFILL_KV_TRANSFER_PARAMS } });
    expect(prefill[0]!.path).toBe("/v1/completions");
    const engine = `${prefill[0]!.standIn}-engine`;
    expect(decode[0]!.body).toEqual({ ...body, kv_transfer_params: expect.objectContaining({ do_remote_prefill: true, do_remote_decode: false, remote_engine_id: engine, remote_block_ids: [[3, 4]], remote_request_id: "req-abc" }) });
    // the client's token reaches both servers (their --api-key), and one request id names both legs
    expect(prefill[0]!.authorization).toBe("Bearer secret-token");
    expect(decode[0]!.authorization).toBe("Bearer secret-token");
    const words = text.split("\n").filter((l) => l.startsWith("data: {")).map((l) => (JSON.parse(l.slice(6)) as { choices: { text: string }[] }).choices[0]!.text);
    expect(words.join("")).toBe(`decoded from ${engine} by ${decode[0]!.standIn}`);
  });

  test("chat through the official openai client, streamed and not: max_completion_tokens is 1 on the prefill leg", async () => {
    const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: "k" });
    const streamed = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }], max_completion_tokens: 12, stream: true }, { headers: { "x-request-id": "chat-stream" } });
    let content = "";
    for await (const chunk of streamed) content += chunk.choices[0]?.delta.content ?? "";
    const legs = legsOf("chat-stream");
    expect(legs.prefill[0]!.path).toBe("/v1/chat/completions");
    expect(legs.prefill[0]!.body).toMatchObject({ max_completion_tokens: 1, max_tokens: 1, stream: false });
    expect(legs.decode[0]!.body).toMatchObject({ max_completion_tokens: 12, stream: true, messages: [{ role: "user", content: "hi" }] });
    expect(content).toBe(`decoded from ${legs.prefill[0]!.standIn}-engine by ${legs.decode[0]!.standIn}`);
    const whole = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] }, { headers: { "x-request-id": "chat-whole" } });
    const whole2 = legsOf("chat-whole");
    expect(whole.choices[0]!.message.content).toBe(`decoded from ${whole2.prefill[0]!.standIn}-engine by ${whole2.decode[0]!.standIn}`);
  });

  test("a prefill answer without kv_transfer_params: the decode leg gets the request without them (it computes the prompt) and the proxy logs it", async () => {
    const r = await post("/v1/completions", { model: "m", prompt: "prefill-no-params", max_tokens: 3 }, { "x-request-id": "no-params" });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { choices: { text: string }[] }).choices[0]!.text).toStartWith("decoded from recomputed");
    expect(legsOf("no-params").decode[0]!.body).not.toHaveProperty("kv_transfer_params");
    expect(proxy.log()).toContain("no-params: prefill server");
  });

  test("/health, /healthcheck and /v1/models", async () => {
    expect((await fetch(`${proxy.url}/health`)).status).toBe(200);
    expect(await (await fetch(`${proxy.url}/healthcheck`)).json()).toEqual({ status: "ok", prefill_instances: 2, decode_instances: 2 });
    const models = (await (await fetch(`${proxy.url}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data[0]!.id).toBe("stand-in-model");
    d2.healthy = false;
    try {
      const sick = await fetch(`${proxy.url}/health`);
      expect(sick.status).toBe(503);
      const error = ((await sick.json()) as { error: { message: string; code: number } }).error;
      expect(error.code).toBe(503);
      expect(error.message).toContain(`decode server ${d2.url}: 503`);
      expect(error.message).not.toContain(d1.url);
    } finally { d2.healthy = true; }
  });

  test("the access log has one line per answer and the proxy log one line per proxied request", async () => {
    await post("/v1/completions", { model: "m", prompt: "logged", max_tokens: 2 }, { "x-request-id": "logged-1" });
    await Bun.sleep(50);
    const log = proxy.log();
    expect(log).toMatch(/\[access\] 127\.0\.0\.1:\d+ - "POST \/v1\/completions HTTP\/1\.1" 200 OK/);
    expect(log.split("\n").filter((l) => l.includes("logged-1: prefill http://127.0.0.1:"))).toHaveLength(1);
  });
});

describe("fennec proxy: a failing leg is an OpenAI error naming the server, never a hang", () => {
  const errorOf = async (r: Response): Promise<{ message: string; type: string; code: number; param: string | null }> => ((await r.json()) as { error: { message: string; type: string; code: number; param: string | null } }).error;

  test("the prefill server's 400: the same status and message, and no decode leg", async () => {
    const r = await post("/v1/completions", { model: "m", prompt: "prefill-400" }, { "x-request-id": "p400" });
    expect(r.status).toBe(400);
    const e = await errorOf(r);
    expect(e).toMatchObject({ code: 400, type: "BadRequestError", param: "prompt" });
    expect(e.message).toMatch(/^prefill server http:\/\/127\.0\.0\.1:\d+ answered 400: This model's maximum context length is 8 tokens$/);
    expect(legsOf("p400").decode).toHaveLength(0);
  });

  test("a prefill server that never answers: 504 after --upstream-timeout", async () => {
    const started = performance.now();
    const r = await post("/v1/completions", { model: "m", prompt: "prefill-hangs" });
    const waited = performance.now() - started;
    expect(r.status).toBe(504);
    expect((await errorOf(r)).message).toContain(`did not answer within ${PROXY_TIMEOUT_S} s (--upstream-timeout)`);
    expect(waited).toBeGreaterThanOrEqual(PROXY_TIMEOUT_S * 1000 - 50);
    expect(waited).toBeLessThan(PROXY_TIMEOUT_S * 1000 + 3000);
  });

  test("a prefill answer that is not JSON: 502", async () => {
    const r = await post("/v1/chat/completions", { model: "m", messages: [{ role: "user", content: "prefill-not-json" }] });
    expect(r.status).toBe(502);
    expect((await errorOf(r)).message).toMatch(/^prefill server http:\/\/127\.0\.0\.1:\d+ answered a body that is not JSON$/);
  });

  test("the decode server's 500: the same status, the message names the decode server", async () => {
    const r = await post("/v1/completions", { model: "m", prompt: "decode-500", stream: true });
    expect(r.status).toBe(500);
    expect((await errorOf(r)).message).toMatch(/^decode server http:\/\/127\.0\.0\.1:\d+ answered 500: EngineCore died$/);
  });

  test("a decode stream cut mid-way ends with an error event and [DONE]", async () => {
    const r = await post("/v1/completions", { model: "m", prompt: "decode-cut", stream: true });
    expect(r.status).toBe(200);
    const events = (await r.text()).split("\n\n").filter((e) => e.startsWith("data: "));
    expect(events.length).toBe(4);
    expect(JSON.parse(events[1]!.slice(6))).toMatchObject({ choices: [{ text: " from" }] });
    expect(JSON.parse(events[2]!.slice(6))).toMatchObject({ error: { code: 502, message: expect.stringMatching(/^decode server http:\/\/127\.0\.0\.1:\d+ stopped mid-answer/) } });
    expect(events[3]).toBe("data: [DONE]");
  });

  test("a client that goes away mid-stream: the decode server's request is closed too", async () => {
    const controller = new AbortController();
    const r = await fetch(`${proxy.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json", "x-request-id": "gone" }, body: JSON.stringify({ model: "m", prompt: "decode-slow", stream: true }), signal: controller.signal });
    const reader = r.body!.getReader();
    await reader.read();
    controller.abort();
    const deadline = Date.now() + 5000;
    while (![...d1.closedEarly, ...d2.closedEarly].includes("gone") && Date.now() < deadline) await Bun.sleep(50);
    expect([...d1.closedEarly, ...d2.closedEarly]).toContain("gone");
  });

  test("bad bodies: not JSON, not an object, kv_transfer_params already set; a wrong method; an unknown route", async () => {
    const notJson = await post("/v1/completions", "{nope");
    expect(notJson.status).toBe(400);
    expect((await errorOf(notJson)).message).toBe("the request body is not valid JSON");
    const list = await post("/v1/completions", [1, 2]);
    expect(list.status).toBe(400);
    const preset = await post("/v1/completions", { model: "m", prompt: "x", kv_transfer_params: { do_remote_decode: true } });
    expect(preset.status).toBe(400);
    expect(await errorOf(preset)).toMatchObject({ param: "kv_transfer_params", type: "BadRequestError" });
    expect((await fetch(`${proxy.url}/v1/completions`)).status).toBe(405);
    const missing = await fetch(`${proxy.url}/v1/embeddings`, { method: "POST", body: "{}" });
    expect(missing.status).toBe(404);
    expect(await errorOf(missing)).toMatchObject({ code: 404, type: "Not Found" });
  });

  test("servers that cannot be reached: 502 naming the server, and /health 503", async () => {
    const dead = `http://127.0.0.1:${freePort()}`;
    const lonely = await startServer(["--prefill", dead, "--decode", d1.url], { command: PROXY, readyPath: "/healthcheck" });
    try {
      const r = await fetch(`${lonely.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m", prompt: "x" }) });
      expect(r.status).toBe(502);
      expect((await errorOf(r)).message).toStartWith(`prefill server ${dead} cannot be reached: `);
      const health = await fetch(`${lonely.url}/health`);
      expect(health.status).toBe(503);
      expect((await errorOf(health)).message).toContain(`prefill server ${dead}: `);
    } finally { await lonely.stop(); }
  });
});
