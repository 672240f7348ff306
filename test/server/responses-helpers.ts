/** Helpers for the /v1/responses tests: typed SSE events read and checked against their published shapes. */
import { expect } from "bun:test";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import type { Json } from "./helpers.ts";

/** Every `event: <type>` / `data: <json>` pair of a Responses stream; the two types must agree, and no [DONE]. */
export async function readEvents(response: Response): Promise<Json[]> {
  expect(response.headers.get("content-type")).toContain("text/event-stream");
  const text = await response.text();
  expect(text).not.toContain("[DONE]");
  return text.split("\n\n").filter((e) => e !== "").map((block) => {
    const lines = block.split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]!.startsWith("event: ")).toBe(true);
    expect(lines[1]!.startsWith("data: ")).toBe(true);
    const data = JSON.parse(lines[1]!.slice(6)) as Json;
    expect(data.type).toBe(lines[0]!.slice(7));
    return data;
  });
}

/** OpenAI's published stream events (the openai SDK's ResponseStreamEvent union) and their fields. */
type SdkEvent = ResponseStreamEvent;
type SdkEventType = SdkEvent["type"];
type FieldsOf<K extends SdkEventType> = Exclude<Extract<keyof Extract<SdkEvent, { type: K }>, string>, "type" | "sequence_number">;
type RequiredFieldsOf<K extends SdkEventType> = { [P in FieldsOf<K>]-?: object extends Pick<Extract<SdkEvent, { type: K }>, P> ? never : P }[FieldsOf<K>];

/**
 * The fields of one published event, checked by the type checker against the SDK's declaration of that event: each
 * listed field is one it declares, and each field it requires is listed (a missing one names itself in the error).
 */
function sdkFields<K extends SdkEventType>() {
  return <const F extends readonly FieldsOf<K>[]>(fields: F & ([Exclude<RequiredFieldsOf<K>, F[number]>] extends [never] ? unknown : { missing: Exclude<RequiredFieldsOf<K>, F[number]> })): readonly string[] => fields as readonly string[];
}

/**
 * The fields each event type carries besides type and sequence_number: OpenAI's published events (their lists tied
 * to the SDK's types at compile time), then vLLM's own reasoning-part events, which OpenAI's union does not have.
 */
const EVENT_FIELDS: Readonly<Record<string, readonly string[]>> = {
  "response.created": sdkFields<"response.created">()(["response"]),
  "response.in_progress": sdkFields<"response.in_progress">()(["response"]),
  "response.completed": sdkFields<"response.completed">()(["response"]),
  "response.output_item.added": sdkFields<"response.output_item.added">()(["output_index", "item"]),
  "response.output_item.done": sdkFields<"response.output_item.done">()(["output_index", "item"]),
  "response.content_part.added": sdkFields<"response.content_part.added">()(["output_index", "item_id", "content_index", "part"]),
  "response.content_part.done": sdkFields<"response.content_part.done">()(["output_index", "item_id", "content_index", "part"]),
  "response.output_text.delta": sdkFields<"response.output_text.delta">()(["output_index", "item_id", "content_index", "delta", "logprobs"]),
  "response.output_text.done": sdkFields<"response.output_text.done">()(["output_index", "item_id", "content_index", "text", "logprobs"]),
  "response.reasoning_text.delta": sdkFields<"response.reasoning_text.delta">()(["output_index", "item_id", "content_index", "delta"]),
  "response.reasoning_text.done": sdkFields<"response.reasoning_text.done">()(["output_index", "item_id", "content_index", "text"]),
  "response.function_call_arguments.delta": sdkFields<"response.function_call_arguments.delta">()(["output_index", "item_id", "delta"]),
  // + name: OpenAI's API reference and its Python types (which vLLM emits) carry it; the TypeScript SDK's type lags
  "response.function_call_arguments.done": [...sdkFields<"response.function_call_arguments.done">()(["output_index", "item_id", "arguments"]), "name"],
  error: sdkFields<"error">()(["code", "message", "param"]),
  // vLLM's (vllm/entrypoints/openai/responses/protocol.py ResponseReasoningPartAddedEvent / DoneEvent)
  "response.reasoning_part.added": ["output_index", "item_id", "content_index", "part"],
  "response.reasoning_part.done": ["output_index", "item_id", "content_index", "part"],
};

/** Output item and content part fields (OpenAI's ResponseOutputMessage, ResponseReasoningItem, ResponseFunctionToolCall). */
const ITEM_FIELDS: Readonly<Record<string, readonly string[]>> = {
  message: ["id", "type", "role", "status", "content"],
  reasoning: ["id", "type", "summary", "content", "encrypted_content", "status"],
  function_call: ["id", "type", "call_id", "name", "arguments", "status"],
};
const PART_FIELDS: Readonly<Record<string, readonly string[]>> = {
  output_text: ["type", "text", "annotations", "logprobs"],
  reasoning_text: ["type", "text"],
};

function checkItem(item: Json): void {
  const fields = ITEM_FIELDS[item.type];
  if (fields === undefined) throw new Error(`unknown item type ${item.type}`);
  const keys = Object.keys(item).filter((k) => !(item.type === "function_call" && k === "namespace"));
  expect(keys.sort()).toEqual([...fields].sort());
  if (item.type === "function_call") expect(typeof item.arguments).toBe("string");
  for (const part of item.type === "message" || item.type === "reasoning" ? item.content : []) checkPart(part);
}

function checkPart(part: Json): void {
  const fields = PART_FIELDS[part.type];
  if (fields === undefined) throw new Error(`unknown part type ${part.type}`);
  expect(Object.keys(part).sort()).toEqual([...fields].sort());
}

/**
 * Checks a whole stream event by event: known types with exactly their fields, sequence numbers 0, 1, 2, ...,
 * created / in_progress first, completed last, every item opened before its deltas and closed once, in output order.
 * Returns the completed response.
 */
export function checkEventStream(events: readonly Json[]): Json {
  expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
  for (const e of events) {
    const fields = EVENT_FIELDS[e.type];
    if (fields === undefined) throw new Error(`unknown event type ${e.type}`);
    expect(Object.keys(e).sort()).toEqual(["sequence_number", "type", ...fields].sort());
    if (e.item !== undefined) checkItem(e.item);
    if (e.part !== undefined) checkPart(e.part);
    if (e.delta !== undefined) expect(typeof e.delta).toBe("string");
  }
  expect(events[0]!.type).toBe("response.created");
  expect(events[1]!.type).toBe("response.in_progress");
  expect(events[0]!.response.status).toBe("in_progress");
  expect(events[0]!.response.usage).toBeNull();
  const last = events.at(-1)!;
  expect(last.type).toBe("response.completed");
  const open = new Map<string, number>();
  const closed: Json[] = [];
  for (const e of events.slice(2, -1)) {
    if (e.type === "response.output_item.added") {
      expect(e.output_index).toBe(closed.length);
      expect(open.size).toBe(0);
      expect(e.item.status).toBe("in_progress");
      open.set(e.item.id, e.output_index);
    } else if (e.type === "response.output_item.done") {
      expect(open.get(e.item.id)).toBe(e.output_index);
      expect(e.item.status).toBe("completed");
      open.delete(e.item.id);
      closed.push(e.item);
    } else {
      expect(open.get(e.item_id)).toBe(e.output_index);
    }
  }
  expect(open.size).toBe(0);
  // the final response holds the items the stream closed, with the same ids
  expect(last.response.output).toEqual(closed);
  for (const item of last.response.output) checkItem(item);
  return last.response;
}
