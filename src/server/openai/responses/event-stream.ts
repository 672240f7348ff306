/**
 * Server-sent events as the Responses API sends them (vLLM responses/api_router.py _convert_stream_to_sse_events):
 * `event: <type>\ndata: <json>\n\n` per event and no `[DONE]` terminator. A failure after the first byte becomes
 * OpenAI's `error` event (type, code, message, param, sequence_number) and ends the stream. A client that goes away
 * cancels the stream (onCancel aborts the generation unless it runs in the background).
 * @example return eventStreamResponse(numberEvents(events), { onCancel, onEnd, log });
 */
import type { ApiError } from "../../errors.ts";
import { pulledResponse, type StreamHooks } from "../../pulled-stream.ts";
import { SSE_HEADERS } from "../stream.ts";
import type { ResponseEvent } from "./stream-events.ts";

const encoder = new TextEncoder();

export function eventBytes(event: ResponseEvent): Uint8Array {
  return encoder.encode(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
}

export function eventStreamResponse(events: AsyncIterable<ResponseEvent>, hooks: StreamHooks): Response {
  let lastSequenceNumber = -1;
  const frame = (event: ResponseEvent): Uint8Array => {
    if (typeof event["sequence_number"] === "number") lastSequenceNumber = event["sequence_number"];
    return eventBytes(event);
  };
  const errorFrame = (error: ApiError): Uint8Array => {
    const { error: e } = error.toBody();
    return eventBytes({ type: "error", code: String(e.code), message: e.message, param: e.param, sequence_number: lastSequenceNumber + 1 });
  };
  return pulledResponse(events, { frame, errorFrame }, hooks, SSE_HEADERS);
}
