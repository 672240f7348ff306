/**
 * One HTTP request's own record, opened when it arrives and read by every later stage: the request-wide hooks
 * (access log, HTTP metrics, error messages quoting the raw body), then a generating route's preparation (public id,
 * arrival time), its generation (the client's abort signal) and its response. One object per request, instead of one
 * side table per fact (vLLM keeps these on its per-request `RequestResponseMetadata` / raw Request state).
 * @example const context = contexts.of(request); prepareChatCompletion(options, body, contexts.of(request));
 */
import { nowMs } from "../util/clock.ts";

export class RequestContext {
  /** performance.now() when the request arrived (for the HTTP duration metric: one clock, one interval) */
  readonly startedPerfMs: number;
  /** the client's address for the access log; null when unknown or not logged */
  client: string | null = null;
  /** the body's text as the client sent it (bodies parsed inline only): error messages quote it as it was */
  rawBodyText: string | null = null;
  /** the top-level keys of the JSON body as the client sent it (before server defaults): vLLM logs the unknown ones */
  bodyKeys: readonly string[] | null = null;
  /** the error response it got (the after-response hook cannot see it) */
  errorResponse: Response | null = null;
  /** re-entered from /invocations: counted and logged once, under /invocations */
  forwarded = false;

  constructor(readonly request: Request, startedPerfMs: number = performance.now()) {
    this.startedPerfMs = startedPerfMs;
  }

  /** the client's `X-Request-Id` header (the response id's source, vLLM), or null */
  get requestIdHeader(): string | null {
    return this.request.headers.get("x-request-id");
  }

  /** the W3C trace context the client sent (vLLM copies only these two headers to the request's span) */
  get traceHeaders(): Readonly<Record<string, string>> | null {
    const out: Record<string, string> = {};
    for (const name of ["traceparent", "tracestate"]) { const v = this.request.headers.get(name); if (v !== null) out[name] = v; }
    return Object.keys(out).length === 0 ? null : out;
  }

  /** fires when the client goes away */
  get clientSignal(): AbortSignal {
    return this.request.signal;
  }

  /** the body as the client sent it, before Elysia's conversions; undefined when it was not kept */
  rawBody(): unknown {
    return this.rawBodyText === null ? undefined : JSON.parse(this.rawBodyText);
  }

  private arrivalAtMs: number | null = null;

  /**
   * The engine's arrival time (vLLM's arrival_time, on the clock every thread shares): fixed by the first read, when
   * a route starts preparing the request, so body parsing is not counted as queue time.
   */
  get arrivalMs(): number {
    this.arrivalAtMs ??= nowMs();
    return this.arrivalAtMs;
  }
}

/** The contexts of the requests an app is answering, found from the Request the framework hands each hook. */
export class RequestContexts {
  private readonly byRequest = new WeakMap<Request, RequestContext>();

  /** the request's context, opened by the first hook that asks (the app's onRequest; a route mounted alone) */
  of(request: Request): RequestContext {
    let context = this.byRequest.get(request);
    if (context === undefined) {
      context = new RequestContext(request);
      this.byRequest.set(request, context);
    }
    return context;
  }

  /** the context if the request-wide hooks opened one */
  find(request: Request): RequestContext | undefined {
    return this.byRequest.get(request);
  }
}
