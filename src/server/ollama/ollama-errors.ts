/**
 * Ollama's error shape, `{"error": "<message>"}` with the HTTP status (ollama server/routes.go: every handler's
 * c.JSON(status, gin.H{"error": ...}); docs/api/errors.mdx). Every path under /api/ and Ollama's `/` answer this way,
 * whatever failed (a bad body before routing, a refused field, an engine error): the app's one error handler asks
 * ollamaErrorResponse first. Mid-stream failures are one NDJSON line of the same shape (ndjson-stream.ts).
 * @example ollamaErrorResponse(request, new ApiError("notFound", "model 'x' not found")) // 404 {"error":"model 'x' not found"}
 */
import type { ApiError } from "../errors.ts";

/** Ollama's routes (ollama server/routes.go GenerateRoutes): these paths speak Ollama's error shape. */
export function isOllamaPath(pathname: string): boolean {
  return pathname.startsWith("/api/");
}

/** The body of an Ollama error. */
export function ollamaErrorBody(message: string): { readonly error: string } {
  return { error: message };
}

/** The Ollama error response for a request on an Ollama path; null for every other path (the OpenAI shape applies). */
export function ollamaErrorResponse(request: Request, error: ApiError): Response | null {
  if (!isOllamaPath(new URL(request.url).pathname)) return null;
  const text = JSON.stringify(ollamaErrorBody(error.message));
  return new Response(text, { status: error.status, headers: { "content-type": "application/json; charset=utf-8", "content-length": String(Buffer.byteLength(text)) } });
}
