/**
 * Server-sent events as vLLM/OpenAI send them: one `data: <json>\n\n` per chunk, `data: [DONE]\n\n` at the end.
 * An error after the first byte becomes an error event followed by [DONE] (vllm/entrypoints/openai/serving_chat.py: chat_completion_stream_generator's error path). A client that goes away
 * cancels the stream, which aborts the request in the engine.
 */
import { pulledResponse, type StreamHooks } from "../pulled-stream.ts";

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
export function sseResponse(chunks: AsyncIterable<unknown>, hooks: StreamHooks): Response {
  return pulledResponse(chunks, { frame: sseEvent, errorFrame: (error) => sseEvent(error.toBody()), trailer: DONE }, hooks, SSE_HEADERS);
}
