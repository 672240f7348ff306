/**
 * Ollama's streams: `application/x-ndjson`, one JSON object per line (ollama server/routes.go streamResponse). A
 * failure after the first line becomes one line `{"error": "..."}` and the stream ends (the status stays 200); a
 * failure before the first line is a normal JSON error, which the routes get by priming the source first
 * (generation/run-generation.ts primed). A client that goes away cancels the stream, which aborts the request.
 * @example return ndjsonResponse(records, { onCancel, onEnd, log });
 */
import { toApiError } from "../errors.ts";
import { ollamaErrorBody } from "./ollama-errors.ts";

const encoder = new TextEncoder();

export const NDJSON_HEADERS = { "content-type": "application/x-ndjson" } as const;

export function ndjsonLine(record: unknown): Uint8Array {
  return encoder.encode(`${JSON.stringify(record)}\n`);
}

/** Pulls records as the client reads them; `onCancel` runs if the client leaves, `onEnd` exactly once. */
export function ndjsonResponse(records: AsyncIterable<unknown>, hooks: { onCancel: () => void; onEnd: () => void; log: (line: string) => void }): Response {
  const iterator = records[Symbol.asyncIterator]();
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    hooks.onEnd();
  };
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (ended) return;
      try {
        const next = await iterator.next();
        if (ended) return;
        if (next.done) {
          controller.close();
          end();
          return;
        }
        controller.enqueue(ndjsonLine(next.value));
      } catch (error) {
        if (ended) return;
        controller.enqueue(ndjsonLine(ollamaErrorBody(toApiError("INTERNAL_SERVER_ERROR", error, hooks.log).message)));
        controller.close();
        end();
      }
    },
    cancel() {
      if (ended) return;
      hooks.onCancel();
      end();
      iterator.return?.(undefined)?.catch(() => {});
    },
  });
  return new Response(stream, { status: 200, headers: NDJSON_HEADERS });
}
