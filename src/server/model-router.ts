/**
 * The front of a several-model server (llama-server's router mode, tools/server/README.md "Using multiple models"):
 * each model has its own app (its own orchestrator, engine Worker and metrics), and this router sends a JSON POST to
 * the app its body's `model` names, loading the model on demand through the registry; GET routes with `?model=` go the
 * same way. The router answers itself what spans the models: /health (the server, not one engine), /v1/models (every
 * served model with a `loaded` flag, as llama-server's /models status), and /metrics (every loaded model's series, each
 * labelled with its model_name, as vLLM's one registry holds them). A model's LoRA adapters (its --lora-modules) are
 * names of that model: a request naming one goes to the model's app (which runs the adapter), and /v1/models lists
 * each with its parent, as vLLM's show_available_models does.
 */
import { errorMessage } from "../util/error-message.ts";
import { createAuthCheck } from "./auth.ts";
import { ApiError } from "./errors.ts";
import { withTag } from "./ollama/model-names.ts";
import { severalModelsTags } from "./ollama/several-models-tags.ts";
import { ModelLoadError, ModelNotFoundError, ModelOverloadedError, type ModelLease, type ModelRegistry, type UnloadReason } from "./model-registry.ts";

/** One model's server: its app's handler, its engine's health and its metrics' text. */
export interface ModelApp {
  handle(request: Request): Promise<Response>;
  isHealthy(): boolean;
  /** the model's Prometheus text (its recorder's registry) */
  metricsText(): Promise<string>;
  readonly maxModelLen: number;
  shutdown(reason?: UnloadReason): Promise<void>;
}

export interface ModelRouterOptions {
  readonly apiKeys: readonly string[];
  readonly log: (line: string) => void;
  /** the server's own series (process, HTTP), shown before the models'; absent: none */
  readonly serverMetrics?: () => Promise<string>;
  /** each served LoRA adapter by name: the model whose app serves it, its card's parent and its file; the router adds
   * and removes runtime loads here */
  readonly adapters?: Map<string, RoutedAdapter>;
  /** runtime LoRA loads across the models (VLLM_ALLOW_RUNTIME_LORA_UPDATING): absent, those routes go to a model's app */
  readonly runtimeLora?: RuntimeLora;
}

/** What the router needs to pick the base model of a runtime-loaded adapter. */
export interface RuntimeLora {
  /** the served models with LoRA enabled, in order */
  readonly models: readonly string[];
  /** which of them the adapter file fits (architecture, tensor shapes, rank), or why it cannot be read */
  fits(path: string): { readonly fits: readonly string[]; readonly misfits: readonly { readonly model: string; readonly reason: string }[] } | string;
}

/** A LoRA adapter of one of the models. */
export interface RoutedAdapter {
  /** the served name of the model whose engine holds it */
  readonly model: string;
  /** base_model_name, else that model's name (vLLM's ModelCard parent) */
  readonly parent: string;
  readonly path: string;
  /** loaded through POST /v1/load_lora_adapter (its model's front end, built again, loads it again) */
  readonly runtime?: boolean;
}

/** Ollama's keep_alive (api.Duration): a number is seconds, a string a Go duration ("5m", "1h30m"); negative = forever. */
export function keepAliveMs(value: unknown): number | null {
  if (typeof value === "number" && Number.isFinite(value)) return value < 0 ? -1 : value * 1000;
  if (typeof value !== "string") return null;
  const text = value.trim();
  if (/^-?\d+(\.\d+)?$/.test(text)) return keepAliveMs(Number(text));
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const match = /^(-?)((?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+)$/.exec(text);
  if (match === null) return null;
  let ms = 0;
  for (const part of match[2]!.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(part[1]) * units[part[2]!]!;
  return match[1] === "-" ? -1 : ms;
}

/** The requests this router hands to a model's app: their keep_alive is applied through the registry (Ollama's routes
 * accept keep_alive 0, an unload, only on these) and their LOAD_MS_HEADER is the router's. A client cannot mark one. */
export const routedRequests = new WeakSet<Request>();

/** ms the request waited for its model's load: on the request a model's app sees, and on the answer */
export const LOAD_MS_HEADER = "x-model-load-ms";
/** the expiry Ollama reports for a model kept forever (its max duration added to now lands in year 2318) */
const FOREVER_MS = Date.UTC(2318, 0, 1);

function errorResponse(status: number, type: string, message: string, param: string | null = null): Response {
  return Response.json({ error: { message, type, param, code: status } }, { status });
}

/** The registry's errors as the API's: unknown model 404 (vLLM's text), overload and failed load 503. */
function registryError(e: unknown): Response {
  if (e instanceof ModelNotFoundError) return errorResponse(404, "NotFoundError", e.message, "model");
  if (e instanceof ModelOverloadedError || e instanceof ModelLoadError) return errorResponse(503, "ServiceUnavailableError", e.message);
  throw e;
}

/** A response whose body releases the lease when it is fully read or cancelled (a stream holds its model to the end). */
export function releasingBody(response: Response, release: () => void, loadMs: number): Response {
  const headers = new Headers(response.headers);
  if (loadMs > 0) headers.set(LOAD_MS_HEADER, String(loadMs));
  if (response.body === null) { release(); return new Response(null, { status: response.status, statusText: response.statusText, headers }); }
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) { controller.close(); release(); } else controller.enqueue(value);
      } catch (e) {
        release();
        controller.error(e);
      }
    },
    cancel(reason) { release(); return reader.cancel(reason); },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers });
}

