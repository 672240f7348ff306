/**
 * Request traces as vLLM emits them (vllm/tracing/, output_processor.py do_tracing), through the binary and an OTLP/HTTP
 * receiver that decodes with the official protobuf definitions (otlp-receiver.py): one `llm_request` span per request
 * with vLLM's gen_ai.* attribute names, the client's traceparent continued, and one trace across `fennec proxy` and
 * the prefill and decode servers of a disaggregated request.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { freePort, runServeExpectingExit, serverCommand, startServer, type ServerProcess } from "./server-process.ts";
import { startTraceReceiver, type ReceivedSpan, type TraceReceiver } from "./otlp-receiver.ts";

const PROXY = [...serverCommand().slice(0, -1), "proxy"];
const ENGINE = ["--threads", "1", "--max-num-seqs", "4"];
const SERVER_KIND = 2;
let receiver: TraceReceiver;
let single: ServerProcess, prefill: ServerProcess, decode: ServerProcess, proxy: ServerProcess;

beforeAll(async () => {
  receiver = await startTraceReceiver();
  const traces = ["--otlp-traces-endpoint", receiver.url];
  const transfer = (role: string): string => JSON.stringify({ kv_connector: "NixlConnector", kv_role: role });
  const side = (): { env: Record<string, string> } => ({ env: { VLLM_NIXL_SIDE_CHANNEL_HOST: "127.0.0.1", VLLM_NIXL_SIDE_CHANNEL_PORT: String(freePort()) } });
  [single, prefill, decode] = await Promise.all([
    startServer([...ENGINE, ...traces, "--collect-detailed-traces", "model,worker"]),
    startServer([...ENGINE, ...traces, "--kv-transfer-config", transfer("kv_producer")], side()),
    startServer([...ENGINE, ...traces, "--kv-transfer-config", transfer("kv_consumer")], side()),
  ]);
  proxy = await startServer(["--prefill", prefill.url, "--decode", decode.url, ...traces], { command: PROXY });
}, 240_000);
afterAll(async () => {
  await Promise.all([proxy, single, prefill, decode].map((s) => s?.stop()));
  await receiver?.stop();
});

const randomHex = (bytes: number): string => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex");

async function post(url: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Record<string, any>> {
  const r = await fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  const json = await r.json() as Record<string, any>;
  expect(r.status).toBe(200);
  return json;
}

const requestSpans = (id: string) => (spans: readonly ReceivedSpan[]) => spans.filter((s) => s.name === "llm_request" && s.attributes["gen_ai.request.id"] === id);

describe("one llm_request span per request, vLLM's attribute names", () => {
  test("a completion: the request parameters, usage and latencies, on a root SERVER span", async () => {
    const answer = await post(single.url, "/v1/completions", { prompt: "Once upon a time", max_tokens: 6, temperature: 0.5, top_p: 0.9, seed: 1 });
    const spans = requestSpans(answer.id)(await receiver.until((s) => requestSpans(answer.id)(s).length > 0));
    expect(spans).toHaveLength(1);
    const span = spans[0]!;
    expect(span.kind).toBe(SERVER_KIND);
    expect(span.parentSpanId).toBe("");
    expect(span.resource["vllm.instrumenting_module_name"]).toBe("vllm.llm_engine");
    expect(typeof span.resource["vllm.process_id"]).toBe("number");
    const a = span.attributes;
    expect(a["gen_ai.usage.prompt_tokens"]).toBe(answer.usage.prompt_tokens);
    expect(a["gen_ai.usage.completion_tokens"]).toBe(answer.usage.completion_tokens);
    expect(a["gen_ai.request.max_tokens"]).toBe(6);
    expect(a["gen_ai.request.temperature"]).toBe(0.5);
    expect(a["gen_ai.request.top_p"]).toBeCloseTo(0.9, 6);
    expect(a["gen_ai.request.n"]).toBe(1);
    const latency = (name: string): number => a[`gen_ai.latency.${name}`] as number;
    for (const name of ["time_to_first_token", "e2e", "time_in_queue", "time_in_model_prefill", "time_in_model_decode", "time_in_model_inference"]) {
      expect(typeof latency(name)).toBe("number");
      expect(latency(name)).toBeGreaterThanOrEqual(0);
    }
    expect(latency("e2e")).toBeGreaterThanOrEqual(latency("time_to_first_token"));
    expect(latency("time_in_model_inference")).toBeCloseTo(latency("time_in_model_prefill") + latency("time_in_model_decode"), 6);
    // the span covers the request: it starts at arrival and lasts at least its e2e
    expect((span.endTimeUnixNano - span.startTimeUnixNano) / 1e9).toBeGreaterThanOrEqual(latency("e2e") - 0.001);
  });

  test("a chat request with the client's traceparent: the span continues that trace; temperature 0 is left out (vLLM sets only truthy values)", async () => {
    const traceId = randomHex(16), parentId = randomHex(8);
    const answer = await post(single.url, "/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }], max_tokens: 4, temperature: 0 }, { traceparent: `00-${traceId}-${parentId}-01` });
    const spans = requestSpans(answer.id)(await receiver.until((s) => requestSpans(answer.id)(s).length > 0));
    expect(spans).toHaveLength(1);
    expect(spans[0]!.traceId).toBe(traceId);
    expect(spans[0]!.parentSpanId).toBe(parentId);
    expect(spans[0]!.attributes["gen_ai.request.temperature"]).toBeUndefined();
    expect(spans[0]!.attributes["gen_ai.usage.completion_tokens"]).toBe(answer.usage.completion_tokens);
  });

  test("three requests at once, streamed and not: three spans, one each", async () => {
    const ids = await Promise.all([0, 1, 2].map(async (i) => {
      if (i < 2) return (await post(single.url, "/v1/completions", { prompt: `Tom had ${i}`, max_tokens: 3 })).id as string;
      const r = await fetch(`${single.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: "Lily", max_tokens: 3, stream: true }) });
      const first = (await r.text()).split("\n").find((l) => l.startsWith("data: {"))!;
      return (JSON.parse(first.slice(6)) as { id: string }).id;
    }));
    await receiver.until((s) => ids.every((id) => requestSpans(id)(s).length > 0));
    await Bun.sleep(1500); // a second export would show a duplicate
    for (const id of ids) expect(requestSpans(id)(receiver.spans)).toHaveLength(1);
  });
});

describe("a disaggregated request through fennec proxy: one trace", () => {
  test("the proxy's span continues the client's trace; the prefill and decode servers' llm_request spans are its children", async () => {
    const traceId = randomHex(16), clientSpanId = randomHex(8);
    const r = await fetch(`${proxy.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json", traceparent: `00-${traceId}-${clientSpanId}-01` }, body: JSON.stringify({ prompt: "The little dog ran to the park and", max_tokens: 5, temperature: 0 }) });
    expect(r.status).toBe(200);
    const answer = await r.json() as { usage: { completion_tokens: number } };
    const inTrace = (s: readonly ReceivedSpan[]) => s.filter((span) => span.traceId === traceId);
    const spans = inTrace(await receiver.until((s) => inTrace(s).length >= 3));
    const proxySpans = spans.filter((s) => s.name === "pd_proxy_request");
    const legs = spans.filter((s) => s.name === "llm_request");
    expect(proxySpans).toHaveLength(1);
    expect(legs).toHaveLength(2);
    expect(proxySpans[0]!.parentSpanId).toBe(clientSpanId);
    expect(proxySpans[0]!.resource["service.name"]).toBe("fennec-proxy");
    for (const leg of legs) expect(leg.parentSpanId).toBe(proxySpans[0]!.spanId);
    // the prefill leg is the one-token request; the decode leg the client's; two different processes
    const prefillLeg = legs.find((s) => s.attributes["gen_ai.request.max_tokens"] === 1)!;
    const decodeLeg = legs.find((s) => s.attributes["gen_ai.request.max_tokens"] === 5)!;
    expect(prefillLeg).toBeDefined();
    expect(decodeLeg).toBeDefined();
    expect(prefillLeg.resource["vllm.process_id"]).not.toBe(decodeLeg.resource["vllm.process_id"]);
    expect(decodeLeg.attributes["gen_ai.usage.completion_tokens"]).toBe(answer.usage.completion_tokens);
    expect(proxySpans[0]!.attributes["fennec.proxy.prefill_server"]).toBe(prefill.url);
    expect(proxySpans[0]!.attributes["fennec.proxy.decode_server"]).toBe(decode.url);
  });

  test("without a traceparent the proxy starts the trace: its span is the root, both legs under it", async () => {
    const r = await fetch(`${proxy.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ messages: [{ role: "user", content: "Sam and Mia went" }], max_tokens: 4, stream: true }) });
    expect(r.status).toBe(200);
    await r.text();
    const requestId = r.headers.get("x-request-id")!;
    const proxySpan = (s: readonly ReceivedSpan[]) => s.find((span) => span.name === "pd_proxy_request" && span.attributes["gen_ai.request.id"] === requestId);
    const found = proxySpan(await receiver.until((s) => { const p = proxySpan(s); return p !== undefined && s.filter((x) => x.parentSpanId === p.spanId).length >= 2; }))!;
    expect(found).toBeDefined();
    expect(found.parentSpanId).toBe("");
    const children = receiver.spans.filter((s) => s.parentSpanId === found.spanId);
    expect(children.map((s) => s.name)).toEqual(["llm_request", "llm_request"]);
    for (const c of children) expect(c.traceId).toBe(found.traceId);
  });
});

describe("tracing off", () => {
  test("a request with trace context: answered as usual, and one warning line however many come (vLLM's log_tracing_disabled_warning)", async () => {
    const plain = await startServer(ENGINE);
    try {
      for (let i = 0; i < 2; i++) await post(plain.url, "/v1/completions", { prompt: "Hi", max_tokens: 2 }, { traceparent: `00-${randomHex(16)}-${randomHex(8)}-01` });
      expect(plain.log().split("\n").filter((l) => l.includes("Received a request with trace context but tracing is disabled"))).toHaveLength(1);
    } finally { await plain.stop(); }
  }, 60_000);
});

describe("the flags, checked as vLLM checks them", () => {
  test("--collect-detailed-traces without --otlp-traces-endpoint, and a value outside vLLM's choices: one line, exit 2", async () => {
    const missing = await runServeExpectingExit(["--collect-detailed-traces", "all"]);
    expect(missing.code).toBe(2);
    expect(missing.output).toContain("collect_detailed_traces requires `--otlp-traces-endpoint` to be set.");
    const bad = await runServeExpectingExit(["--otlp-traces-endpoint", "http://127.0.0.1:1", "--collect-detailed-traces", "model,engine"]);
    expect(bad.code).toBe(2);
    expect(bad.output).toContain('invalid choice "engine"');
  });
});
