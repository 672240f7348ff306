/**
 * --api-key (vllm/entrypoints/openai/api_server.py: AuthenticationMiddleware): requests to /v1 paths need `Authorization: Bearer <key>` (scheme case-insensitive),
 * or, without an Authorization header, `x-api-key: <key>` as Anthropic's clients send it (llama.cpp server-http.cpp reads both); everything else (/health, /metrics, /docs, /tokenize, ...) stays open, and so do CORS preflights (OPTIONS).
 * Keys are compared as SHA-256 digests in constant time, as vLLM does.
 */
import { timingSafeEqual } from "node:crypto";
import { ApiError } from "./errors.ts";

// /api: Ollama's routes generate too, so the key guards them as well (Ollama's clients send Authorization: Bearer)
export const PROTECTED_PREFIXES = ["/v1", "/v2", "/inference", "/cohere", "/api"] as const;

function digest(text: string): Buffer {
  return Buffer.from(new Bun.CryptoHasher("sha256").update(text).digest());
}

function isProtected(pathname: string): boolean {
  return PROTECTED_PREFIXES.some((p) => pathname === p || pathname.startsWith(`${p}/`));
}

/** Returns a checker that throws a 401 ApiError for a request without one of the keys (vLLM: several --api-key); no keys = no checks. */
export function createAuthCheck(apiKeys: readonly string[]): (request: Request) => void {
  if (apiKeys.length === 0) return () => {};
  const expected = apiKeys.map(digest);
  return (request) => {
    if (request.method === "OPTIONS") return;
    if (!isProtected(new URL(request.url).pathname)) return;
    const header = request.headers.get("authorization");
    const match = header === null ? null : /^bearer\s+(.+)$/i.exec(header.trim());
    const apiKeyHeader = request.headers.get("x-api-key");
    const key = header === null ? apiKeyHeader : match?.[1] ?? null;
    const given = key === null ? null : digest(key);
    // every key is compared (no early exit), each in constant time
    const ok = given !== null && expected.map((key) => timingSafeEqual(given, key)).includes(true);
    if (!ok) {
      throw new ApiError("unauthorized", "Unauthorized: a valid API key is required (Authorization: Bearer <key>, or x-api-key: <key>).");
    }
  };
}
