/**
 * The HTTP/1.1 listener in front of the app: node:http (Bun's implementation) turning each request into a fetch
 * `Request` for `app.handle` and writing the `Response` back, streaming bodies with backpressure.
 *
 * Why not Bun.serve (Elysia's `listen`): Bun.serve closes a connection when a pipelined request arrives while an async
 * response is pending ("denying async pipelining", bun-uws HttpContext.h; oven-sh/bun#38128), so a pipelined POST
 * was cancelled with no answer; and it hands out a relative `request.url` for HTTP/1.0 without Host, which made
 * every `new URL(request.url)` throw. node:http queues pipelined responses in order (RFC 9112 9.3.2, as uvicorn does
 * for vLLM), answers HTTP/1.1 without Host with 400 itself (RFC 9112 3.2) and lets HTTP/1.0 without Host through, to
 * which this listener gives the listening address as the authority.
 * @example const listener = await listenHttp((r) => app.handle(r), { hostname: "127.0.0.1", port: 8000, log });
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { Readable } from "node:stream";
import { errorMessage } from "../util/error-message.ts";

export interface HttpListenerOptions {
  readonly hostname: string;
  /** 0 = any free port */
  readonly port: number;
  /**
   * an idle keep-alive connection silent for this long is closed (seconds); FENNEC_HTTP_IDLE_TIMEOUT_S overrides it
   * (tests lower it). A connection with a request in flight is never closed for silence: see `onRequest`.
   */
  readonly idleTimeoutS: number;
  readonly log: (line: string) => void;
  /** HTTPS with these PEM texts (vLLM's --ssl-keyfile / --ssl-certfile / --ssl-ca-certs / --ssl-cert-reqs) */
  readonly tls?: { readonly key: string; readonly cert: string; readonly ca?: string; readonly requestCert: boolean; readonly rejectUnauthorized: boolean };
  /** listen on this Unix domain socket instead of hostname:port (--uds) */
  readonly unixPath?: string;
}

export interface HttpListener {
  readonly port: number;
  /** requests whose response has not been written to the end yet */
  readonly numInFlight: number;
  /** stops accepting connections and closes idle keep-alive ones; open requests go on, new ones on open connections get 503 */
  stopAccepting(): void;
  /** resolves once no request is in flight (at once when none is) */
  drained(): Promise<void>;
  /** closes every connection now: the responses still open are cut */
  closeAll(): void;
}

/**
 * The request as a fetch Request; null when its target is not a path (`OPTIONS *`, garbage). The URL's authority is
 * always the listening address, whatever the Host header says (the header itself is passed on): HTTP/1.0 may send
 * none, and Elysia finds the path by searching for "/" from the 12th character of the URL on, so a short Host such
 * as "x" made it route "http://x/v1/completions" as "/completions".
 */
function toRequest(req: IncomingMessage, authority: string, signal: AbortSignal): Request | null {
  let target = req.url ?? "/";
  if (/^https?:\/\//i.test(target)) {
    // absolute-form (RFC 9112 3.2.2): keep the path and query
    try {
      const absolute = new URL(target);
      target = `${absolute.pathname}${absolute.search}`;
    } catch {
      return null;
    }
  }
  if (!target.startsWith("/")) return null;
  let url: URL;
  try {
    url = new URL(`http://${authority}${target}`);
  } catch {
    return null;
  }
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  const method = req.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  return new Request(url, {
    method, headers, signal,
    ...(hasBody ? { body: Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>, duplex: "half" } : {}),
  } as RequestInit);
}

/** Writes `response` to `res`, chunk by chunk as the body produces them, waiting for the socket to drain. */
async function writeResponse(response: Response, res: ServerResponse, isHead: boolean): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    const seen = headers[name];
    headers[name] = seen === undefined ? value : [...(Array.isArray(seen) ? seen : [seen]), value];
  });
  const isStream = (response.headers.get("content-type") ?? "").startsWith("text/event-stream");
  if (!isStream && response.headers.get("content-length") === null) {
    // a whole body goes out with its length, as Bun.serve sends it (clients and the HTTP metrics read Content-Length)
    const body = response.body === null ? new Uint8Array(0) : new Uint8Array(await response.arrayBuffer());
    headers["content-length"] = String(body.byteLength);
    res.writeHead(response.status, response.statusText || undefined, headers).end(isHead ? undefined : body);
    return;
  }
  res.writeHead(response.status, response.statusText || undefined, headers);
  if (response.body === null || isHead) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  const cancel = (): void => void reader.cancel().catch(() => {});
  res.once("close", cancel);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (res.destroyed) return;
      if (!res.write(value)) await new Promise<void>((resolve) => { res.once("drain", resolve); res.once("close", resolve); });
    }
    res.end();
  } finally {
    res.off("close", cancel);
  }
}

