/**
 * The Responses stream's typed events (vLLM vllm/entrypoints/openai/responses/streaming_events.py
 * SimpleStreamingEventProcessor): created, in_progress, then one output item at a time (reasoning, message or
 * function call: a change of kind or a new tool call closes the open item), then completed. Each event gets its
 * `sequence_number` from one counter starting at 0 (numberEvents). The final response is built from the streamed
 * items, so its ids are the ones the client saw.
 * @example for await (const event of numberEvents(responseEvents(answer, outputs, () => false))) send(event);
 */
import type { RequestOutput } from "../../../frontend/orchestrator.ts";
import { ChatStreamProcessor } from "../chat-output.ts";
import type { PositionLogprobs } from "../../../engine/protocol.ts";
import type { ResponseAnswer } from "./prepare.ts";
import { metricsWire } from "../usage.ts";
import {
  functionCallItem, itemId, logprobsWire, messageItem, outputMessages, outputTextPart, reasoningItem, reasoningOf, reasoningTokens,
  responseObject, statusOf, usageWire, type OutputItem, type ResponseState,
} from "./output-items.ts";

export type ResponseEvent = { readonly type: string } & Record<string, unknown>;

type OpenItem =
  | { readonly kind: "reasoning"; readonly id: string; readonly outputIndex: number; text: string }
  | { readonly kind: "message"; readonly id: string; readonly outputIndex: number; text: string; logprobs: unknown[] }
  | { readonly kind: "tool"; readonly id: string; readonly outputIndex: number; readonly toolIndex: number; readonly callId: string; readonly name: string; args: string };

/** Folds stream deltas into output items and the events that announce them. */
class ItemStream {
  readonly items: OutputItem[] = [];
  private open: OpenItem | null = null;

  constructor(private readonly answer: ResponseAnswer) {}

  /** closes the open item: its done events */
  close(): ResponseEvent[] {
    const o = this.open;
    if (o === null) return [];
    this.open = null;
    const base = { output_index: o.outputIndex, item_id: o.id };
    if (o.kind === "reasoning") {
      const part = { type: "reasoning_text", text: o.text };
      const item = reasoningItem(o.id, o.text, "completed");
      this.items.push(item);
      return [
        { type: "response.reasoning_text.done", ...base, content_index: 0, text: o.text },
        { type: "response.reasoning_part.done", ...base, content_index: 0, part },
        { type: "response.output_item.done", output_index: o.outputIndex, item },
      ];
    }
    if (o.kind === "message") {
      const part = outputTextPart(o.text, o.logprobs);
      const item = messageItem(o.id, o.text === "" ? [] : [part], "completed");
      this.items.push(item);
      return [
        { type: "response.output_text.done", ...base, content_index: 0, text: o.text, logprobs: o.logprobs },
        { type: "response.content_part.done", ...base, content_index: 0, part },
        { type: "response.output_item.done", output_index: o.outputIndex, item },
      ];
    }
    const item = functionCallItem(this.answer, o.id, o.callId, o.name, o.args, "completed");
    this.items.push(item);
    return [
      ...(o.args !== "" ? [{ type: "response.function_call_arguments.done", ...base, arguments: o.args, name: item["name"] }] : []),
      { type: "response.output_item.done", output_index: o.outputIndex, item },
    ];
  }

