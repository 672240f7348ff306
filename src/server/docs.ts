/**
 * Swagger UI at /docs and the OpenAPI document at /openapi.json, from @elysiajs/swagger: every route, its `t` schema,
 * examples, and the bearer-auth scheme. The plugin's page loads Swagger UI from unpkg.com; fennec is one offline binary,
 * so the page is rendered once by the plugin and its two CDN links point at copies embedded in the binary instead.
 */
import { swagger } from "@elysiajs/swagger";
import { Elysia } from "elysia";
import pkg from "../../package.json" with { type: "json" };
import { openApiDocument, type OpenApiFacts } from "./openapi-document.ts";
import bundlePath from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "file" };
import cssPath from "swagger-ui-dist/swagger-ui.css" with { type: "file" };

export const DOCS_PATH = "/docs";
export const OPENAPI_PATH = "/openapi.json";
/** where the plugin serves its own document, read only by fennec's /openapi.json route (404 from outside) */
const PLUGIN_SPEC_PATH = "/openapi.plugin.json";
const ASSETS = [
  { route: `${DOCS_PATH}/assets/swagger-ui-bundle.js`, file: bundlePath, cdnName: "swagger-ui-bundle.js", type: "text/javascript; charset=utf-8" },
  { route: `${DOCS_PATH}/assets/swagger-ui.css`, file: cssPath, cdnName: "swagger-ui.css", type: "text/css; charset=utf-8" },
] as const;

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
    exclude: [new RegExp(`^${DOCS_PATH}/assets/`), PLUGIN_SPEC_PATH],
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
