/**
 * What the HTTP metrics (prometheus-fastapi-instrumentator's http_request_size_bytes / http_response_size_bytes)
 * measure of one exchange: sizes from Content-Length, or from the handler's return value as it goes out.
 * @example headerBytes(request.headers.get("content-length")) // 42, or null
 */

/** A Content-Length header as a number; null when absent or not a number. */
export function headerBytes(header: string | null): number | null {
  const bytes = header === null || header === "" ? NaN : Number(header);
  return Number.isFinite(bytes) ? bytes : null;
}

/** Size of a handler's return value as it goes out (JSON for objects); null for streams and what cannot be measured. */
export function bodyBytes(value: unknown): number | null {
  if (value === undefined || value === null || value instanceof Response || value instanceof ReadableStream) return null;
  if (typeof value === "string") return Buffer.byteLength(value);
  if (value instanceof Blob) return value.size;
  if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) return value.byteLength;
  try {
    const json = JSON.stringify(value);
    return json === undefined ? null : Buffer.byteLength(json);
  } catch {
    return null;
  }
}
