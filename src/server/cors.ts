/**
 * CORS as vLLM configures it: Starlette's CORSMiddleware (starlette/middleware/cors.py) with --allowed-origins,
 * --allowed-methods, --allowed-headers (each a JSON list, default ["*"]) and --allow-credentials (default off).
 * A preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered here: 200 with the allow headers,
 * or 400 naming what is disallowed. Any other request with an Origin gets Access-Control-Allow-Origin when its origin
 * is allowed. With all headers allowed (the default) a preflight's requested headers are echoed, so browser SDKs that
 * send their own headers (the openai SDK's x-stainless-*) pass.
 * @example const cors = createCors(DEFAULT_CORS); const early = cors.preflight(request); if (early) return early;
 */
import type { CorsSettings } from "../config/server-settings.ts";

/** vLLM's defaults (vllm/entrypoints/openai/cli_args.py). */
export const DEFAULT_CORS: CorsSettings = { allowedOrigins: ["*"], allowedMethods: ["*"], allowedHeaders: ["*"], allowCredentials: false };

/** Starlette's ALL_METHODS and SAFELISTED_HEADERS. */
const ALL_METHODS = ["DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"];
const SAFELISTED_HEADERS = ["Accept", "Accept-Language", "Content-Language", "Content-Type"];
const MAX_AGE_S = "600";

export interface Cors {
  /** the answer to a CORS preflight; null when the request is not one */
  preflight(request: Request): Response | null;
  /** headers to add to the response of any other request */
  responseHeaders(request: Request): Record<string, string>;
}

export function createCors(config: CorsSettings): Cors {
  const allOrigins = config.allowedOrigins.includes("*");
  const allHeaders = config.allowedHeaders.includes("*");
  const methods = config.allowedMethods.includes("*") ? ALL_METHODS : config.allowedMethods.map((m) => m.toUpperCase());
  const headerList = [...new Set([...SAFELISTED_HEADERS, ...config.allowedHeaders])].sort();
  const headers = new Set(headerList.map((h) => h.toLowerCase()));
  const originAllowed = (origin: string): boolean => allOrigins || config.allowedOrigins.includes(origin);
  // a wildcard cannot be sent with credentials: Starlette echoes the origin then
  const explicitOrigin = !allOrigins || config.allowCredentials;

  return {
    preflight(request) {
      const origin = request.headers.get("origin");
      const method = request.headers.get("access-control-request-method");
      if (request.method !== "OPTIONS" || origin === null || method === null) return null;
      const out: Record<string, string> = { "access-control-allow-methods": methods.join(", "), "access-control-max-age": MAX_AGE_S, "content-type": "text/plain; charset=utf-8" };
      out["access-control-allow-origin"] = explicitOrigin ? origin : "*";
      if (explicitOrigin) out["vary"] = "Origin";
      if (config.allowCredentials) out["access-control-allow-credentials"] = "true";
      const requested = request.headers.get("access-control-request-headers");
      if (allHeaders && requested !== null) out["access-control-allow-headers"] = requested;
      else out["access-control-allow-headers"] = headerList.join(", ");
      const failures: string[] = [];
      if (!originAllowed(origin)) failures.push("origin");
      if (!methods.includes(method.toUpperCase())) failures.push("method");
      if (!allHeaders && requested !== null && requested.split(",").map((h) => h.trim().toLowerCase()).some((h) => h !== "" && !headers.has(h))) failures.push("headers");
      if (failures.length > 0) {
        if (!originAllowed(origin)) delete out["access-control-allow-origin"];
        return new Response(`Disallowed CORS ${failures.join(", ")}`, { status: 400, headers: out });
      }
      return new Response("OK", { status: 200, headers: out });
    },
    responseHeaders(request) {
      const origin = request.headers.get("origin");
      if (origin === null) return allOrigins && !config.allowCredentials ? { "access-control-allow-origin": "*" } : {};
      if (!originAllowed(origin)) return {};
      const out: Record<string, string> = { "access-control-allow-origin": explicitOrigin ? origin : "*" };
      if (explicitOrigin) out["vary"] = "Origin";
      if (config.allowCredentials) out["access-control-allow-credentials"] = "true";
      return out;
    },
  };
}