const SHUTTING_DOWN_BODY = JSON.stringify({ error: { message: "The server is shutting down", type: "ServiceUnavailableError", param: null, code: 503 } });
const BAD_REQUEST_BODY = JSON.stringify({ error: { message: "Bad Request: the request target is not a path", type: "Bad Request", param: null, code: 400 } });

/** Where a request came from (the access log's client address). */
export interface PeerAddress {
  readonly address: string;
  readonly port: number;
}

/** The idle timeout in ms: FENNEC_HTTP_IDLE_TIMEOUT_S (a positive number of seconds) wins over the caller's. */
function idleTimeoutMs(fallbackS: number): number {
  const text = process.env.FENNEC_HTTP_IDLE_TIMEOUT_S;
  if (text === undefined || text === "") return fallbackS * 1000;
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds <= 0) throw new Error(`FENNEC_HTTP_IDLE_TIMEOUT_S must be a positive number of seconds, got ${JSON.stringify(text)}`);
  return seconds * 1000;
}

export async function listenHttp(handle: (request: Request, peer: PeerAddress | null) => Promise<Response>, options: HttpListenerOptions): Promise<HttpListener> {
  const idleMs = idleTimeoutMs(options.idleTimeoutS);
  let numInFlight = 0;
  const drainWaiters: (() => void)[] = [];
  let accepting = true;
  const servingOn = new WeakMap<Socket, number>();
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    if (!accepting) {
      // shutting down (vLLM rejects new requests while it drains): also what /health answers meanwhile
      res.writeHead(503, { "content-type": "application/json", connection: "close", "content-length": String(Buffer.byteLength(SHUTTING_DOWN_BODY)) }).end(SHUTTING_DOWN_BODY);
      return;
    }
    numInFlight++;
    // No silence limit while a request is served: a long prompt's prefill sends nothing for minutes before its first
    // byte (uvicorn's timeout_keep_alive, vLLM's, counts only between requests; llama-server's --timeout is 3600 s).
    // Counted per connection, for pipelined requests.
    const socket = req.socket;
    servingOn.set(socket, (servingOn.get(socket) ?? 0) + 1);
    socket.setTimeout(0);
    const done = (): void => {
      const serving = (servingOn.get(socket) ?? 1) - 1;
      servingOn.set(socket, serving);
      if (serving === 0 && !socket.destroyed) socket.setTimeout(idleMs);
      numInFlight--;
      if (numInFlight === 0) for (const resolve of drainWaiters.splice(0)) resolve();
    };
    res.once("close", done);
    const controller = new AbortController();
    // the client went away before its response was written out: the app's request.signal tells the generation
    res.once("close", () => { if (!res.writableFinished) controller.abort(); });
    const request = toRequest(req, `${options.hostname.includes(":") ? `[${options.hostname}]` : options.hostname}:${port}`, controller.signal);
    if (request === null) {
      res.writeHead(400, { "content-type": "application/json", "content-length": String(Buffer.byteLength(BAD_REQUEST_BODY)) }).end(BAD_REQUEST_BODY);
      return;
    }
    const { remoteAddress, remotePort } = req.socket;
    handle(request, remoteAddress !== undefined && remotePort !== undefined ? { address: remoteAddress, port: remotePort } : null)
      .then((response) => writeResponse(response, res, req.method === "HEAD"))
      .catch((error: unknown) => {
        options.log(`response to ${req.method} ${req.url} failed: ${errorMessage(error)}`);
        if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "Internal server error", type: "InternalServerError", param: null, code: 500 } }));
        else res.destroy();
      });
  };
  const server = options.tls ? createTlsServer({ ...options.tls }, onRequest) : createServer(onRequest);
  server.keepAliveTimeout = idleMs;
  server.timeout = idleMs;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    const where = options.unixPath !== undefined ? { path: options.unixPath, exclusive: true } : { host: options.hostname, port: options.port, exclusive: true };
    server.listen(where, () => { server.off("error", reject); resolve(); });
  });
  const address = server.address();
  const port = typeof address === "object" && address !== null ? (address as AddressInfo).port : 0;
  return {
    port,
    get numInFlight() { return numInFlight; },
    stopAccepting: () => { accepting = false; server.close(); server.closeIdleConnections(); },
    drained: () => (numInFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => { drainWaiters.push(resolve); })),
    closeAll: () => server.closeAllConnections(),
  };
}
