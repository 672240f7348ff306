/**
 * How many characters the longest prompt of a request body has, counted on the parsed JSON before any validation:
 * the server bounds prompts by characters before tokenizing (server/openai/prompt-text.ts), and the parser Worker
 * applies the same bound to a large body so that a prompt too long for the model never crosses to the main thread.
 * @example promptChars({ prompt: ["a", "bcd"] }, "prompt") === 3
 */

/** The body field a route's prompt text comes from: completions' `prompt`, or chat's `messages` contents. */
export type PromptField = "prompt" | "messages";

/** The characters of a chat's message contents (each is rendered into the prompt, so the prompt has at least these). */
export function messageContentChars(messages: readonly unknown[]): number {
  let total = 0;
  for (const message of messages) {
    const content = typeof message === "object" && message !== null ? (message as { content?: unknown }).content : undefined;
    if (typeof content === "string") total += content.length;
    else if (Array.isArray(content)) {
      for (const part of content) {
        const text = typeof part === "object" && part !== null ? (part as { text?: unknown }).text : undefined;
        if (typeof text === "string") total += text.length;
      }
    }
  }
  return total;
}

/**
 * The characters of the body's longest prompt (each text of a prompt list is one prompt); 0 when the body asks for
 * truncation (vLLM tokenizes such a prompt whole, then keeps its tail) or has no prompt text of that shape.
 */
export function promptChars(body: Readonly<Record<string, unknown>>, field: PromptField): number {
  if (body.truncate_prompt_tokens !== undefined && body.truncate_prompt_tokens !== null) return 0;
  const value = body[field];
  if (field === "messages") return Array.isArray(value) ? messageContentChars(value) : 0;
  if (typeof value === "string") return value.length;
  if (!Array.isArray(value)) return 0;
  let longest = 0;
  for (const item of value) if (typeof item === "string" && item.length > longest) longest = item.length;
  return longest;
}
