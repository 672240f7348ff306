/**
 * The Messages stream (docs.claude.com "Streaming messages"; vLLM vllm/entrypoints/anthropic/serving.py
 * message_stream_converter): `message_start`, a `ping`, then per content block `content_block_start`, its deltas
 * (`thinking_delta` + a closing `signature_delta`, `text_delta`, `input_json_delta`) and `content_block_stop`, then
 * `message_delta` (stop_reason, stop_sequence, cumulative usage) and `message_stop`. Each record is
 * `event: <type>\ndata: <json>\n\n`, with no [DONE]. A failure after the first byte is an `error` event (Anthropic's
 * error shape) that ends the stream. A client that goes away cancels the stream, which aborts the request.
 * @example return messageSseResponse(messageEvents(answer, outputs), { onCancel, onEnd, log });
 */
import type { RequestOutput } from "../../frontend/orchestrator.ts";
import type { ApiError } from "../errors.ts";
import { pulledResponse, type StreamHooks } from "../pulled-stream.ts";
import { ChatStreamProcessor } from "../openai/chat-output.ts";
import { SSE_HEADERS } from "../openai/stream.ts";
import type { StreamDelta } from "../openai/tool-parsers/tool-parser.ts";
import { anthropicErrorBody } from "./errors.ts";
import { stopReasonOf, toolUseId, usageOf, type MessageAnswer } from "./message-response.ts";

export interface MessageEvent {
  readonly type: string;
  readonly [key: string]: unknown;
}

type BlockKind = "thinking" | "text" | "tool_use";

/** The open content block, and the index the next one gets. */
class BlockWriter {
  private open: { kind: BlockKind; toolIndex: number | null } | null = null;
  private nextIndex = 0;

  /** events that close the open block */
  close(): MessageEvent[] {
    if (this.open === null) return [];
    const index = this.nextIndex - 1;
    const events: MessageEvent[] = [];
    // the official stream signs a thinking block just before it stops; fennec does not sign (empty, as llama.cpp)
    if (this.open.kind === "thinking") events.push({ type: "content_block_delta", index, delta: { type: "signature_delta", signature: "" } });
    events.push({ type: "content_block_stop", index });
    this.open = null;
    return events;
  }

  /** events that put `delta` into a block of `kind` (opening one, after closing another, when needed) */
  write(kind: BlockKind, delta: Record<string, unknown> | null, start?: { toolIndex: number; id: string; name: string }): MessageEvent[] {
    const events: MessageEvent[] = [];
    const sameBlock = this.open !== null && this.open.kind === kind && (kind !== "tool_use" || start === undefined || this.open.toolIndex === start.toolIndex);
    if (!sameBlock) {
      events.push(...this.close());
      const block = kind === "thinking" ? { type: "thinking", thinking: "", signature: "" }
        : kind === "text" ? { type: "text", text: "" }
        : { type: "tool_use", id: start!.id, name: start!.name, input: {} };
      events.push({ type: "content_block_start", index: this.nextIndex, content_block: block });
      this.open = { kind, toolIndex: start?.toolIndex ?? null };
      this.nextIndex++;
    }
    if (delta !== null) events.push({ type: "content_block_delta", index: this.nextIndex - 1, delta });
    return events;
  }

  get numBlocks(): number {
    return this.nextIndex;
  }
}

/** One chat stream delta -> the block events it makes. */
function deltaEvents(blocks: BlockWriter, delta: StreamDelta): MessageEvent[] {
  const events: MessageEvent[] = [];
  if (delta.reasoning !== undefined && delta.reasoning !== "") events.push(...blocks.write("thinking", { type: "thinking_delta", thinking: delta.reasoning }));
  if (delta.content !== undefined && delta.content !== "") events.push(...blocks.write("text", { type: "text_delta", text: delta.content }));
  for (const call of delta.tool_calls ?? []) {
    const args = call.function.arguments ?? "";
    // a call's first delta names it: a new tool_use block
    const start = call.function.name !== undefined ? { toolIndex: call.index, id: toolUseId(), name: call.function.name } : undefined;
    if (start === undefined && args === "") continue;
    events.push(...blocks.write("tool_use", args === "" ? null : { type: "input_json_delta", partial_json: args }, start));
  }
  return events;
}

/** The stream's events as the outputs arrive; `aborted` ends it without the closing events. */
export async function* messageEvents(answer: MessageAnswer, outputs: AsyncIterable<RequestOutput>, aborted: () => boolean): AsyncGenerator<MessageEvent> {
  const processor = new ChatStreamProcessor(answer.outputConfig);
  const blocks = new BlockWriter();
  let started = false;
  let numGenerated = 0;
  let numCached = 0;
  let numPrompt = answer.numPromptTokens;
  let finish: { finishReason: RequestOutput["outputs"][number]["finishReason"]; stopReason: string | number | null } = { finishReason: null, stopReason: null };
  for await (const output of outputs) {
    numCached = output.numCachedTokens;
    numPrompt = output.numPromptTokens;
    if (!started) {
      started = true;
      yield {
        type: "message_start",
        message: { id: answer.id, type: "message", role: "assistant", model: answer.model, content: [], stop_reason: null, stop_sequence: null, usage: usageOf(numPrompt, numCached, 0) },
      };
      yield { type: "ping" };
    }
    for (const o of output.outputs) {
      if (o.index !== 0) continue;
      numGenerated = o.numGeneratedTokens;
      const final = o.finishReason !== null;
      if (final) finish = { finishReason: o.finishReason, stopReason: o.stopReason };
      for (const delta of processor.push(o.textDelta, final)) yield* deltaEvents(blocks, delta);
    }
  }
  if (aborted()) return;
  // vLLM: an empty completion still has one (empty) text block
  if (blocks.numBlocks === 0) yield* blocks.write("text", null);
  yield* blocks.close();
  yield { type: "message_delta", delta: stopReasonOf(finish, processor.calledTools, answer.stopSequences), usage: { output_tokens: numGenerated } };
  yield { type: "message_stop" };
}

const encoder = new TextEncoder();

export function sseRecord(event: MessageEvent): Uint8Array {
  return encoder.encode(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
}

/**
 * Pulls events as the client reads them (backpressure). `onCancel` runs when the client disconnects; `onEnd` runs
 * exactly once however the stream ends.
 */
export function messageSseResponse(events: AsyncIterable<MessageEvent>, requestId: string, hooks: StreamHooks): Response {
  const errorFrame = (error: ApiError) => sseRecord(anthropicErrorBody(error, requestId) as unknown as MessageEvent);
  return pulledResponse(events, { frame: sseRecord, errorFrame }, hooks, { ...SSE_HEADERS, "request-id": requestId });
}
