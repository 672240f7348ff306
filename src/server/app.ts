/**
 * The HTTP app: one named plugin per route group, composed here, plus the request-wide checks (API key, body size,
 * JSON media type) and the one error handler. Reading JSON bodies is request-body.ts, measuring responses for the
 * HTTP metrics http-metrics.ts. Built from `ServerOptions` only, so tests pass a fake orchestrator and
 * call `app.handle(new Request(...))` without a port.
 * @example const app = createApp(options); app.listen({ hostname: "127.0.0.1", port: 8000 });
 */
import { errorMessage } from "../util/error-message.ts";
import { Elysia } from "elysia";
import { clientAddress } from "./access-log.ts";
import { createAuthCheck } from "./auth.ts";
import { createCors, DEFAULT_CORS } from "./cors.ts";
import { applyRequestDefaults, type RequestDefaults } from "./request-defaults.ts";
import { docsRoutes } from "./docs.ts";
import { ApiError, errorPlugin } from "./errors.ts";
import { BODY_IGNORED_PATHS, healthRoutes } from "./health.ts";
import { bodyBytes, headerBytes } from "./http-metrics.ts";
import { createServerLoad, loadRoutes } from "./load.ts";
import { isAnthropicPath, anthropicErrorResponse } from "./anthropic/errors.ts";
import { messagesRoutes } from "./anthropic/route.ts";
import { chatCompletionsRoutes } from "./openai/chat-completion/route.ts";
import { invocationsRoutes } from "./openai/invocations.ts";
import { completionsRoutes } from "./openai/completion/route.ts";
import { embeddingsRoutes } from "./openai/embedding/route.ts";
import { responsesRoutes } from "./openai/responses/route.ts";
import { scoreRoutes } from "./openai/score.ts";
import { modelsRoutes } from "./openai/models.ts";
import { publicRequestId } from "./openai/wire-to-request.ts";
import { tokenizeRoutes } from "./openai/tokenize.ts";
import { renderRoutes } from "./openai/render/route.ts";
import { tokenizerInfoRoutes } from "./openai/tokenizer-info.ts";
import { parseJsonObject, startJsonParser } from "./request-body.ts";
import { promptBoundFor } from "./openai/prompt-text.ts";
import { RequestContexts } from "./request-context.ts";
import type { ServerOptions } from "./server-options.ts";
import { GrammarChecker } from "../grammar/grammar-checker.ts";
import { webUiRoutes } from "./web-ui.ts";
import { ollamaErrorResponse } from "./ollama/ollama-errors.ts";
import { ollamaRoutes } from "./ollama/routes.ts";
import { sleepRoutes } from "./sleep-routes.ts";
import { cacheRoutes } from "./cache-routes.ts";
import { loraRoutes } from "./lora-routes.ts";

