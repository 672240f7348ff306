/**
 * Ollama's streams: `application/x-ndjson`, one JSON object per line (ollama server/routes.go streamResponse). A
 * failure after the first line becomes one line `{"error": "..."}` and the stream ends (the status stays 200); a
 * failure before the first line is a normal JSON error, which the routes get by priming the source first
 * (generation/run-generation.ts primed). A client that goes away cancels the stream, which aborts the request.
 * @example return ndjsonResponse(records, { onCancel, onEnd, log });
 */
import { pulledResponse, type StreamHooks } from "../pulled-stream.ts";
import { ollamaErrorBody } from "./ollama-errors.ts";

const encoder = new TextEncoder();

export const NDJSON_HEADERS = { "content-type": "application/x-ndjson" } as const;

export function ndjsonLine(record: unknown): Uint8Array {
  return encoder.encode(`${JSON.stringify(record)}\n`);
}

/** Pulls records as the client reads them; `onCancel` runs if the client leaves, `onEnd` exactly once. */
export function ndjsonResponse(records: AsyncIterable<unknown>, hooks: StreamHooks): Response {
  return pulledResponse(records, { frame: ndjsonLine, errorFrame: (error) => ndjsonLine(ollamaErrorBody(error.message)) }, hooks, NDJSON_HEADERS);
}
