/**
 * The Messages answer built from a generation (vLLM vllm/entrypoints/anthropic/serving.py messages_full_converter,
 * with the official contract's stop_sequence): the chat output parsed as for chat completions (chat-output.ts:
 * reasoning split off, then tool calls), then laid out as Anthropic content blocks in vLLM's order, thinking -> text
 * -> tool_use. Pure: the preparation fixed everything it depends on in a MessageAnswer.
 * @example const message = messageBody(answer, await collectGeneration(orchestrator, request, abort));
 */
import type { ChatOutputConfig, MessageToolCall } from "../openai/chat-output.ts";
import { chatMessageOf } from "../openai/chat-output.ts";
import type { ChoiceResult, GenerationResult } from "../generation/run-generation.ts";

/** What an answer depends on, fixed before generation starts. */
export interface MessageAnswer {
  /** `msg_<id>` */
  readonly id: string;
  readonly model: string;
  readonly numPromptTokens: number;
  readonly outputConfig: ChatOutputConfig;
  readonly stopSequences: readonly string[];
}

export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use";

export interface MessageUsage {
  /** prompt tokens not read from the prefix cache (Anthropic counts cached ones apart) */
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
}

export function usageOf(numPromptTokens: number, numCachedTokens: number, numOutputTokens: number): MessageUsage {
  return { input_tokens: Math.max(0, numPromptTokens - numCachedTokens), output_tokens: numOutputTokens, cache_read_input_tokens: numCachedTokens };
}

/**
 * The engine's finish -> Anthropic's stop_reason and stop_sequence: tool calls -> tool_use, a stop string ->
 * stop_sequence (naming it, as the official API and llama.cpp do; vLLM says end_turn), length -> max_tokens.
 */
export function stopReasonOf(choice: Pick<ChoiceResult, "finishReason" | "stopReason">, calledTools: boolean, stopSequences: readonly string[]): { stop_reason: StopReason; stop_sequence: string | null } {
  if (choice.finishReason === "length") return { stop_reason: "max_tokens", stop_sequence: null };
  if (calledTools) return { stop_reason: "tool_use", stop_sequence: null };
  if (typeof choice.stopReason === "string" && stopSequences.includes(choice.stopReason)) return { stop_reason: "stop_sequence", stop_sequence: choice.stopReason };
  return { stop_reason: "end_turn", stop_sequence: null };
}

/** A parsed tool call's arguments as the `input` object (the parser checked they are JSON; {} if not an object). */
export function toolInput(call: MessageToolCall): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(call.function.arguments);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : {};
  } catch {
    return {};
  }
}

/** Anthropic's tool-use ids are `toolu_` + 24 characters. */
export function toolUseId(): string {
  return `toolu_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`;
}

/** The non-streaming body. */
export function messageBody(answer: MessageAnswer, result: GenerationResult): Record<string, unknown> {
  const choice = result.choices[0]!;
  const message = chatMessageOf(choice.text, answer.outputConfig);
  const content: Record<string, unknown>[] = [];
  // fennec does not sign its thinking: an empty signature, as llama.cpp sends
  if (message.reasoning !== null && message.reasoning !== "") content.push({ type: "thinking", thinking: message.reasoning, signature: "" });
  if (message.content !== null && message.content !== "") content.push({ type: "text", text: message.content });
  for (const call of message.toolCalls) content.push({ type: "tool_use", id: toolUseId(), name: call.function.name, input: toolInput(call) });
  // vLLM: an empty completion is one empty text block
  if (content.length === 0) content.push({ type: "text", text: "" });
  return {
    id: answer.id, type: "message", role: "assistant", model: answer.model, content,
    ...stopReasonOf(choice, message.toolCalls.length > 0, answer.stopSequences),
    usage: usageOf(result.numPromptTokens, result.numCachedTokens, choice.numGeneratedTokens),
  };
}