/** POST paths whose body is JSON: anything else is refused like vLLM does (400, not a parse attempt). */
const JSON_BODY_PATHS = new Set(["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/pooling", "/score", "/v1/score", "/rerank", "/v1/rerank", "/v2/rerank", "/tokenize", "/detokenize", "/invocations", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens"]);

/** Checks that run before routing, cheapest first; each throws the ApiError to answer with. */
function createRequestChecks(options: ServerOptions): (request: Request) => void {
  const checkAuth = createAuthCheck(options.apiKeys ?? (options.apiKey === null ? [] : [options.apiKey]));
  return (request) => {
    checkAuth(request);
    if (request.method !== "POST") return;
    const length = Number(request.headers.get("content-length") ?? "0");
    if (length > options.maxBodyBytes) {
      throw new ApiError("payloadTooLarge", `Request body of ${length} bytes is larger than the limit of ${options.maxBodyBytes} bytes.`);
    }
    if (!JSON_BODY_PATHS.has(new URL(request.url).pathname)) return;
    const mediaType = (request.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
    if (mediaType !== "application/json") {
      throw new ApiError("invalidBody", "1 validation error: Unsupported Media Type: Only 'application/json' is allowed", "Content-Type");
    }
  };
}


export function createApp(options: ServerOptions) {
  // one grammar checker per app (its xgrammar thread starts with the first structured request)
  if (!options.grammarChecker) options = { ...options, grammarChecker: new GrammarChecker() };
  const checkRequest = createRequestChecks(options);
  startJsonParser();
  // every per-request fact (start time, client, raw body, error response, forwarded) lives on its RequestContext
  const contexts = new RequestContexts();
  const rawBodyOf = (request: Request): unknown => contexts.find(request)?.rawBody();
  // filled once the routes exist: the methods each path answers (405 instead of 404 for the others)
  const methodsByPath = new Map<string, string[]>();
  const methodsOf = (pathname: string): readonly string[] => methodsByPath.get(pathname) ?? [];
  const noteError = (request: Request, response: Response) => void (contexts.of(request).errorResponse = response);
  const cors = createCors(options.cors ?? DEFAULT_CORS);
  const requestDefaults: RequestDefaults = { names: [options.servedModelName, ...(options.servedModelAliases ?? [])], sampling: options.generationDefaults ?? {} };
  const load = createServerLoad(options.enableServerLoadTracking === true);
  // set once the app exists: /invocations answers through the app's own routes
  let handleSelf: (request: Request) => Promise<Response> = () => Promise.reject(new Error("the app is not built yet"));
  const app = new Elysia({ name: "fennec" })
    .use(errorPlugin(options.log, { rawBodyOf, methodsOf, noteError, dialectResponse: (request, error) => (isAnthropicPath(new URL(request.url).pathname) ? anthropicErrorResponse(error, request) : ollamaErrorResponse(request, error)) }))
    .onRequest(({ request, set, server }) => {
      const context = contexts.of(request);
      // read now: once the response is out the socket may be gone
      if (options.accessLog !== undefined) context.client = clientAddress(options.peerOf?.(request) ?? server?.requestIP(request));
      const preflight = cors.preflight(request);
      if (preflight !== null) {
        // answered before routing, so the after-response hook never sees it: its access line is written here
        const url = new URL(request.url);
        options.accessLog?.({ client: context.client, method: request.method, target: options.targetOf?.(request) ?? `${url.pathname}${url.search}`, status: preflight.status });
        return preflight;
      }
      Object.assign(set.headers, cors.responseHeaders(request));
      if (options.enableRequestIdHeaders === true) {
        set.headers["x-request-id"] = publicRequestId(request.headers.get("x-request-id"), null);
      }
      checkRequest(request);
    })
    .onParse(async ({ request, contentType }) => {
      if (!contentType.startsWith("application/json")) return undefined;
      const pathname = new URL(request.url).pathname;
      if (BODY_IGNORED_PATHS.has(pathname)) return null;
      const { orchestrator } = options;
      const { body, rawText } = await parseJsonObject(request, options.maxBodyBytes, promptBoundFor(pathname, orchestrator.tokenizer, orchestrator.maxModelLen));
      contexts.of(request).rawBodyText = rawText;
      contexts.of(request).bodyKeys = Object.keys(body);
      applyRequestDefaults(pathname, body, requestDefaults);
      return body;
    })
    // before the routes: Elysia applies a hook only to routes registered after it
    .onAfterResponse({ as: "global" }, ({ request, route, set, ...rest }) => {
      // a forwarded /invocations body is counted and logged once, under /invocations (as vLLM's instrumentator sees it)
      const context = contexts.of(request);
      if (context.forwarded) return;
      // runs after the response is out: a failure here must never reach the process (it would end the server)
      try {
        const response = context.errorResponse ?? ("response" in rest && rest.response instanceof Response ? rest.response : null);
        const status = response?.status ?? (typeof set.status === "number" ? set.status : 200);
        const url = new URL(request.url);
        const pathname = url.pathname;
        options.accessLog?.({ client: context.client, method: request.method, target: options.targetOf?.(request) ?? `${pathname}${url.search}`, status });
        if (options.onHttpResponse === undefined) return;
        options.onHttpResponse({
          // the matched route, also for requests refused before routing (401, 413): the instrumentator labels those too
          handler: route || (methodsOf(pathname).includes(request.method) ? pathname : null),
          method: request.method,
          status,
          durationS: (performance.now() - context.startedPerfMs) / 1000,
          requestBytes: headerBytes(request.headers.get("content-length")),
          responseBytes: response !== null ? headerBytes(response.headers.get("content-length")) : bodyBytes("responseValue" in rest ? rest.responseValue : undefined),
        });
      } catch (error) {
        options.log(`HTTP metrics skipped a response: ${errorMessage(error)}`, "WARNING");
      }
    })
    .use(options.disableDocs === true ? new Elysia({ name: "server-docs-off" }) : docsRoutes({ servedModelName: options.servedModelName, modelPath: options.modelPath, maxModelLen: options.orchestrator.maxModelLen, ...(options.rootPath ? { rootPath: options.rootPath } : {}) }))
    .use(options.disableWebUi === true ? new Elysia({ name: "web-ui-off" }) : webUiRoutes())
    .use(healthRoutes(options))
    .use(modelsRoutes(options))
    .use(loadRoutes(load))
    .use(chatCompletionsRoutes(options, load.track, contexts))
    .use(completionsRoutes(options, load.track, contexts))
    .use(messagesRoutes(options, load.track, contexts))
    .use(embeddingsRoutes(options, load.track, contexts))
    .use(responsesRoutes(options, load.track, contexts))
    .use(scoreRoutes(options, load.track, contexts))
    .use(tokenizeRoutes(options))
    .use(renderRoutes(options, contexts))
    .use(options.enableTokenizerInfoEndpoint === true ? tokenizerInfoRoutes(options) : new Elysia())
    .use(ollamaRoutes(options, load.track, contexts))
    .use(options.devMode === true ? sleepRoutes(options.sleepControl ?? null) : new Elysia({ name: "dev-off" }))
    .use(options.devMode === true ? cacheRoutes(options.cacheControl ?? null, options.log) : new Elysia({ name: "dev-cache-off" }))
    .use(options.lora?.runtimeUpdates === true ? loraRoutes(options.lora) : new Elysia({ name: "lora-runtime-off" }))
    .use(invocationsRoutes((path, body, request) => {
      // re-enters this app as the route itself; /invocations is open, so it carries the server's own key
      const headers: Record<string, string> = { "content-type": "application/json" };
      const requestId = request.headers.get("x-request-id");
      if (requestId !== null) headers["x-request-id"] = requestId;
      if (options.apiKey !== null) headers["authorization"] = `Bearer ${options.apiKey}`;
      const inner = new Request(new URL(path, request.url), { method: "POST", headers, body: JSON.stringify(body), signal: request.signal });
      contexts.of(inner).forwarded = true;
      return handleSelf(inner);
    }));
  handleSelf = (request) => app.handle(request);
  const full = options.metricsRoute ? app.use(options.metricsRoute) : app;
  for (const route of full.routes) {
    const methods = methodsByPath.get(route.path) ?? [];
    methods.push(route.method);
    if (route.method === "GET") methods.push("HEAD");
    methodsByPath.set(route.path, methods);
  }
  return full;
}
