/**
 * The records /api/chat and /api/generate answer with (ollama api/types.go ChatResponse / GenerateResponse,
 * server/routes.go ChatHandler / GenerateHandler): while streaming, one `done: false` record per piece of text or
 * thinking, one with the parsed tool calls (Ollama sends calls whole, arguments as JSON objects), then the final
 * `done: true` record with done_reason and the timing fields; without streaming, one record holding everything.
 * Reasoning is split off by the server's reasoning parser and tool calls by its tool parser, exactly as on
 * /v1/chat/completions (openai/chat-output.ts). Pure: everything an answer depends on is fixed in an OllamaAnswer.
 * @example for await (const record of streamRecords(answer, outputs)) write(record);
 */
import type { RequestOutput } from "../../frontend/orchestrator.ts";
import type { PositionLogprobs } from "../../engine/protocol.ts";
import type { Tokenizer } from "../../tokenizer/tokenizer.ts";
import { chatMessageOf, ChatStreamProcessor, type ChatOutputConfig, type MessageToolCall } from "../openai/chat-output.ts";
import { chatLogprobs } from "../openai/logprobs.ts";
import type { GenerationResult } from "../generation/run-generation.ts";
import { durationFields } from "./durations.ts";

/** What an answer depends on, fixed before generation starts. */
export interface OllamaAnswer {
  /** the name the client asked for, in Ollama's display form */
  readonly model: string;
  readonly shape: "chat" | "generate";
  /** how the text is parsed (reasoning, tools); null = the text is the answer as it is (raw prompts) */
  readonly output: ChatOutputConfig | null;
  readonly tokenizer: Tokenizer;
  /** top logprobs per token, null = none */
  readonly logprobs: number | null;
  readonly numPromptTokens: number;
  /** performance.now() when the HTTP request arrived (total_duration) */
  readonly startedPerfMs: number;
  /** ms the request waited for the model's load (the several-models router's; 0 = loaded already) */
  readonly loadMs?: number;
}

type Json = Record<string, unknown>;

/** Ollama's tool-call ids: `call_` and 8 characters of [a-z0-9] (ollama server/routes.go toolCallId). */
export function ollamaToolCallId(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return `call_${Array.from(bytes, (b) => alphabet[b % alphabet.length]).join("")}`;
}

/** OpenAI-form calls (arguments as JSON text) -> Ollama's (arguments as an object, with the call's index). */
export function ollamaToolCalls(calls: readonly MessageToolCall[]): Json[] {
  return calls.map((c, index) => ({ id: ollamaToolCallId(), function: { index, name: c.function.name, arguments: JSON.parse(c.function.arguments) as unknown } }));
}

/** engine finish reason -> Ollama's done_reason (llm/server.go DoneReason: stop, length) */
const doneReason = (reason: string | null): string => (reason === "length" ? "length" : "stop");

function record(answer: OllamaAnswer, part: { content: string; thinking: string | null; toolCalls?: Json[] }, done: boolean): Json {
  const base = { model: answer.model, created_at: new Date().toISOString() };
  const thinking = part.thinking !== null && part.thinking !== "" ? { thinking: part.thinking } : {};
  if (answer.shape === "generate") return { ...base, response: part.content, ...thinking, ...(part.toolCalls ? { tool_calls: part.toolCalls } : {}), done };
  return { ...base, message: { role: "assistant", content: part.content, ...thinking, ...(part.toolCalls ? { tool_calls: part.toolCalls } : {}) }, done };
}

function logprobsOf(answer: OllamaAnswer, positions: readonly PositionLogprobs[]): Json {
  return answer.logprobs === null ? {} : { logprobs: chatLogprobs(answer.tokenizer, positions, answer.logprobs) };
}

/** The one record of a non-streaming answer. */
export function wholeRecord(answer: OllamaAnswer, result: GenerationResult): Json {
  const choice = result.choices[0]!;
  let content = choice.text;
  let thinking: string | null = null;
  let toolCalls: Json[] | undefined;
  if (answer.output !== null) {
    const message = chatMessageOf(choice.text, answer.output);
    content = message.content ?? "";
    thinking = message.reasoning;
    if (message.toolCalls.length > 0) toolCalls = ollamaToolCalls(message.toolCalls);
  }
  return {
    ...record(answer, { content, thinking, ...(toolCalls ? { toolCalls } : {}) }, true),
    done_reason: doneReason(choice.finishReason),
    ...durationFields({ totalMs: performance.now() - answer.startedPerfMs, loadMs: answer.loadMs ?? 0, times: result.times, numPromptTokens: result.numPromptTokens, numGeneratedTokens: choice.numGeneratedTokens }),
    ...logprobsOf(answer, choice.logprobs),
  };
}

/** The stream's records as the outputs arrive (choice 0: Ollama has no n). */
export async function* streamRecords(answer: OllamaAnswer, outputs: AsyncIterable<RequestOutput>): AsyncGenerator<Json> {
  const processor = answer.output === null ? null : new ChatStreamProcessor(answer.output);
  let text = "";
  let numPromptTokens = answer.numPromptTokens;
  for await (const output of outputs) {
    numPromptTokens = output.numPromptTokens;
    const o = output.outputs.find((x) => x.index === 0);
    if (o === undefined) continue;
    text += o.textDelta;
    const final = o.finishReason !== null;
    let content = o.textDelta;
    let thinking = "";
    if (processor !== null) {
      content = "";
      // tool-call deltas are left out here: Ollama sends each call whole, parsed from the full text at the end
      for (const delta of processor.push(o.textDelta, final)) {
        content += delta.content ?? "";
        thinking += delta.reasoning ?? "";
      }
    }
    const positions = o.logprobsDelta ?? [];
    if (content !== "" || thinking !== "" || (answer.logprobs !== null && positions.length > 0)) {
      yield { ...record(answer, { content, thinking }, false), ...logprobsOf(answer, positions) };
    }
    if (!final) continue;
    if (answer.output !== null && answer.output.tools !== null) {
      const calls = chatMessageOf(text, answer.output).toolCalls;
      if (calls.length > 0) yield record(answer, { content: "", thinking: null, toolCalls: ollamaToolCalls(calls) }, false);
    }
    yield {
      ...record(answer, { content: "", thinking: null }, true),
      done_reason: doneReason(o.finishReason),
      ...durationFields({ totalMs: performance.now() - answer.startedPerfMs, loadMs: answer.loadMs ?? 0, times: output.times, numPromptTokens, numGeneratedTokens: o.numGeneratedTokens }),
    };
    return;
  }
}

/** Ollama's answer to an empty prompt or conversation: the model is (already) loaded (done_reason "load"). */
export function loadRecord(model: string, shape: OllamaAnswer["shape"], reason: "load" | "unload" = "load"): Json {
  const base = { model, created_at: new Date().toISOString() };
  return shape === "generate" ? { ...base, response: "", done: true, done_reason: reason } : { ...base, message: { role: "assistant", content: "" }, done: true, done_reason: reason };
}