/**
 * One model's exposition with every series labelled by its model_name: vLLM's info gauges (cache_config_info) carry
 * only `engine`, which tells nothing apart when several models share one /metrics, so they get the model's name too.
 */
export function withModelName(text: string, modelName: string): string {
  const label = `model_name="${modelName.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`;
  return text.split("\n").map((line) => {
    if (line === "" || line.startsWith("#")) return line;
    const brace = line.indexOf("{");
    const space = line.indexOf(" ");
    if (brace < 0 || brace > space) return `${line.slice(0, space)}{${label}}${line.slice(space)}`;
    if (/[{,]model_name="/.test(line.slice(brace, line.lastIndexOf("}") + 1))) return line;
    return `${line.slice(0, brace + 1)}${label}${line[brace + 1] === "}" ? "" : ","}${line.slice(brace + 1)}`;
  }).join("\n");
}

/** Prometheus texts of several registries as one exposition: each family's HELP and TYPE once, the samples of all;
 * a series already given by an earlier text (same name and labels) is kept once. */
export function mergeExpositions(texts: readonly string[]): string {
  const families = new Map<string, { head: string[]; samples: string[] }>();
  const seen = new Set<string>();
  texts.forEach((text) => {
    let current: { head: string[]; samples: string[] } | null = null;
    for (const line of text.split("\n")) {
      if (line === "") continue;
      const meta = /^# (HELP|TYPE) (\S+)/.exec(line);
      if (meta !== null) {
        let family = families.get(meta[2]!);
        if (family === undefined) { family = { head: [], samples: [] }; families.set(meta[2]!, family); }
        if (family.head.length < 2 && !family.head.some((h) => h.startsWith(`# ${meta[1]} `))) family.head.push(line);
        current = family;
        continue;
      }
      if (current === null) continue;
      const key = line.slice(0, line.lastIndexOf(" "));
      if (seen.has(key)) continue;
      seen.add(key);
      current.samples.push(line);
    }
  });
  return [...families.values()].map((f) => [...f.head, ...f.samples].join("\n")).join("\n") + "\n";
}

export function createModelRouter(registry: ModelRegistry<ModelApp>, options: ModelRouterOptions): (request: Request) => Promise<Response> {
  const checkAuth = createAuthCheck(options.apiKeys);
  const adapters = options.adapters ?? new Map<string, RoutedAdapter>();
  /** the adapter a request names: its name as served, or in Ollama's form (`sql` is `sql:latest`, any case) */
  const adapterNamed = (name: string): RoutedAdapter | undefined => {
    const exact = adapters.get(name);
    if (exact !== undefined) return exact;
    const wanted = withTag(name).toLowerCase();
    return [...adapters].find(([served]) => withTag(served).toLowerCase() === wanted)?.[1];
  };
  const listModels = () => {
    const created = Math.floor(Date.now() / 1000);
    return {
      object: "list",
      data: registry.list().flatMap((m) => [m.name, ...m.aliases].map((id) => ({
        id, object: "model", created, owned_by: "fennec", root: m.source, parent: null as string | null,
        max_model_len: registry.peek(m.name)?.maxModelLen ?? null as number | null,
        // llama-server's /models status, flattened: loaded now, or loadable on the first request
        loaded: m.state === "loaded",
      }))).concat([...adapters].map(([id, a]) => ({
        // vLLM's adapter card: root = its path, parent = its base model, no max_model_len; loaded with its model
        id, object: "model", created, owned_by: "fennec", root: a.path, parent: a.parent, max_model_len: null,
        loaded: registry.list().some((m) => m.name === a.model && m.state === "loaded"),
      }))),
    };
  };
  // Ollama's GET /api/ps (server/routes.go PsHandler): the loaded models, latest expiry first; a model kept forever
  // or in use has no deadline, shown as Ollama shows "forever" (a far-future time)
  // a LoRA adapter is a model of its own in Ollama (details.parent_model = its base): listed while its base is loaded.
  // Digest and details are the model's app's (its GGUF's facts); size and expiry the registry's
  const ps = async () => {
    const models = await Promise.all(registry.list().filter((m) => m.state === "loaded").map(async (m) => {
      const app = registry.peek(m.name);
      const own = app === null ? [] : await app.handle(new Request("http://fennec/api/ps")).then((r) => (r.ok ? r.json() as Promise<{ models?: { name: string; digest: string; details: object }[] }> : null)).then((b) => b?.models ?? []).catch(() => []);
      const names = [[m.name, ""], ...[...adapters].filter(([, a]) => a.model === m.name).map(([name, a]) => [name, withTag(a.parent)])] as [string, string][];
      return names.map(([name, parent]) => {
        const entry = own.find((e) => e.name === withTag(name)) ?? (parent === "" ? own[0] : undefined);
        return {
          name, model: name, size: m.bytes, digest: entry?.digest ?? "", details: { ...(entry?.details ?? { format: "gguf" }), parent_model: parent },
          expires_at: new Date(m.expiresAtMs ?? FOREVER_MS).toISOString(), size_vram: 0, context_length: app?.maxModelLen ?? 0,
        };
      });
    }));
    return { models: models.flat().sort((x, y) => y.expires_at.localeCompare(x.expires_at)) };
  };
  const metrics = async (): Promise<Response> => {
    const loaded = registry.list().flatMap((m) => { const app = registry.peek(m.name); return app === null ? [] : [{ name: m.name, app }]; });
    const texts = await Promise.all([options.serverMetrics?.() ?? Promise.resolve(""), ...loaded.map(async (m) => withModelName(await m.app.metricsText(), m.name))]);
    const text = mergeExpositions(texts);
    return new Response(text, { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } });
  };
  /** The model a request names: the body's `model`, else `?model=`, else a loaded one (the page, /docs, /version
   * need no particular model), else the first served one. */
  /** `keepAlive`: the request's keep_alive in ms, null = the model's default, undefined = left as it is */
  const forward = async (request: Request, name: string | null, keepAlive: number | null | undefined, body: string | null): Promise<Response> => {
    const models = registry.list();
    const target = name === null ? (models.find((m) => m.state === "loaded") ?? models[0]!).name : (adapterNamed(name)?.model ?? name);
    let lease: ModelLease<ModelApp>;
    try {
      lease = await registry.acquire(target);
    } catch (e) {
      return registryError(e);
    }
    const release = () => lease.release(keepAlive);
    try {
      // the load this request waited for, for a dialect with room for it in its answer (Ollama's load_duration); a
      // client's own header of that name is dropped
      const headers = new Headers(request.headers);
      headers.delete(LOAD_MS_HEADER);
      // a body given here may be the router's rewrite of the client's
      if (body !== null) headers.delete("content-length");
      if (lease.loadMs > 0) headers.set(LOAD_MS_HEADER, String(lease.loadMs));
      const inner = new Request(request.url, { method: request.method, headers, body: body ?? request.body, signal: request.signal });
      routedRequests.add(inner);
      const response = await lease.model.handle(inner);
      return releasingBody(response, release, lease.loadMs);
    } catch (e) {
      release();
      options.log(`model ${lease.name}: ${errorMessage(e)}`);
      return errorResponse(500, "InternalServerError", errorMessage(e));
    }
  };
  const loraError = (status: 400 | 404, message: string) => errorResponse(status, status === 400 ? "InvalidUserInput" : "NotFoundError", message);
  /**
   * vLLM's load_lora_adapter with several base models: the adapter goes to the model it fits (its architecture and
   * tensor shapes), to the one its `base_model_name` names (the field of vLLM's --lora-modules JSON and LoRARequest)
   * when it fits several, or to the model that serves it already (load_inplace). Bodies the route itself refuses go
   * to the first LoRA model's app, which answers vLLM's 400 / 404.
   */
  const loadAdapter = async (request: Request, lora: RuntimeLora, text: string): Promise<Response> => {
    let parsed: unknown = null;
    try { parsed = JSON.parse(text); } catch { /* the app answers */ }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return forward(request, lora.models[0]!, undefined, text);
    const { base_model_name: base, ...fields } = parsed as Record<string, unknown>;
    const name = fields["lora_name"];
    const path = fields["lora_path"];
    const body = JSON.stringify(fields);
    if (typeof name !== "string" || name === "" || typeof path !== "string" || path === "") return forward(request, lora.models[0]!, undefined, body);
    const served = adapters.get(name);
    let target: string;
    if (base !== undefined && base !== null) {
      const model = typeof base === "string" ? registry.canonicalName(base) : null;
      if (model === null || !lora.models.includes(model)) return loraError(400, `Loading lora ${name} failed: base_model_name ${JSON.stringify(base)} is not a served model with LoRA enabled (${lora.models.join(", ")}).`);
      if (served !== undefined && served.model !== model) return loraError(400, `Loading lora ${name} failed: the adapter '${name}' is loaded for ${served.model}; unload it first.`);
      target = model;
    } else if (served !== undefined) {
      target = served.model;
    } else if (registry.canonicalName(name) !== null) {
      return loraError(400, `Loading lora ${name} failed: '${name}' is a served model's name; give the adapter another name.`);
    } else {
      const fit = lora.fits(path);
      if (typeof fit === "string") return forward(request, lora.models[0]!, undefined, body);
      if (fit.fits.length === 0) return loraError(400, `Loading lora ${name} failed: the adapter fits none of the served models (${fit.misfits.map((m) => `${m.model}: ${m.reason}`).join("; ")}).`);
      if (fit.fits.length > 1) return loraError(400, `Loading lora ${name} failed: the adapter fits several served models (${fit.fits.join(", ")}); name one as base_model_name.`);
      target = fit.fits[0]!;
    }
    const response = await forward(request, target, undefined, body);
    if (response.status === 200) adapters.set(name, { model: target, parent: target, path, runtime: true });
    return response;
  };
  /** vLLM's unload_lora_adapter: to the model that serves the adapter (an unknown name: the first LoRA model's 404) */
  const unloadAdapter = async (request: Request, lora: RuntimeLora, text: string): Promise<Response> => {
    let name: unknown = null;
    try { name = (JSON.parse(text) as Record<string, unknown> | null)?.["lora_name"]; } catch { /* the app answers */ }
    const served = typeof name === "string" ? adapters.get(name) : undefined;
    const response = await forward(request, served?.model ?? lora.models[0]!, undefined, text);
    if (response.status === 200 && typeof name === "string") adapters.delete(name);
    return response;
  };
  return async (request) => {
    const url = new URL(request.url);
    try {
      checkAuth(request);
    } catch (e) {
      if (e instanceof ApiError) return errorResponse(401, "Unauthorized", e.message);
      throw e;
    }
    if (request.method === "GET" && (url.pathname === "/health" || url.pathname === "/ping")) return new Response(null, { status: 200 });
    if (request.method === "GET" && url.pathname === "/v1/models") return Response.json(listModels());
    if (request.method === "GET" && url.pathname.startsWith("/v1/models/")) {
      const id = decodeURIComponent(url.pathname.slice("/v1/models/".length));
      const card = listModels().data.find((m) => m.id === id);
      return card !== undefined ? Response.json(card) : errorResponse(404, "NotFoundError", `The model \`${id}\` does not exist.`, "model");
    }
    if (request.method === "GET" && url.pathname === "/metrics") return metrics();
    if (request.method === "GET" && url.pathname === "/api/ps") return Response.json(await ps());
    if (request.method === "GET" && url.pathname === "/api/tags") return Response.json(await severalModelsTags(registry.list(), (name) => registry.peek(name), adapters));
    const queryModel = url.searchParams.get("model");
    // Ollama reads a body as JSON whatever its Content-Type (its documented calls are `curl -d`), so /api/ bodies are read
    if (request.method !== "POST" || (!(request.headers.get("content-type") ?? "").includes("application/json") && !url.pathname.startsWith("/api/"))) {
      return forward(request, queryModel, undefined, null);
    }
    const text = await request.text();
    if (options.runtimeLora !== undefined && url.pathname === "/v1/load_lora_adapter") return loadAdapter(request, options.runtimeLora, text);
    if (options.runtimeLora !== undefined && url.pathname === "/v1/unload_lora_adapter") return unloadAdapter(request, options.runtimeLora, text);
    let model: string | null = queryModel;
    // each request sets its model's keep-alive, as in Ollama (its OpenAI routes too): its own keep_alive (Ollama's
    // routes) or the default (null); an invalid keep_alive leaves it (undefined), the app answers the 400
    let keepAlive: number | null | undefined = null;
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
        const fields = parsed as Record<string, unknown>;
        if (typeof fields["model"] === "string") model = fields["model"];
        // Ollama's routes read keep_alive; the registry applies it when the request ends
        if (url.pathname.startsWith("/api/") && "keep_alive" in fields) keepAlive = keepAliveMs(fields["keep_alive"]) ?? undefined;
      }
    } catch {
      // not JSON: the model's app answers with its own 400
    }
    return forward(request, model, keepAlive, text);
  };
}
