/**
 * `fennec proxy`'s HTTP handler: disaggregated prefill/decode over two OpenAI-compatible servers, as vLLM's proxies do
 * it (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py _handle_completions, send_request_to_service;
 * examples/online_serving/disaggregated_serving/disagg_proxy_demo.py). For each /v1/completions or
 * /v1/chat/completions request: the prefill server llm-d's picker chose (the routing sidecar's `x-prefiller-host-port`
 * header), else the next one in turn (round robin), gets the body with max_tokens 1, stream false and
 * `kv_transfer_params: {do_remote_decode: true, ...}`; the `kv_transfer_params` it answers are added to the original
 * body, which the next decode server gets; the decode answer (streamed or not) goes back as it arrives. Both legs carry
 * one X-Request-Id. Only the wire protocol is assumed, so any server speaking vLLM's params works behind it.
 *
 * Unlike the toy proxy (which re-raises as a bare 500), a failing leg answers the OpenAI error JSON naming the server:
 * its own status and message for an HTTP error, 502 when it cannot be reached or answers garbage, 504 past
 * --upstream-timeout; a decode stream cut mid-way ends with an error event, never a hang.
 * @example const handle = createPdProxy({ prefill: ["http://p:8100"], decode: ["http://d:8200"], upstreamTimeoutMs: 600_000, log });
 */
import { errorMessage } from "../util/error-message.ts";
import type { LogLevel } from "../util/logger.ts";
import { PREFILL_KV_TRANSFER_PARAMS } from "../util/nixl-params.ts";
import { ERROR_TYPES } from "./errors.ts";
import { SPAN_ATTRIBUTES, SPAN_NAMES } from "../tracing/span-attributes.ts";
import { extractTraceHeaders, injectTraceHeaders, parentContext } from "../tracing/trace-context.ts";
import type { Tracing } from "../tracing/tracer.ts";


export interface PdProxyOptions {
  /** base URLs without a trailing /v1 (command-line/proxy-config.ts upstreamBaseUrl) */
  readonly prefill: readonly string[];
  readonly decode: readonly string[];
  /** longest wait for the prefill answer, or for the decode server's response headers */
  readonly upstreamTimeoutMs: number;
  readonly log: (level: LogLevel, line: string) => void;
  /** tests: fixed ids; default crypto.randomUUID */
  readonly newRequestId?: () => string;
  /** --otlp-traces-endpoint: one span per proxied request, the parent of both legs' spans (their traceparent) */
  readonly tracing?: Tracing | null;
}

/** The proxy span's own attributes: which servers served the request (beside vLLM's gen_ai.request.id). */
const PROXY_SPAN_ATTRIBUTES = { prefillServer: "fennec.proxy.prefill_server", decodeServer: "fennec.proxy.decode_server", status: "http.response.status_code" } as const;


/** The generation routes: the path the client called is the path each leg gets. */
const GENERATION_PATHS = new Set(["/v1/completions", "/v1/chat/completions"]);
/** request headers passed to both legs (the backends' --api-key applies to what the client sent) */
const FORWARDED_HEADERS = ["authorization", "traceparent", "tracestate"] as const;
/** /health waits this long for each server */
const HEALTH_TIMEOUT_MS = 5000;

/** The statuses a proxy adds to the server's table (ERROR_TYPES): an upstream that failed, or took too long. */
const GATEWAY_ERRORS = {
  badGateway: { status: 502, type: "BadGatewayError" },
  gatewayTimeout: { status: 504, type: "GatewayTimeoutError" },
} as const;

interface ErrorKindShape { readonly status: number; readonly type: string }

function errorJson(kind: ErrorKindShape, message: string, param: string | null = null): string {
  return JSON.stringify({ error: { message, type: kind.type, param, code: kind.status } });
}

function errorReply(kind: ErrorKindShape, message: string, requestId: string | null, param: string | null = null): Response {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (requestId !== null) headers["x-request-id"] = requestId;
  return new Response(errorJson(kind, message, param), { status: kind.status, headers });
}

/** A leg that failed: what the client is told. */
class LegFailure extends Error {
  constructor(readonly kind: ErrorKindShape, message: string, readonly param: string | null = null) { super(message); }
}

/** The message of an upstream error body: the OpenAI error's message, else the text itself (cut to one line). */
function upstreamMessage(text: string): { message: string; type: string | null; param: string | null } {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown; type?: unknown; param?: unknown }; detail?: unknown; message?: unknown };
    const e = body.error;
    if (e && typeof e.message === "string") return { message: e.message, type: typeof e.type === "string" ? e.type : null, param: typeof e.param === "string" ? e.param : null };
    if (typeof body.detail === "string") return { message: body.detail, type: null, param: null };
    if (typeof body.message === "string") return { message: body.message, type: null, param: null };
  } catch { /* not JSON: the text */ }
  const line = text.replace(/\s+/g, " ").trim();
  return { message: line === "" ? "(empty body)" : line.slice(0, 500), type: null, param: null };
}

