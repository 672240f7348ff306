/**
 * Swagger UI at /docs and the OpenAPI document at /openapi.json, from @elysiajs/swagger: every route, its `t` schema,
 * examples, and the bearer-auth scheme. The plugin's page loads Swagger UI from unpkg.com; fennec is one offline binary,
 * so the page is rendered once by the plugin and its two CDN links point at copies embedded in the binary instead.
 * ReDoc at /redoc, as FastAPI serves it for vLLM (fastapi/openapi/docs.py get_redoc_html), from redoc's standalone
 * bundle embedded the same way.
 */
import { swagger } from "@elysiajs/swagger";
import { Elysia } from "elysia";
import pkg from "../../package.json" with { type: "json" };
import { openApiDocument, type OpenApiFacts } from "./openapi-document.ts";
import bundlePath from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "file" };
import cssPath from "swagger-ui-dist/swagger-ui.css" with { type: "file" };
import redocPath from "redoc/bundles/redoc.standalone.js" with { type: "file" };

export const DOCS_PATH = "/docs";
export const OPENAPI_PATH = "/openapi.json";
export const REDOC_PATH = "/redoc";
/** where the plugin serves its own document, read only by fennec's /openapi.json route (404 from outside) */
const PLUGIN_SPEC_PATH = "/openapi.plugin.json";
const ASSETS = [
  { route: `${DOCS_PATH}/assets/swagger-ui-bundle.js`, file: bundlePath, cdnName: "swagger-ui-bundle.js", type: "text/javascript; charset=utf-8" },
  { route: `${DOCS_PATH}/assets/swagger-ui.css`, file: cssPath, cdnName: "swagger-ui.css", type: "text/css; charset=utf-8" },
  { route: `${REDOC_PATH}/assets/redoc.standalone.js`, file: redocPath, cdnName: "redoc.standalone.js", type: "text/javascript; charset=utf-8" },
] as const;

/** FastAPI's ReDoc page (get_redoc_html) with the bundle and the document under --root-path, and no web fonts. */
function redocPage(rootPath: string): string {
  return `<!DOCTYPE html><html><head><title>fennec API - ReDoc</title><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"><style>body{margin:0;padding:0;}</style></head>` +
    `<body><noscript>ReDoc requires Javascript to function. Please enable it to browse the documentation.</noscript><redoc spec-url="${rootPath}${OPENAPI_PATH}"></redoc>` +
    `<script src="${rootPath}${REDOC_PATH}/assets/redoc.standalone.js"></script></body></html>`;
}

/** unpkg links in the plugin's page -> the embedded copies (under --root-path, where the proxy in front serves them). */
function localizeAssets(html: string, rootPath: string): string {
  let out = html;
  for (const asset of ASSETS) out = out.replace(new RegExp(`https://unpkg\\.com/swagger-ui-dist@[^/"]+/${asset.cdnName.replace(".", "\\.")}`, "g"), `${rootPath}${asset.route}`);
  // the page reads fennec's document, not the plugin's raw one
  return out.replace(/ crossorigin(?=>)/g, "").split(`"${PLUGIN_SPEC_PATH.slice(1)}"`).join(`"${OPENAPI_PATH.slice(1)}"`);
}

export function docsRoutes(facts: OpenApiFacts) {
  const ui = swagger({
    provider: "swagger-ui",
    path: DOCS_PATH,
    specPath: PLUGIN_SPEC_PATH,
    exclude: [new RegExp(`^${DOCS_PATH}/assets/`), new RegExp(`^${REDOC_PATH}/assets/`), PLUGIN_SPEC_PATH],
    autoDarkMode: false,
    swaggerOptions: { persistAuthorization: true, displayRequestDuration: true, tryItOutEnabled: true },
    documentation: {
      info: {
        title: "fennec API",
        version: pkg.version,
        description: "OpenAI-compatible API served by fennec (vLLM-compatible). With `--api-key`, /v1 endpoints need `Authorization: Bearer <key>` (or, as Anthropic clients send it, `x-api-key: <key>`): use **Authorize**.",
      },
      tags: [
        { name: "OpenAI", description: "OpenAI-compatible endpoints" },
        { name: "vLLM", description: "vLLM extras" },
        { name: "Server", description: "Health and version" },
      ],
      components: { securitySchemes: { bearerAuth: { type: "http", scheme: "bearer", description: "The server's --api-key." } } },
    },
  });
  let page: string | null = null;
  let document: string | null = null;
  const internal = new WeakSet<Request>();
  const routes = new Elysia({ name: "server-docs" });
  for (const asset of ASSETS) {
    routes.get(asset.route, () => new Response(Bun.file(asset.file), { headers: { "content-type": asset.type, "cache-control": "max-age=86400" } }), { detail: { hide: true } });
  }
  return routes
    // answers /docs (GET and HEAD) before routing reaches the plugin's CDN-linked page; the plugin's route reuses one
    // Response, so a HEAD that reached it used up the body and every later GET /docs failed with a 500
    .onRequest(async ({ request }) => {
      if (request.method !== "GET" && request.method !== "HEAD") return;
      const pathname = new URL(request.url).pathname;
      if (pathname === PLUGIN_SPEC_PATH && !internal.has(request)) return new Response("Not Found", { status: 404 });
      if (pathname === REDOC_PATH) return new Response(redocPage(facts.rootPath ?? ""), { headers: { "content-type": "text/html; charset=utf-8" } });
      if (pathname !== DOCS_PATH) return;
      page ??= localizeAssets(await (await ui.handle(new Request(`http://localhost${DOCS_PATH}`))).text(), facts.rootPath ?? "");
      return new Response(page, { headers: { "content-type": "text/html; charset=utf-8" } });
    })
    // the plugin's document, made valid OpenAPI 3.0 with the served model's examples (openapi-document.ts)
    .get(OPENAPI_PATH, async () => {
      if (document === null) {
        const raw = new Request(`http://localhost${PLUGIN_SPEC_PATH}`);
        internal.add(raw);
        document = JSON.stringify(openApiDocument(await (await ui.handle(raw)).json(), facts));
      }
      return new Response(document, { headers: { "content-type": "application/json" } });
    }, { detail: { hide: true } })
    .use(ui);
}
