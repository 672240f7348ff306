/**
 * Prompt text before it is tokenized: a prompt is refused when it has more characters than
 * max_model_len tokens could ever cover (no token is longer than the vocabulary's longest, so N tokens hold at most
 * N x maxTokenChars characters), and a long one is tokenized in slices with the event loop free in between; a 15 MB
 * prompt used to hold every request and /health for 14-17 s and take 3 GB before its 400. A large body's prompt is
 * bounded already in the parser Worker (promptBoundFor), so that such a prompt never reaches the main thread.
 * @example checkPromptChars(tokenizer, maxModelLen, text.length, "prompt"); const ids = await encodePrompt(tokenizer, text, options);
 */
import type { EncodeOptions, Tokenizer } from "../../tokenizer/tokenizer.ts";
import { ApiError } from "../errors.ts";
import type { PromptBound } from "../request-body.ts";
import { messageContentChars, type PromptField } from "../../util/prompt-chars.ts";

/** Characters tokenized between two turns of the event loop: about a millisecond of BPE or SPM work. */
export const PROMPT_SLICE_CHARS = 4096;

const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The 400 when `numChars` characters cannot fit in `maxModelLen` tokens of this vocabulary, else null. */
function promptCharsError(tokenizer: Tokenizer, maxModelLen: number, numChars: number, param: string): ApiError | null {
  const perToken = tokenizer.maxTokenChars;
  if (perToken === undefined) return null;
  const maxChars = maxModelLen * perToken;
  if (numChars <= maxChars) return null;
  return new ApiError("badRequest",
    `The prompt has ${numChars} characters; it cannot fit the maximum model length of ${maxModelLen} tokens (at most ${maxChars} characters: ${maxModelLen} tokens x ${perToken}, the vocabulary's longest token). Shorten the prompt.`,
    param);
}

/** Throws the 400 when `numChars` characters cannot fit in `maxModelLen` tokens of this vocabulary. */
export function checkPromptChars(tokenizer: Tokenizer, maxModelLen: number, numChars: number, param: string): void {
  const error = promptCharsError(tokenizer, maxModelLen, numChars, param);
  if (error !== null) throw error;
}

export { messageContentChars };

/** The routes whose prompt the parser Worker bounds in a large body, and the field (and error param) it comes from. */
const BOUNDED_PROMPTS: Readonly<Record<string, PromptField>> = {
  "/v1/completions": "prompt",
  "/v1/chat/completions": "messages",
};

/**
 * The bound a large body of `pathname` is checked against off the main thread (request-body.ts), with the same
 * refusal as checkPromptChars; null for other routes or a vocabulary without a longest-token length.
 */
export function promptBoundFor(pathname: string, tokenizer: Tokenizer, maxModelLen: number): PromptBound | null {
  const field = BOUNDED_PROMPTS[pathname];
  if (field === undefined || tokenizer.maxTokenChars === undefined) return null;
  // the Worker only reports counts over the bound, so the error is never null here
  const refuse = (numChars: number): ApiError => promptCharsError(tokenizer, maxModelLen, numChars, field)!;
  return { field, maxChars: maxModelLen * tokenizer.maxTokenChars, refuse };
}

/** The prompt's ids; long prompts a slice at a time, so other requests and /health are answered meanwhile. */
export async function encodePrompt(tokenizer: Tokenizer, text: string, options: EncodeOptions): Promise<number[]> {
  if (text.length <= PROMPT_SLICE_CHARS || tokenizer.encodeInSlices === undefined) return tokenizer.encode(text, options);
  return tokenizer.encodeInSlices(text, options, PROMPT_SLICE_CHARS, yieldToEventLoop);
}
