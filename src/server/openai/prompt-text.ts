/**
 * Prompt text before it is tokenized (issue 12 item 3): a prompt is refused when it has more characters than
 * max_model_len tokens could ever cover (no token is longer than the vocabulary's longest, so N tokens hold at most
 * N x maxTokenChars characters), and a long one is tokenized in slices with the event loop free in between; a 15 MB
 * prompt used to hold every request and /health for 14-17 s and take 3 GB before its 400.
 * @example checkPromptChars(tokenizer, maxModelLen, text.length, "prompt"); const ids = await encodePrompt(tokenizer, text, options);
 */
import type { EncodeOptions, Tokenizer } from "../../tokenizer/tokenizer.ts";
import { ApiError } from "../errors.ts";

/** Characters tokenized between two turns of the event loop: about a millisecond of BPE or SPM work. */
export const PROMPT_SLICE_CHARS = 4096;

const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Throws the 400 when `numChars` characters cannot fit in `maxModelLen` tokens of this vocabulary. */
export function checkPromptChars(tokenizer: Tokenizer, maxModelLen: number, numChars: number, param: string): void {
  const perToken = tokenizer.maxTokenChars;
  if (perToken === undefined) return;
  const maxChars = maxModelLen * perToken;
  if (numChars <= maxChars) return;
  throw new ApiError("badRequest",
    `The prompt has ${numChars} characters; it cannot fit the maximum model length of ${maxModelLen} tokens (at most ${maxChars} characters: ${maxModelLen} tokens x ${perToken}, the vocabulary's longest token). Shorten the prompt.`,
    param);
}

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

/** The prompt's ids; long prompts a slice at a time, so other requests and /health are answered meanwhile. */
export async function encodePrompt(tokenizer: Tokenizer, text: string, options: EncodeOptions): Promise<number[]> {
  if (text.length <= PROMPT_SLICE_CHARS || tokenizer.encodeInSlices === undefined) return tokenizer.encode(text, options);
  return tokenizer.encodeInSlices(text, options, PROMPT_SLICE_CHARS, yieldToEventLoop);
}
