/**
 * Reading a JSON request body: as text with the size limit enforced while it streams in (chunked bodies declare no
 * length), its nesting depth checked before JSON.parse, and a clear 400 for malformed JSON or a non-object body.
 * @example const body = await parseJsonObject(request, rawBodies, 1 << 20);
 */
import { checkBodyNesting } from "./body-limits.ts";
import { ApiError } from "./errors.ts";

/** The body as text, refused with 413 once it passes `maxBytes` (chunked bodies declare no length up front). */
async function readBodyText(request: Request, maxBytes: number): Promise<string> {
  if (request.body === null) return "";
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      void reader.cancel();
      throw new ApiError("payloadTooLarge", `Request body is larger than the limit of ${maxBytes} bytes.`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** JSON bodies are parsed here so that malformed JSON and non-object bodies get a clear 400 of their own. */
export async function parseJsonObject(request: Request, rawBodies: WeakMap<Request, string>, maxBytes: number): Promise<Record<string, unknown>> {
  const text = await readBodyText(request, maxBytes);
  checkBodyNesting(text);
  let value: unknown;
  try {
    value = JSON.parse(text);
    // kept for error messages: Elysia converts values before validating them
    rawBodies.set(request, text);
  } catch {
    throw new ApiError("invalidBody", "Request body is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new ApiError("invalidBody", "Request body must be a JSON object");
  return value as Record<string, unknown>;
}
