/**
 * One chat choice's generated text -> the message vLLM answers with: `reasoning` split off by the reasoning parser,
 * then tool calls parsed from the content that follows it (vLLM parses tools only after the reasoning), as one JSON
 * message or as stream deltas. With neither parser the text is the content, unchanged.
 */
import type { ReasoningContext, ReasoningParser } from "./reasoning-parsers/reasoning-parser.ts";
import { pythonJsonDumps, randomToolCallId, ToolCallStreamer, type StreamDelta, type ToolParser } from "./tool-parsers/tool-parser.ts";
import type { ToolDefinition } from "./tool-parsers/tool-definition.ts";

export interface ChatOutputConfig {
  readonly reasoning: { readonly parser: ReasoningParser; readonly context: ReasoningContext; readonly promptEndsReasoning: boolean; readonly include: boolean } | null;
  /** tool_choice auto with a parser; null when tool calls are not parsed (no tools, tool_choice none) */
  readonly tools: {
    readonly parser: ToolParser;
    readonly definitions: readonly ToolDefinition[];
    readonly parallel: boolean;
    /** tool_choice required / named (grammar-constrained output), null for auto */
    readonly forced?: "required" | "named" | null;
  } | null;
}

export interface MessageToolCall {
  readonly id: string;
  readonly type: "function";
  readonly function: { readonly name: string; readonly arguments: string };
}

export interface ChatMessageOutput {
  readonly content: string | null;
  readonly reasoning: string | null;
  readonly toolCalls: readonly MessageToolCall[];
}

/** The non-streaming message (vLLM's chat_completion_full_generator). */
export function chatMessageOf(text: string, config: ChatOutputConfig): ChatMessageOutput {
  let reasoning: string | null = null;
  let content: string | null = text;
  if (config.reasoning !== null && !config.reasoning.promptEndsReasoning) {
    const split = config.reasoning.parser.extract(text, config.reasoning.context);
    reasoning = config.reasoning.include ? split.reasoning : null;
    content = split.content;
  }
  if (config.tools === null || content === null) return { content, reasoning, toolCalls: [] };
  const parse = config.tools.parser.parse(content, true, config.tools.definitions);
  if (parse.calls.length === 0) return { content, reasoning, toolCalls: [] };
  const calls = config.tools.parallel ? parse.calls : parse.calls.slice(0, 1);
  const newId = () => config.tools!.parser.newCallId?.() ?? randomToolCallId();
  const forced = config.tools.forced ?? null;
  return {
    // vLLM: a forced call's message has content "", an auto one's the text before the calls (null when none)
    content: forced !== null ? "" : parse.content === "" ? null : parse.content,
    reasoning,
    // a named call's arguments are the generated text itself; parsed calls are re-serialized as Python's json.dumps
    toolCalls: calls.map((c) => ({ id: newId(), type: "function", function: { name: c.name!, arguments: forced === "named" ? c.arguments : pythonJsonDumps(JSON.parse(c.arguments)) } })),
  };
}

/**
 * vLLM's finish reason for a choice: "tool_calls" when auto parsing found calls, or for required when the engine
 * stopped; a named call keeps the engine's reason.
 */
export function chatFinishReason<R extends string>(engineReason: R, calledTools: boolean, config: ChatOutputConfig, streaming: boolean): R | "tool_calls" {
  if (!calledTools || config.tools === null) return engineReason;
  const forced = config.tools.forced ?? null;
  if (forced === "named") return engineReason;
  if (forced === "required" && !streaming && engineReason !== "stop") return engineReason;
  return "tool_calls";
}

/** The streaming side: feed each text delta, get the deltas to send (reasoning, content and tool calls apart). */
export class ChatStreamProcessor {
  private text = "";
  private sentReasoning = "";
  private sentContent = "";
  private readonly toolStreamer: ToolCallStreamer | null;

  constructor(private readonly config: ChatOutputConfig) {
    this.toolStreamer = config.tools === null ? null : new ToolCallStreamer(config.tools.parser, config.tools.definitions, !config.tools.parallel);
  }

  /** at least one tool call was streamed: the finish reason becomes "tool_calls" */
  get calledTools(): boolean {
    return (this.toolStreamer?.numCalls ?? 0) > 0;
  }

  push(textDelta: string, final: boolean): StreamDelta[] {
    this.text += textDelta;
    const r = this.config.reasoning;
    let reasoning = "";
    let content = this.text;
    if (r !== null && !r.promptEndsReasoning) ({ reasoning, content } = r.parser.split(this.text, final, r.context));
    const deltas: StreamDelta[] = [];
    if (reasoning.length > this.sentReasoning.length && reasoning.startsWith(this.sentReasoning)) {
      if (r!.include) deltas.push({ reasoning: reasoning.slice(this.sentReasoning.length) });
      this.sentReasoning = reasoning;
    }
    if (this.toolStreamer !== null) {
      // tools are parsed from the content only, once it has begun (the tool parser sees the content text so far)
      if (content !== "" || final) deltas.push(...this.toolStreamer.push(content, final));
      return deltas;
    }
    if (content.length > this.sentContent.length && content.startsWith(this.sentContent)) {
      deltas.push({ content: content.slice(this.sentContent.length) });
      this.sentContent = content;
    }
    return deltas;
  }
}

/**
 * A grammar that holds from the first generated token (no reasoning gate: the parser's end is not one special token,
 * see reasoning-parser.ts endToken) leaves the output no reasoning part: it is read as content. A gated grammar
 * (vLLM's is_reasoning_end gating) starts after the reasoning, which is split off as for free text.
 */
export function outputAfterGrammar(config: ChatOutputConfig, constrained: boolean, gated: boolean): ChatOutputConfig {
  if (!constrained || gated || config.reasoning === null) return config;
  return { ...config, reasoning: { ...config.reasoning, promptEndsReasoning: true } };
}
