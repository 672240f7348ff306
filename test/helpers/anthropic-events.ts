/**
 * Anthropic's published stream contract (docs.claude.com "Streaming messages", the event types of @anthropic-ai/sdk
 * `RawMessageStreamEvent`) as JSON schemas, and a checker that reads an SSE body record by record: each `event:` name
 * equals its data's `type`, each payload matches its schema, and the order is message_start, (ping | block)*,
 * message_delta, message_stop, with block indices 0, 1, 2... each started, written to only while open, and stopped.
 */
import Ajv from "ajv";

const usage = { type: "object", required: ["input_tokens", "output_tokens"], properties: { input_tokens: { type: "integer", minimum: 0 }, output_tokens: { type: "integer", minimum: 0 }, cache_read_input_tokens: { type: ["integer", "null"] }, cache_creation_input_tokens: { type: ["integer", "null"] } } };
const index = { type: "integer", minimum: 0 };
const exact = (required: string[], properties: Record<string, unknown>) => ({ type: "object", required, properties, additionalProperties: false });
const constType = (t: string) => ({ const: t });

export const EVENT_SCHEMAS: Record<string, object> = {
  message_start: exact(["type", "message"], {
    type: constType("message_start"),
    message: exact(["id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"], {
      id: { type: "string", minLength: 1 }, type: constType("message"), role: constType("assistant"), model: { type: "string" },
      content: { type: "array", maxItems: 0 }, stop_reason: { type: "null" }, stop_sequence: { type: "null" }, usage,
    }),
  }),
  ping: exact(["type"], { type: constType("ping") }),
  content_block_start: exact(["type", "index", "content_block"], {
    type: constType("content_block_start"), index,
    content_block: {
      oneOf: [
        exact(["type", "text"], { type: constType("text"), text: { const: "" } }),
        exact(["type", "thinking", "signature"], { type: constType("thinking"), thinking: { const: "" }, signature: { type: "string" } }),
        exact(["type", "id", "name", "input"], { type: constType("tool_use"), id: { type: "string", minLength: 1 }, name: { type: "string", minLength: 1 }, input: exact([], {}) }),
      ],
    },
  }),
  content_block_delta: exact(["type", "index", "delta"], {
    type: constType("content_block_delta"), index,
    delta: {
      oneOf: [
        exact(["type", "text"], { type: constType("text_delta"), text: { type: "string" } }),
        exact(["type", "thinking"], { type: constType("thinking_delta"), thinking: { type: "string" } }),
        exact(["type", "signature"], { type: constType("signature_delta"), signature: { type: "string" } }),
        exact(["type", "partial_json"], { type: constType("input_json_delta"), partial_json: { type: "string" } }),
      ],
    },
  }),
  content_block_stop: exact(["type", "index"], { type: constType("content_block_stop"), index }),
  message_delta: exact(["type", "delta", "usage"], {
    type: constType("message_delta"),
    delta: exact(["stop_reason", "stop_sequence"], {
      stop_reason: { enum: ["end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"] },
      stop_sequence: { type: ["string", "null"] },
    }),
    usage: { type: "object", required: ["output_tokens"], properties: { output_tokens: { type: "integer", minimum: 0 } } },
  }),
  message_stop: exact(["type"], { type: constType("message_stop") }),
  error: exact(["type", "error"], { type: constType("error"), error: exact(["type", "message"], { type: { type: "string" }, message: { type: "string" } }), request_id: { type: "string" } }),
};

const ajv = new Ajv({ allErrors: true });
const validators = Object.fromEntries(Object.entries(EVENT_SCHEMAS).map(([k, s]) => [k, ajv.compile(s)]));

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnthropicEvent = Record<string, any>;

/** The SSE records of a body: `event:` name and parsed `data:`. */
export function parseSseRecords(text: string): { event: string; data: AnthropicEvent }[] {
  return text.split("\n\n").filter((r) => r.trim() !== "").map((record) => {
    const lines = record.split("\n");
    const event = lines.find((l) => l.startsWith("event: "))?.slice(7);
    const data = lines.find((l) => l.startsWith("data: "))?.slice(6);
    if (event === undefined || data === undefined) throw new Error(`not an Anthropic SSE record: ${JSON.stringify(record)}`);
    return { event, data: JSON.parse(data) as AnthropicEvent };
  });
}

/** Checks a whole stream; returns its events. Throws naming the first record that breaks the contract. */
export function checkMessageStream(text: string): AnthropicEvent[] {
  const records = parseSseRecords(text);
  const fail = (i: number, why: string): never => {
    throw new Error(`event ${i} (${JSON.stringify(records[i]?.data)}): ${why}`);
  };
  let open: number | null = null;
  let nextIndex = 0;
  let state = "start" as "start" | "body" | "delta" | "stop";
  records.forEach(({ event, data }, i) => {
    if (event !== data.type) fail(i, `event name ${event} differs from data.type ${data.type}`);
    const validate = validators[event];
    if (validate === undefined) fail(i, `unknown event type ${event}`);
    if (!validate!(data)) fail(i, ajv.errorsText(validate!.errors));
    if (state === "stop") fail(i, "event after message_stop");
    if (event === "error") { state = "stop"; return; }
    if (event === "ping") { if (state === "start") fail(i, "ping before message_start"); return; }
    if (state === "start") { if (event !== "message_start") fail(i, "the first event must be message_start"); state = "body"; return; }
    if (event === "message_start") fail(i, "a second message_start");
    if (state === "delta") { if (event !== "message_stop") fail(i, "message_delta must be followed by message_stop"); state = "stop"; return; }
    switch (event) {
      case "content_block_start":
        if (open !== null) fail(i, `block ${open} is still open`);
        if (data.index !== nextIndex) fail(i, `expected block index ${nextIndex}`);
        open = nextIndex++;
        return;
      case "content_block_delta":
        if (data.index !== open) fail(i, "delta for a block that is not open");
        return;
      case "content_block_stop":
        if (data.index !== open) fail(i, "stop for a block that is not open");
        open = null;
        return;
      case "message_delta":
        if (open !== null) fail(i, `message_delta with block ${open} open`);
        state = "delta";
        return;
      default:
        fail(i, `${event} out of place`);
    }
  });
  if (state !== "stop") throw new Error(`the stream ended in state ${state}, without message_stop`);
  return records.map((r) => r.data);
}

/** The message a checked stream builds: blocks with their text / thinking / joined input JSON, stop and usage. */
export function foldMessageStream(events: readonly AnthropicEvent[]) {
  const blocks: AnthropicEvent[] = [];
  let stop: AnthropicEvent = {};
  let outputTokens = 0;
  let inputTokens = 0;
  let cacheReadInputTokens = 0;
  for (const e of events) {
    if (e.type === "message_start") {
      inputTokens = e.message.usage.input_tokens;
      cacheReadInputTokens = e.message.usage.cache_read_input_tokens ?? 0;
    }
    if (e.type === "content_block_start") blocks.push({ ...e.content_block, partial_json: "" });
    if (e.type === "content_block_delta") {
      const b = blocks[e.index]!;
      const d = e.delta;
      if (d.type === "text_delta") b.text += d.text;
      if (d.type === "thinking_delta") b.thinking += d.thinking;
      if (d.type === "signature_delta") b.signature = d.signature;
      if (d.type === "input_json_delta") b.partial_json += d.partial_json;
    }
    if (e.type === "message_delta") { stop = e.delta; outputTokens = e.usage.output_tokens; }
  }
  return { blocks, stop, outputTokens, inputTokens, cacheReadInputTokens };
}