/** The upstream's HTTP error as the client's: its status and type, the message prefixed with which server said it. */
async function httpFailure(role: string, url: string, response: Response): Promise<LegFailure> {
  const { message, type, param } = upstreamMessage(await response.text().catch(() => ""));
  return new LegFailure({ status: response.status, type: type ?? (response.status >= 500 ? "InternalServerError" : "BadRequestError") }, `${role} server ${url} answered ${response.status}: ${message}`, param);
}

function fetchFailure(role: string, url: string, error: unknown, timedOut: boolean, timeoutMs: number): LegFailure {
  if (timedOut) return new LegFailure(GATEWAY_ERRORS.gatewayTimeout, `${role} server ${url} did not answer within ${timeoutMs / 1000} s (--upstream-timeout)`);
  return new LegFailure(GATEWAY_ERRORS.badGateway, `${role} server ${url} cannot be reached: ${errorMessage(error)}`);
}

/** A fetch that gives up after `timeoutMs` until `settle()` is called (the headers of a stream came in time). */
function timedSignal(client: AbortSignal, timeoutMs: number): { signal: AbortSignal; timedOut: () => boolean; settle: () => void } {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; controller.abort(new Error("upstream timeout")); }, timeoutMs);
  const onClientAbort = (): void => controller.abort(client.reason);
  if (client.aborted) onClientAbort(); else client.addEventListener("abort", onClientAbort, { once: true });
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    settle: () => clearTimeout(timer),
  };
}

/** The body the prefill server gets (toy_proxy_server.py send_request_to_service): one token, not streamed. */
export function prefillBody(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body, kv_transfer_params: { ...PREFILL_KV_TRANSFER_PARAMS }, stream: false, max_tokens: 1 };
  if ("max_completion_tokens" in out) out.max_completion_tokens = 1;
  delete out.stream_options;
  // a prefill leg cannot honour a minimum length past its one token (vLLM's proxy drops them for P only)
  delete out.min_tokens;
  delete out.min_completion_tokens;
  return out;
}

/**
 * The decode answer's body passed through as it arrives; a stream the decode server cuts ends with an SSE error event
 * and [DONE] (as vLLM ends a failed stream), a JSON body that is cut ends the connection. The client going away
 * cancels the decode request, so the decode server aborts it.
 */
function passThrough(body: ReadableStream<Uint8Array>, isEventStream: boolean, failureMessage: () => string, onEnd: (ok: boolean) => void, onCancel: () => void = () => {}): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) { controller.close(); onEnd(true); return; }
        controller.enqueue(value);
      } catch (e) {
        onEnd(false);
        if (!isEventStream) { controller.error(e); return; }
        controller.enqueue(encoder.encode(`data: ${errorJson(GATEWAY_ERRORS.badGateway, `${failureMessage()}: ${errorMessage(e)}`)}\n\ndata: [DONE]\n\n`));
        controller.close();
      }
    },
    cancel(reason) { onCancel(); void reader.cancel(reason).catch(() => {}); },
  });
}

/**
 * The routing sidecar's headers that carry the prefill host llm-d's picker chose (llm-d-routing-sidecar
 * internal/proxy/proxy.go): `x-prefiller-host-port` (host:port), else the legacy `x-prefiller-url`; a comma list or
 * repeated header means its first value, as the sidecar reads it.
 */
const PREFILLER_HEADERS = ["x-prefiller-host-port", "x-prefiller-url"] as const;

/** The picked prefill server as a base URL; null without the headers; an Error naming the header for a bad value. */
export function pickedPrefiller(headers: Headers): string | null | Error {
  for (const name of PREFILLER_HEADERS) {
    const value = headers.get(name)?.split(",")[0]?.trim();
    if (value === undefined || value === "") continue;
    const text = /^https?:\/\//i.test(value) ? value : `http://${value}`;
    let url: URL | null = null;
    try { url = new URL(text); } catch { /* refused below */ }
    if (url === null || url.username !== "" || url.search !== "" || url.hash !== "" || url.pathname.replace(/\/+$/, "") !== "" || /\s/.test(value)) {
      return new Error(`${name} "${value}" is not a prefill server's host:port`);
    }
    return url.origin;
  }
  return null;
}

/** Round robin over one list (itertools.cycle in vLLM's proxies). */
function cycle(urls: readonly string[]): () => string {
  let next = 0;
  return () => urls[next++ % urls.length]!;
}

export interface PdProxy {
  handle(request: Request): Promise<Response>;
}

