/**
 * A streamed answer pulled as the client reads it (backpressure), the one skeleton every dialect's stream shares
 * (OpenAI's SSE, Anthropic's and the Responses API's typed SSE events, Ollama's NDJSON): each item is framed by the
 * dialect; a failure after the first byte becomes the dialect's error frame; `onCancel` runs when the client leaves
 * (which aborts the request in the engine), `onEnd` exactly once however the stream ends.
 */
import { toApiError, type ApiError } from "./errors.ts";

export interface StreamFraming<T> {
  /** the bytes of one item */
  readonly frame: (item: T) => Uint8Array;
  /** the dialect's report of a failure mid-stream */
  readonly errorFrame: (error: ApiError) => Uint8Array;
  /** written after the last item or the error frame (SSE's `data: [DONE]`); none when absent */
  readonly trailer?: Uint8Array;
}

export interface StreamHooks {
  readonly onCancel: () => void;
  readonly onEnd: () => void;
  readonly log: (line: string) => void;
}

export function pulledResponse<T>(items: AsyncIterable<T>, framing: StreamFraming<T>, hooks: StreamHooks, headers: HeadersInit): Response {
  const iterator = items[Symbol.asyncIterator]();
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    hooks.onEnd();
  };
  const finish = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    if (framing.trailer !== undefined) controller.enqueue(framing.trailer);
    controller.close();
    end();
  };
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (ended) return;
      try {
        const next = await iterator.next();
        if (ended) return;
        if (next.done) return finish(controller);
        controller.enqueue(framing.frame(next.value));
      } catch (error) {
        if (ended) return;
        controller.enqueue(framing.errorFrame(toApiError("INTERNAL_SERVER_ERROR", error, hooks.log)));
        finish(controller);
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
  return new Response(stream, { status: 200, headers });
}
