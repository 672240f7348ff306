/**
 * Server-sent events as the Responses API sends them (vLLM responses/api_router.py _convert_stream_to_sse_events):
 * `event: <type>\ndata: <json>\n\n` per event and no `[DONE]` terminator. A failure after the first byte becomes
 * OpenAI's `error` event (type, code, message, param, sequence_number) and ends the stream. A client that goes away
 * cancels the stream (onCancel aborts the generation unless it runs in the background).
 * @example return eventStreamResponse(numberEvents(events), { onCancel, onEnd, log });
 */
import { toApiError } from "../../errors.ts";
import { SSE_HEADERS } from "../stream.ts";
import type { ResponseEvent } from "./stream-events.ts";

const encoder = new TextEncoder();

export function eventBytes(event: ResponseEvent): Uint8Array {
  return encoder.encode(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
}

export function eventStreamResponse(events: AsyncIterable<ResponseEvent>, hooks: { onCancel: () => void; onEnd: () => void; log: (line: string) => void }): Response {
  const iterator = events[Symbol.asyncIterator]();
  let ended = false;
  let lastSequenceNumber = -1;
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
        if (typeof next.value["sequence_number"] === "number") lastSequenceNumber = next.value["sequence_number"];
        controller.enqueue(eventBytes(next.value));
      } catch (error) {
        if (ended) return;
        const { error: e } = toApiError("INTERNAL_SERVER_ERROR", error, hooks.log).toBody();
        controller.enqueue(eventBytes({ type: "error", code: String(e.code), message: e.message, param: e.param, sequence_number: lastSequenceNumber + 1 }));
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
  return new Response(stream, { status: 200, headers: SSE_HEADERS });
}