export function createPdProxy(options: PdProxyOptions): PdProxy {
  const nextPrefill = cycle(options.prefill);
  const nextDecode = cycle(options.decode);
  const newId = options.newRequestId ?? (() => crypto.randomUUID());
  const timeoutMs = options.upstreamTimeoutMs;

  const legHeaders = (request: Request, requestId: string): Headers => {
    const headers = new Headers({ "content-type": "application/json", "x-request-id": requestId });
    for (const name of FORWARDED_HEADERS) { const v = request.headers.get(name); if (v !== null) headers.set(name, v); }
    return headers;
  };

  async function prefillLeg(url: string, path: string, body: Record<string, unknown>, headers: Headers, client: AbortSignal): Promise<Record<string, unknown> | null> {
    const timer = timedSignal(client, timeoutMs);
    try {
      let response: Response;
      try {
        response = await fetch(`${url}${path}`, { method: "POST", headers, body: JSON.stringify(prefillBody(body)), signal: timer.signal });
      } catch (e) { throw fetchFailure("prefill", url, e, timer.timedOut(), timeoutMs); }
      if (!response.ok) throw await httpFailure("prefill", url, response);
      let answer: unknown;
      try { answer = JSON.parse(await response.text()); } catch (e) {
        if (timer.timedOut() || client.aborted) throw fetchFailure("prefill", url, e, timer.timedOut(), timeoutMs);
        throw new LegFailure(GATEWAY_ERRORS.badGateway, `prefill server ${url} answered a body that is not JSON`);
      }
      const params = (answer as { kv_transfer_params?: unknown } | null)?.kv_transfer_params;
      return typeof params === "object" && params !== null && !Array.isArray(params) ? params as Record<string, unknown> : null;
    } finally { timer.settle(); }
  }

  async function generation(request: Request, path: string): Promise<Response> {
    const requestId = request.headers.get("x-request-id") ?? newId();
    let body: unknown;
    try { body = JSON.parse(await request.text()); } catch {
      return errorReply(ERROR_TYPES.invalidBody, "the request body is not valid JSON", requestId);
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) return errorReply(ERROR_TYPES.invalidBody, "the request body must be a JSON object", requestId);
    const original = body as Record<string, unknown>;
    if (original.kv_transfer_params !== undefined && original.kv_transfer_params !== null) {
      return errorReply(ERROR_TYPES.badRequest, "kv_transfer_params is set by the proxy for each leg: send the request without it", requestId, "kv_transfer_params");
    }
    // the host llm-d's picker chose (it arrives through the routing sidecar's header), else the proxy's own turn
    const picked = pickedPrefiller(request.headers);
    if (picked instanceof Error) return errorReply(ERROR_TYPES.badRequest, picked.message, requestId);
    const headers = legHeaders(request, requestId);
    const prefillUrl = picked ?? nextPrefill();
    // the proxy's span continues the client's trace, and both legs continue the proxy's span
    const parent = parentContext(extractTraceHeaders(request.headers));
    const span = options.tracing?.startSpan(SPAN_NAMES.proxyRequest, Date.now(), parent, { [SPAN_ATTRIBUTES.requestId]: requestId, [PROXY_SPAN_ATTRIBUTES.prefillServer]: prefillUrl }) ?? null;
    if (span !== null) injectTraceHeaders(options.tracing!.contextOf(span, parent), headers);
    // ended once: when the answer is over (passed through, failed, or the client went away)
    let spanOpen = span !== null;
    const endSpan = (): void => { if (spanOpen) { spanOpen = false; span!.end(); } };
    const reply = (response: Response): Response => { span?.setAttribute(PROXY_SPAN_ATTRIBUTES.status, response.status); if (response.status !== 200) endSpan(); return response; };
    const started = performance.now();
    let params: Record<string, unknown> | null;
    try {
      params = await prefillLeg(prefillUrl, path, original, headers, request.signal);
    } catch (e) {
      const failure = e instanceof LegFailure ? e : new LegFailure(ERROR_TYPES.internal, `prefill leg failed: ${errorMessage(e)}`);
      // the client went away: nobody reads the answer, and it is no server's failure
      if (request.signal.aborted) { options.log("INFO", `${requestId}: the client went away during the prefill leg`); return reply(errorReply(failure.kind, failure.message, requestId)); }
      options.log("ERROR", `${requestId}: ${failure.message}`);
      return reply(errorReply(failure.kind, failure.message, requestId, failure.param));
    }
    const prefillMs = performance.now() - started;
    // vLLM's proxies go on without the params (the decode server then computes the prompt itself)
    if (params === null) options.log("WARNING", `${requestId}: prefill server ${prefillUrl} answered no kv_transfer_params; the decode server computes the prompt itself`);
    const decodeUrl = nextDecode();
    const decodeBody = params === null ? original : { ...original, kv_transfer_params: params };
    const timer = timedSignal(request.signal, timeoutMs);
    let response: Response;
    try {
      response = await fetch(`${decodeUrl}${path}`, { method: "POST", headers, body: JSON.stringify(decodeBody), signal: timer.signal });
    } catch (e) {
      timer.settle();
      const failure = fetchFailure("decode", decodeUrl, e, timer.timedOut(), timeoutMs);
      if (request.signal.aborted) { options.log("INFO", `${requestId}: the client went away before the decode answer`); return reply(errorReply(failure.kind, failure.message, requestId)); }
      options.log("ERROR", `${requestId}: ${failure.message}`);
      return reply(errorReply(failure.kind, failure.message, requestId));
    }
    timer.settle();
    if (!response.ok) {
      const failure = await httpFailure("decode", decodeUrl, response);
      options.log("ERROR", `${requestId}: ${failure.message}`);
      return reply(errorReply(failure.kind, failure.message, requestId, failure.param));
    }
    options.log("INFO", `${requestId}: prefill ${prefillUrl} in ${prefillMs.toFixed(1)} ms (${params === null ? "no kv_transfer_params" : "kv_transfer_params returned"}), decode ${decodeUrl}`);
    const contentType = response.headers.get("content-type") ?? "application/json";
    const isEventStream = contentType.startsWith("text/event-stream");
    const out = response.body === null ? null : passThrough(response.body, isEventStream, () => `decode server ${decodeUrl} stopped mid-answer`, (ok) => {
      if (!ok) options.log("ERROR", `${requestId}: decode server ${decodeUrl} stopped mid-answer`);
      endSpan();
    }, endSpan);
    const replyHeaders: Record<string, string> = { "content-type": contentType, "x-request-id": requestId };
    if (isEventStream) replyHeaders["cache-control"] = "no-cache";
    span?.setAttribute(PROXY_SPAN_ATTRIBUTES.decodeServer, decodeUrl);
    if (out === null) endSpan();
    return reply(new Response(out, { status: response.status, headers: replyHeaders }));
  }

  /** 200 (empty, as vLLM's /health) when every server's /health is 200; else 503 naming the ones that are not. */
  async function health(request: Request): Promise<Response> {
    const check = async (role: string, url: string): Promise<string | null> => {
      try {
        const r = await fetch(`${url}/health`, { signal: AbortSignal.any([AbortSignal.timeout(HEALTH_TIMEOUT_MS), request.signal]) });
        await r.arrayBuffer().catch(() => {});
        return r.status === 200 ? null : `${role} server ${url}: ${r.status}`;
      } catch (e) { return `${role} server ${url}: ${errorMessage(e)}`; }
    };
    const problems = (await Promise.all([
      ...[...new Set(options.prefill)].map((u) => check("prefill", u)),
      ...[...new Set(options.decode)].map((u) => check("decode", u)),
    ])).filter((p): p is string => p !== null);
    if (problems.length === 0) return new Response(null, { status: 200 });
    return errorReply(ERROR_TYPES.unavailable, `not every server is healthy: ${problems.join("; ")}`, null);
  }

  /** GET /v1/models (and /v1/models/{id}) from the next decode server: the model both legs serve. */
  async function models(request: Request, path: string): Promise<Response> {
    const url = nextDecode();
    const headers = new Headers();
    const auth = request.headers.get("authorization");
    if (auth !== null) headers.set("authorization", auth);
    try {
      const r = await fetch(`${url}${path}`, { headers, signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), request.signal]) });
      return new Response(await r.arrayBuffer(), { status: r.status, headers: { "content-type": r.headers.get("content-type") ?? "application/json" } });
    } catch (e) {
      return errorReply(GATEWAY_ERRORS.badGateway, `decode server ${url} cannot be reached: ${errorMessage(e)}`, null);
    }
  }

  return {
    async handle(request: Request): Promise<Response> {
      const { pathname } = new URL(request.url);
      if (GENERATION_PATHS.has(pathname)) {
        if (request.method !== "POST") return errorReply(ERROR_TYPES.methodNotAllowed, "Method Not Allowed", null);
        return generation(request, pathname);
      }
      if (request.method !== "GET" && request.method !== "HEAD") {
        return errorReply(pathname === "/health" || pathname.startsWith("/v1/models") ? ERROR_TYPES.methodNotAllowed : ERROR_TYPES.routeNotFound, pathname === "/health" || pathname.startsWith("/v1/models") ? "Method Not Allowed" : "Not Found", null);
      }
      if (pathname === "/health") return health(request);
      // toy_proxy_server.py's own health route
      if (pathname === "/healthcheck") return Response.json({ status: "ok", prefill_instances: options.prefill.length, decode_instances: options.decode.length });
      if (pathname === "/v1/models" || pathname.startsWith("/v1/models/")) return models(request, pathname);
      return errorReply(ERROR_TYPES.routeNotFound, "Not Found", null);
    },
  };
}
