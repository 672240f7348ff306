/**
 * Server-sent events as vLLM/OpenAI send them: one `data: <json>\n\n` per chunk, `data: [DONE]\n\n` at the end.
 * An error after the first byte becomes an error event followed by [DONE] (vllm/entrypoints/openai/serving_chat.py: chat_completion_stream_generator's error path). A client that goes away
 * cancels the stream, which aborts the request in the engine.
 */
import { toApiError } from "../errors.ts";

const encoder = new TextEncoder();
const DONE = encoder.encode("data: [DONE]\n\n");

export function sseEvent(payload: unknown): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify(payload)}\n\n`);
}

export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
} as const;

/**
 * Pulls chunks from `chunks` as the client reads them (backpressure). `onCancel` runs when the client disconnects;
 * `onEnd` runs exactly once however the stream ends.
 */
export function sseResponse(chunks: AsyncIterable<unknown>, hooks: { onCancel: () => void; onEnd: () => void; log: (line: string) => void }): Response {
  const iterator = chunks[Symbol.asyncIterator]();
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
          controller.enqueue(DONE);
          controller.close();
          end();
          return;
        }
        controller.enqueue(sseEvent(next.value));
      } catch (error) {
        if (ended) return;
        controller.enqueue(sseEvent(toApiError("INTERNAL_SERVER_ERROR", error, hooks.log).toBody()));
        controller.enqueue(DONE);
        controller.close();
        end();
      }
    },
    cancel() {
      if (ended) return;
      hooks.onCancel();
      end();
      // the generator finishes on its own once the abort reaches the engine
      iterator.return?.(undefined)?.catch(() => {});
    },
  });
  return new Response(stream, { status: 200, headers: SSE_HEADERS });
}
