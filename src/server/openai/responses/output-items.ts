/**
 * The Responses answer's parts (vLLM vllm/entrypoints/openai/responses/utils.py build_response_output_items and
 * serving.py responses_full_generator): output items in vLLM's order (reasoning, message, function calls), `usage`
 * with cached and reasoning token counts, and the response object around them. Pure: prepare.ts fixed everything
 * in a ResponseAnswer. Streamed answers build the same items as they go (stream-events.ts).
 * @example responseObject(answer, { status: "completed", output: outputItems(answer, result.choices[0]!), usage });
 */
import type { PositionLogprobs } from "../../../engine/protocol.ts";
import { chatMessageOf } from "../chat-output.ts";
import { chatLogprobs } from "../logprobs.ts";
import type { ChoiceResult } from "../../generation/run-generation.ts";
import type { ResponseAnswer } from "./prepare.ts";
import type { ResponseStatus } from "./response-store.ts";
import type { ChatMessageBody } from "../schemas.ts";

export type OutputItem = Record<string, unknown>;

/** OpenAI's item ids: a prefix per item type and random hex. */
export const itemId = (prefix: "msg" | "rs" | "fc" | "call"): string => `${prefix}_${crypto.randomUUID().replaceAll("-", "")}`;

export const reasoningItem = (id: string, text: string, status: "in_progress" | "completed" | null): OutputItem =>
  ({ id, type: "reasoning", summary: [], content: text === "" && status === "in_progress" ? [] : [{ type: "reasoning_text", text }], encrypted_content: null, status });

export const outputTextPart = (text: string, logprobs: readonly unknown[]): OutputItem => ({ type: "output_text", text, annotations: [], logprobs });

export const messageItem = (id: string, parts: readonly OutputItem[], status: "in_progress" | "completed"): OutputItem =>
  ({ id, type: "message", role: "assistant", status, content: parts });

/** A function_call item; a namespaced tool's call names its namespace (vLLM flattens it as `ns__name` in the prompt). */
export function functionCallItem(answer: ResponseAnswer, id: string, callId: string, flatName: string, args: string, status: "in_progress" | "completed"): OutputItem {
  const spaced = answer.namespaced.get(flatName);
  return { id, type: "function_call", call_id: callId, name: spaced?.name ?? flatName, ...(spaced ? { namespace: spaced.namespace } : {}), arguments: args, status };
}

export function logprobsWire(answer: ResponseAnswer, positions: readonly PositionLogprobs[]): unknown[] {
  return answer.topLogprobs === null ? [] : chatLogprobs(answer.tokenizer, positions, answer.topLogprobs);
}

/** The output items of a finished generation (non-streaming). */
export function outputItems(answer: ResponseAnswer, choice: ChoiceResult): OutputItem[] {
  const message = chatMessageOf(choice.text, answer.outputConfig);
  const items: OutputItem[] = [];
  if (message.reasoning !== null && message.reasoning !== "") items.push(reasoningItem(itemId("rs"), message.reasoning, null));
  const content = message.content ?? "";
  // without calls the message is always there (content [] when empty, vLLM); with calls only when it has text
  if (content !== "" || message.toolCalls.length === 0) {
    const hide = answer.outputConfig.reasoning !== null && !answer.outputConfig.reasoning.include;
    items.push(messageItem(itemId("msg"), content === "" ? [] : [outputTextPart(content, hide ? [] : logprobsWire(answer, choice.logprobs))], "completed"));
  }
  for (const call of message.toolCalls) items.push(functionCallItem(answer, itemId("fc"), itemId("call"), call.function.name, call.function.arguments, "completed"));
  return items;
}

/** The reasoning text of the output items (for reasoning_tokens). */
export const reasoningOf = (items: readonly OutputItem[]): string =>
  items.filter((i) => i["type"] === "reasoning").map((i) => ((i["content"] as { text: string }[])[0]?.text ?? "")).join("");

/**
 * reasoning_tokens (vLLM counts the reasoning parser's tokens over the output ids): the generated tokens before the
 * parser's end token when it is one token of this vocabulary, all of them when the reasoning never ended, else
 * the reasoning text re-encoded.
 */
