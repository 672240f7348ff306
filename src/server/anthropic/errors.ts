/**
 * Anthropic's error shape for every answer under /v1/messages: `{"type":"error","error":{"type","message"},
 * "request_id"}` with Anthropic's error type for each HTTP status (docs.claude.com/en/api/errors; Ollama's
 * anthropic/anthropic.go NewError uses the same table). vLLM answers this route with its own OpenAI error types
 * (vllm/entrypoints/anthropic/api_router.py translate_error_response), which Anthropic clients cannot classify, so
 * fennec follows the official contract here. Handlers throw the server's ApiError as everywhere; only the body differs.
 * @example anthropicErrorResponse(new ApiError("badRequest", "max_tokens: Field required"), "req_1")
 */
import type { ApiError } from "../errors.ts";

/** HTTP status -> Anthropic's `error.type`; any other status is an `api_error`. */
export const ANTHROPIC_ERROR_TYPES: Readonly<Record<number, string>> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  // no such method on a Messages path: a request the client must change
  405: "invalid_request_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  // fennec's "cannot run now" (shutting down, no KV room): Anthropic's temporary overload
  503: "overloaded_error",
  529: "overloaded_error",
};

/** The paths that answer in Anthropic's shape (errors included, also those raised before routing: 401, 413). */
export const ANTHROPIC_PATHS = ["/v1/messages", "/v1/messages/count_tokens"] as const;

export function isAnthropicPath(pathname: string): boolean {
  return (ANTHROPIC_PATHS as readonly string[]).includes(pathname);
}

export interface AnthropicErrorBody {
  readonly type: "error";
  readonly error: { readonly type: string; readonly message: string };
  readonly request_id: string;
}

/** Anthropic's request ids look like `req_<hex>`; the client's X-Request-Id is used when it sent one. */
export function anthropicRequestId(header: string | null): string {
  return header ?? `req_${crypto.randomUUID().replaceAll("-", "")}`;
}

export function anthropicErrorBody(error: Pick<ApiError, "status" | "message" | "param">, requestId: string): AnthropicErrorBody {
  const type = ANTHROPIC_ERROR_TYPES[error.status] ?? "api_error";
  return { type: "error", error: { type, message: error.message }, request_id: requestId };
}

/** The whole error response, with the `request-id` header Anthropic's clients read. */
export function anthropicErrorResponse(error: ApiError, request: Request): Response {
  const requestId = anthropicRequestId(request.headers.get("x-request-id"));
  const text = JSON.stringify(anthropicErrorBody(error, requestId));
  return new Response(text, {
    status: error.status,
    headers: { "content-type": "application/json;charset=utf-8", "content-length": String(Buffer.byteLength(text)), "request-id": requestId },
  });
}