  reasoning(delta: string): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    if (this.open?.kind !== "reasoning") {
      events.push(...this.close());
      const o = { kind: "reasoning" as const, id: itemId("rs"), outputIndex: this.items.length, text: "" };
      this.open = o;
      events.push(
        { type: "response.output_item.added", output_index: o.outputIndex, item: reasoningItem(o.id, "", "in_progress") },
        { type: "response.reasoning_part.added", output_index: o.outputIndex, item_id: o.id, content_index: 0, part: { type: "reasoning_text", text: "" } },
      );
    }
    const o = this.open as Extract<OpenItem, { kind: "reasoning" }>;
    o.text += delta;
    events.push({ type: "response.reasoning_text.delta", output_index: o.outputIndex, item_id: o.id, content_index: 0, delta });
    return events;
  }

  content(delta: string, logprobs: unknown[]): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    if (this.open?.kind !== "message") {
      events.push(...this.close());
      const o = { kind: "message" as const, id: itemId("msg"), outputIndex: this.items.length, text: "", logprobs: [] as unknown[] };
      this.open = o;
      events.push(
        { type: "response.output_item.added", output_index: o.outputIndex, item: messageItem(o.id, [], "in_progress") },
        { type: "response.content_part.added", output_index: o.outputIndex, item_id: o.id, content_index: 0, part: outputTextPart("", []) },
      );
    }
    const o = this.open as Extract<OpenItem, { kind: "message" }>;
    o.text += delta;
    o.logprobs.push(...logprobs);
    events.push({ type: "response.output_text.delta", output_index: o.outputIndex, item_id: o.id, content_index: 0, delta, logprobs });
    return events;
  }

  tool(index: number, name: string | undefined, args: string | undefined): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    if (this.open?.kind !== "tool" || this.open.toolIndex !== index) {
      // a new call always carries its name (the tool streamer sends names first, in order)
      if (name === undefined) return [];
      events.push(...this.close());
      const o = { kind: "tool" as const, id: itemId("fc"), outputIndex: this.items.length, toolIndex: index, callId: itemId("call"), name, args: "" };
      this.open = o;
      events.push({ type: "response.output_item.added", output_index: o.outputIndex, item: functionCallItem(this.answer, o.id, o.callId, name, "", "in_progress") });
    }
    const o = this.open as Extract<OpenItem, { kind: "tool" }>;
    if (args !== undefined && args !== "") {
      o.args += args;
      events.push({ type: "response.function_call_arguments.delta", output_index: o.outputIndex, item_id: o.id, delta: args });
    }
    return events;
  }
}

/**
 * The events of one streamed generation, ending with response.completed (or nothing more when `aborted()`).
 * `onFinal` gets the final state (for the store) before response.completed is yielded.
 */
export async function* responseEvents(
  answer: ResponseAnswer, outputs: AsyncIterable<RequestOutput>, aborted: () => boolean, onFinal: (state: ResponseState) => void = () => {},
): AsyncGenerator<ResponseEvent> {
  const initial = responseObject(answer, { status: "in_progress", output: [], usage: null });
  yield { type: "response.created", response: initial };
  yield { type: "response.in_progress", response: initial };
  const processor = new ChatStreamProcessor(answer.outputConfig);
  const items = new ItemStream(answer);
  const hideLogprobs = answer.outputConfig.reasoning !== null && !answer.outputConfig.reasoning.include;
  let numPromptTokens = 0;
  let cachedTokens = 0;
  let numGenerated = 0;
  let finishReason: string | null = null;
  let times: RequestOutput["times"] | null = null;
  const tokenIds: number[] = [];
  for await (const output of outputs) {
    numPromptTokens = output.numPromptTokens;
    cachedTokens = output.numCachedTokens;
    times = output.times;
    const o = output.outputs[0];
    if (o === undefined) continue;
    numGenerated = o.numGeneratedTokens;
    tokenIds.push(...o.tokenIdsDelta);
    if (o.finishReason !== null) finishReason = o.finishReason;
    let logprobs: unknown[] = hideLogprobs ? [] : logprobsWire(answer, (o.logprobsDelta ?? []) as PositionLogprobs[]);
    for (const delta of processor.push(o.textDelta, o.finishReason !== null)) {
      // vLLM's order within one delta: reasoning, content, tool calls (grouped by index)
      if (delta.reasoning !== undefined) yield* items.reasoning(delta.reasoning);
      if (delta.content !== undefined && delta.content !== "") {
        yield* items.content(delta.content, logprobs);
        logprobs = [];
      }
      for (const call of delta.tool_calls ?? []) yield* items.tool(call.index, call.function.name, call.function.arguments);
    }
  }
  if (aborted()) return;
  yield* items.close();
  const { status, incompleteDetails } = statusOf(finishReason);
  const usage = usageWire({ inputTokens: numPromptTokens, cachedTokens, outputTokens: numGenerated, reasoningTokens: reasoningTokens(answer, tokenIds, reasoningOf(items.items)) });
  const metrics = metricsWire({ enabled: answer.enablePerRequestMetrics, n: 1, numPrompts: 1, times, numGenerationTokens: numGenerated }, false);
  const state: ResponseState = { status, output: items.items, usage, incompleteDetails, outputMessages: outputMessages(items.items), metrics };
  onFinal(state);
  yield { type: "response.completed", response: responseObject(answer, state) };
}

/** Stamps each event with `sequence_number` (0, 1, 2, ...), as vLLM's _increment_sequence_number_and_return does. */
export async function* numberEvents(events: AsyncIterable<ResponseEvent>, start = 0): AsyncGenerator<ResponseEvent> {
  let sequenceNumber = start;
  for await (const event of events) yield { ...event, sequence_number: sequenceNumber++ };
}