export function reasoningTokens(answer: ResponseAnswer, tokenIds: readonly number[], reasoning: string): number {
  if (reasoning === "") return 0;
  const end = answer.outputConfig.reasoning?.parser.endToken ?? null;
  if (end !== null) {
    const endIds = answer.tokenizer.encode(end, { addSpecial: false, parseSpecial: true });
    if (endIds.length === 1) {
      const at = tokenIds.indexOf(endIds[0]!);
      return at === -1 ? tokenIds.length : at;
    }
  }
  return answer.tokenizer.encode(reasoning, { addSpecial: false, parseSpecial: false }).length;
}

export interface UsageCounts {
  readonly inputTokens: number;
  readonly cachedTokens: number;
  readonly outputTokens: number;
  readonly reasoningTokens: number;
}

/** vLLM's ResponseUsage (one turn: the per-turn lists hold one entry). */
export function usageWire(u: UsageCounts): Record<string, unknown> {
  return {
    input_tokens: u.inputTokens,
    input_tokens_details: { cached_tokens: u.cachedTokens, input_tokens_per_turn: [u.inputTokens], cached_tokens_per_turn: [u.cachedTokens] },
    output_tokens: u.outputTokens,
    output_tokens_details: { reasoning_tokens: u.reasoningTokens, tool_output_tokens: 0, output_tokens_per_turn: [u.outputTokens], tool_output_tokens_per_turn: [0] },
    total_tokens: u.inputTokens + u.outputTokens,
  };
}

/** The engine's finish reason -> the response status (vLLM: length -> incomplete, abort -> cancelled). */
export function statusOf(finishReason: string | null): { status: ResponseStatus; incompleteDetails: Record<string, string> | null } {
  if (finishReason === "length") return { status: "incomplete", incompleteDetails: { reason: "max_output_tokens" } };
  if (finishReason === "abort") return { status: "cancelled", incompleteDetails: null };
  return { status: "completed", incompleteDetails: null };
}

/** The chat messages an answer adds to a conversation (previous_response_id replays them). */
export function outputMessages(items: readonly OutputItem[]): ChatMessageBody[] {
  const text = items.filter((i) => i["type"] === "message").map((i) => (i["content"] as { text: string }[]).map((p) => p.text).join("")).join("");
  const calls = items.filter((i) => i["type"] === "function_call").map((i) => ({
    id: String(i["call_id"]), type: "function",
    function: { name: i["namespace"] === undefined ? String(i["name"]) : `${String(i["namespace"])}__${String(i["name"])}`, arguments: String(i["arguments"]) },
  }));
  if (text === "" && calls.length === 0) return [{ role: "assistant", content: "" }];
  return [{ role: "assistant", content: text === "" ? null : text, ...(calls.length > 0 ? { tool_calls: calls } : {}) }];
}

export interface ResponseState {
  readonly status: ResponseStatus;
  readonly output: readonly OutputItem[];
  readonly usage: Record<string, unknown> | null;
  readonly incompleteDetails?: Record<string, string> | null;
  readonly outputMessages?: readonly ChatMessageBody[];
  /** vLLM's per-request `metrics` (metricsWire), null when the engine sent no timings */
  readonly metrics?: Record<string, number | null> | null;
}

/** The response object (vLLM ResponsesResponse.from_request): the request's echoed fields around the output. */
export function responseObject(answer: ResponseAnswer, state: ResponseState): Record<string, unknown> {
  return {
    id: answer.id, object: "response", created_at: answer.createdAt, status: state.status, error: null,
    incomplete_details: state.incompleteDetails ?? null, model: answer.model, output: state.output,
    ...answer.echo, usage: state.usage,
    ...(answer.enablePerRequestMetrics ? { metrics: state.metrics ?? null } : {}),
    ...(answer.enableResponseMessages ? { input_messages: answer.inputMessages, output_messages: state.outputMessages ?? [] } : {}),
  };
}
