/**
 * Token log probabilities in the two OpenAI wire formats: chat (`logprobs.content[]`) and legacy completions
 * (`tokens` / `token_logprobs` / `top_logprobs` / `text_offset`). The engine gives ids; the tokenizer gives texts.
 */
import type { PositionLogprobs } from "../../engine/protocol.ts";
import type { Tokenizer } from "../../tokenizer/tokenizer.ts";

export interface ChatTokenLogprob {
  readonly token: string;
  readonly logprob: number;
  readonly bytes: number[];
  readonly top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** -inf is not JSON; vLLM clamps it the same way. */
function finite(logprob: number): number {
  return Number.isFinite(logprob) ? logprob : -9999;
}

function entry(tokenizer: Tokenizer, tokenId: number, logprob: number): { token: string; logprob: number; bytes: number[] } {
  const token = tokenizer.tokenText(tokenId);
  return { token, logprob: finite(logprob), bytes: [...new TextEncoder().encode(token)] };
}

/** Chat: one entry per generated token; `numTop` alternatives (top_logprobs) each. */
export function chatLogprobs(tokenizer: Tokenizer, positions: readonly PositionLogprobs[], numTop: number): ChatTokenLogprob[] {
  return positions.map((p) => ({
    ...entry(tokenizer, p.chosen.tokenId, p.chosen.logprob),
    top_logprobs: p.top.slice(0, numTop).map((e) => entry(tokenizer, e.tokenId, e.logprob)),
  }));
}

/** vLLM's prompt_logprobs: per prompt position null (the first) or {"<token id>": {logprob, rank, decoded_token}}. */
export type PromptLogprobsWire = (Record<string, { logprob: number; rank: number; decoded_token: string }> | null)[];

export function promptLogprobsWire(tokenizer: Tokenizer, positions: readonly (PositionLogprobs | null)[]): PromptLogprobsWire {
  return positions.map((p) => {
    if (p === null) return null;
    const out: Record<string, { logprob: number; rank: number; decoded_token: string }> = {};
    for (const e of [p.chosen, ...p.top]) out[String(e.tokenId)] = { logprob: finite(e.logprob), rank: e.rank, decoded_token: tokenizer.tokenText(e.tokenId) };
    return out;
  });
}

export interface CompletionLogprobs {
  text_offset: number[];
  /** null for the first prompt token of an echoed prompt (nothing precedes it) */
  token_logprobs: (number | null)[];
  tokens: string[];
  top_logprobs: (Record<string, number> | null)[];
}

export function emptyCompletionLogprobs(): CompletionLogprobs {
  return { text_offset: [], token_logprobs: [], tokens: [], top_logprobs: [] };
}

/**
 * Legacy completions: appends positions to `into`; offsets continue from `startOffset` (characters of text so far).
 * Returns the offset after the last token.
 */
export function appendCompletionLogprobs(into: CompletionLogprobs, tokenizer: Tokenizer, positions: readonly PositionLogprobs[], numTop: number, startOffset: number): number {
  let offset = startOffset;
  for (const p of positions) {
    const token = tokenizer.tokenText(p.chosen.tokenId);
    into.tokens.push(token);
    into.token_logprobs.push(finite(p.chosen.logprob));
    into.text_offset.push(offset);
    const top: Record<string, number> = { [token]: finite(p.chosen.logprob) };
    for (const e of p.top.slice(0, numTop)) top[tokenizer.tokenText(e.tokenId)] = finite(e.logprob);
    into.top_logprobs.push(top);
    offset += token.length;
  }
  return offset;
}

/**
 * Legacy completions with `echo` and `logprobs`: the prompt's tokens come first (vLLM computes prompt logprobs for
 * them), the first one with null logprobs. Offsets start at `startOffset`; returns the offset after the prompt.
 */
export function appendPromptCompletionLogprobs(into: CompletionLogprobs, tokenizer: Tokenizer, promptTokenIds: readonly number[], positions: readonly (PositionLogprobs | null)[], numTop: number, startOffset: number): number {
  let offset = startOffset;
  promptTokenIds.forEach((tokenId, i) => {
    const position = positions[i] ?? null;
    if (position !== null) {
      offset = appendCompletionLogprobs(into, tokenizer, [position], numTop, offset);
      return;
    }
    const token = tokenizer.tokenText(tokenId);
    into.tokens.push(token);
    into.token_logprobs.push(null);
    into.top_logprobs.push(null);
    into.text_offset.push(offset);
    offset += token.length;
  });
  return offset;
}

/**
 * vLLM's return_tokens_as_token_ids (request field, or --return-tokens-as-token-ids): logprob tokens are written
 * `token_id:{id}`, so clients can tell tokens apart that do not decode to valid text on their own.
 * @example logprobTokenizer(tokenizer, true).tokenText(42) // "token_id:42"
 */
export function logprobTokenizer(tokenizer: Tokenizer, asTokenIds: boolean): Tokenizer {
  if (!asTokenIds) return tokenizer;
  const named: Tokenizer = Object.create(tokenizer) as Tokenizer;
  return Object.assign(named, { tokenText: (tokenId: number) => `token_id:${tokenId}` });
}
