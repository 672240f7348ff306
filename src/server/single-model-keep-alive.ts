/**
 * Ollama's keep_alive on a server of one model (ollama server/sched.go: its one model is unloaded like any other). The
 * model's front end (routes, tokenizer, parsers, metrics) stays; what is unloaded is its engine (its Worker: weights
 * and KV cache), stopped and started as a several-model server does (server/model-registry.ts, one slot). An Ollama
 * request's `keep_alive: 0` unloads the engine once it ends (the empty prompt with 0 is Ollama's unload call, answered
 * `done_reason: "unload"`); the next POST of any route loads it again and waits, and the Ollama routes report that
 * wait as `load_duration`. Other methods (GET: /health, /metrics, /v1/models, /api/ps, which is empty while unloaded,
 * the pages) need no engine and answer without loading it, untouched.
 * Unlike Ollama (OLLAMA_KEEP_ALIVE, 5 minutes), the model is kept forever by default, as vLLM keeps it, and a
 * positive keep_alive only sets the expiry /api/ps reports; with `--keep-alive` given, that default and every
 * request's keep_alive apply as on a several-model server. Every request that does not ask for an unload is served
 * exactly as by the app alone.
 * @example const keeper = await keepSingleModel(app, engine, { name, log }); listen(keeper.handle);
 */
import { errorMessage } from "../util/error-message.ts";
import { ModelRegistry, type ModelLease } from "./model-registry.ts";
import { keepAliveMs, LOAD_MS_HEADER, releasingBody, routedRequests } from "./model-router.ts";

export interface SingleModelOptions {
  /** the served name (the registry's one slot; its lines name it) */
  readonly name: string;
  /** --keep-alive in ms when given (negative = forever); null: kept forever unless a request sends keep_alive 0 */
  readonly defaultKeepAliveMs: number | null;
  readonly log: (line: string) => void;
  /** a request handed to the app in place of `outer` (its body re-read, or a load's header added) */
  readonly onInner?: (inner: Request, outer: Request) => void;
  /** the engine stopped (an unload) or started again (a later load) */
  readonly onEngine?: (state: "stopped" | "started") => void;
}

export interface SingleModelKeeper {
  handle(request: Request): Promise<Response>;
  /** whether the engine is loaded (it is at start) */
  loaded(): boolean;
  shutdown(): Promise<void>;
}

interface Engine {
  stop(): Promise<void>;
  start(): Promise<void>;
}

interface LoadedEngine {
  shutdown(): Promise<void>;
}

/** Wraps the one model's app; resolves once the registry holds the (already started) engine as loaded. */
export async function keepSingleModel(app: { handle(request: Request): Promise<Response> }, engine: Engine, options: SingleModelOptions): Promise<SingleModelKeeper> {
  let started = false;
  let quiet = true;
  const registry = new ModelRegistry<LoadedEngine>([{
    name: options.name, source: options.name,
    load: async () => {
      // the first load is the engine serve started already; a later one starts it again under the same front end
      if (started) { await engine.start(); options.onEngine?.("started"); }
      started = true;
      return {
        shutdown: async () => {
          await engine.stop();
          options.onEngine?.("stopped");
          // collect now what the engine left on this heap, so the process's memory comes back while idle
          Bun.gc(false);
        },
      };
    },
  }], {
    maxLoadedModels: null, maxMemoryBytes: null, maxWaitingPerModel: Number.MAX_SAFE_INTEGER,
    defaultKeepAliveMs: options.defaultKeepAliveMs ?? -1,
    log: (line) => { if (!quiet) options.log(line); },
  });
  (await registry.acquire(options.name)).release();
  quiet = false;

  /** the keep-alive a request asks for when it ends: null restores the default, undefined leaves it */
  const requested = (value: number | null | undefined): number | null | undefined => {
    if (options.defaultKeepAliveMs !== null || value === undefined || value === null) return value;
    // no --keep-alive: only an unload is done; any other value leaves the model loaded, as before
    return value === 0 ? 0 : null;
  };

  const handle = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const path = url.pathname;
    // only a POST generates: the rest is the front end's alone, and a scrape of /metrics must not reload the model
    if (request.method !== "POST") {
      if (request.method === "GET" && path === "/api/ps" && !isLoaded()) return Response.json({ models: [] });
      return app.handle(request);
    }
    // an Ollama body is read for its keep_alive (whatever its Content-Type: Ollama's `curl -d`); others pass as they are
    let body: string | null = null;
    let keepAlive: number | null | undefined = null;
    if (path.startsWith("/api/")) {
      body = await request.text();
      try {
        const parsed: unknown = JSON.parse(body);
        if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) && "keep_alive" in parsed) {
          // an invalid keep_alive leaves the model as it is; the route answers Ollama's 400
          keepAlive = keepAliveMs((parsed as Record<string, unknown>)["keep_alive"]) ?? undefined;
        }
      } catch {
        // not JSON: the route answers its own 400
      }
    }
    let lease: ModelLease<LoadedEngine>;
    try {
      lease = await registry.acquire(options.name);
    } catch (e) {
      return Response.json({ error: { message: errorMessage(e), type: "ServiceUnavailableError", param: null, code: 503 } }, { status: 503 });
    }
    const release = () => lease.release(requested(keepAlive));
    try {
      let inner = request;
      if (body !== null || lease.loadMs > 0) {
        const headers = new Headers(request.headers);
        headers.delete(LOAD_MS_HEADER);
        if (lease.loadMs > 0) headers.set(LOAD_MS_HEADER, String(lease.loadMs));
        inner = new Request(request.url, { method: request.method, headers, body: body ?? request.body, signal: request.signal });
        options.onInner?.(inner, request);
      }
      // the Ollama routes accept keep_alive 0 (an unload) and read the load's wait only from a request marked here
      routedRequests.add(inner);
      return releasingBody(await app.handle(inner), release, lease.loadMs);
    } catch (e) {
      release();
      throw e;
    }
  };
  const isLoaded = () => registry.list()[0]!.state === "loaded";
  return { handle, loaded: isLoaded, shutdown: () => registry.shutdown() };
}
