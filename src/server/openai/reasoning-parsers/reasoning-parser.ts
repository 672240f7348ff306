/**
 * Reasoning parsers: the model's text -> `reasoning` + `content`, as vLLM's reasoning parsers do (vllm/reasoning/*).
 * `extract` is the non-streaming answer (vLLM's extract_reasoning); `split` is the streaming view of the text so far,
 * whose two parts only ever grow as text is appended (a possible partial marker is held back until it resolves), so a
 * stream is the difference between two splits and never carries reasoning and content in one delta.
 */

/** What the request says about thinking (Qwen3's enable_thinking, Granite's thinking), from chat_template_kwargs. */
export interface ReasoningContext {
  readonly thinkingEnabled: boolean;
}

export interface ReasoningParser {
  readonly name: string;
  extract(text: string, context: ReasoningContext): { reasoning: string | null; content: string | null };
  split(text: string, final: boolean, context: ReasoningContext): { reasoning: string; content: string };
  /**
   * vLLM's is_reasoning_end(prompt_token_ids): the template already closed the reasoning block (Qwen3 with
   * enable_thinking false renders `<think>\n\n</think>\n\n`), so all output is content.
   */
  promptEndsReasoning(prompt: string): boolean;
  /**
   * The text of the one special token that ends the reasoning (vLLM's is_reasoning_end on token ids), or null when
   * the end is not a single token: a structured-output grammar then starts after that token (chat-completion/prepare.ts
   * reasoningGate), or, for null, holds from the first token and the output is all content.
   */
  readonly endToken: string | null;
  /** the text that opens the reasoning (vLLM's reasoning_start_str), where the parser has one: thinking_token_budget
   * counts from it */
  readonly startToken?: string | null;
  /** its markers are special tokens that must stay in the text (skip_special_tokens off) */
  readonly keepSpecialTokens?: boolean;
  /** the template variable that turns thinking on or off, and its default */
  readonly thinkingKwarg: { readonly name: string; readonly default: boolean } | null;
}
