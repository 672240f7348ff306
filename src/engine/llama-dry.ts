/**
 * DRY, "don't repeat yourself" (llama.cpp llama-sampler.cpp llama_sampler_dry_apply, from koboldcpp): a token that
 * would extend a sequence already repeated in the recent context loses multiplier x base^(length - allowedLength)
 * of its logit, where length is the longest such repeat it would continue. A sequence breaker in the context bounds
 * how far back a repeat may reach.
 */
import type { DryBreaker } from "./sampling-params.ts";
import type { Candidates } from "./llama-samplers.ts";

export interface DryParams {
  readonly multiplier: number;
  readonly base: number;
  readonly allowedLength: number;
  readonly breakers: readonly DryBreaker[];
}

/** ln of the largest float32 (llama.cpp's FLOAT_MAX_LOG): the exponent is capped so base^exponent stays finite */
const FLOAT_MAX_LOG = 88.7228391;

/**
 * How far back from the end a repeat may reach: the distance to the latest breaker in `tokens` (its head and the tail
 * after it), or the whole window when there is none.
 */
function repeatLimit(tokens: readonly number[], breakers: readonly DryBreaker[]): number {
  const n = tokens.length;
  const at = (i: number): number => tokens[n - 1 - i]!; // i-th token from the end
  for (let i = 0; i < n; i++) {
    let longest = -1;
    for (const b of breakers) {
      if (b.headTokenId !== at(i)) continue;
      const len = b.tailTokenIds.length;
      if (len <= longest || len > i) continue;
      let match = true;
      for (let k = 0; k < len && match; k++) match = b.tailTokenIds[k] === at(i - k - 1);
      if (match) longest = len;
    }
    if (longest >= 0) return i - longest;
  }
  return n;
}

/**
 * Applies DRY to the candidates. `window`: the last dry_penalty_last_n tokens of prompt and output, oldest first.
 * Returns token id -> the repeat length it would extend (the tokens penalized), for tests and logs.
 */
export function applyDry(c: Candidates, window: readonly number[], p: DryParams): Map<number, number> {
  const extended = new Map<number, number>();
  const n = window.length;
  if (p.multiplier === 0 || p.base < 1 || n <= p.allowedLength) return extended;
  const limit = repeatLimit(window, p.breakers);
  if (limit < p.allowedLength) return extended;
  const at = (i: number): number => window[n - 1 - i]!;
  // for each earlier end point k tokens back: how many tokens before it match the context's last tokens; the token
  // that followed it would extend that repeat
  for (let k = 1; k < n; k++) {
    let len = 0;
    while (len + k < n && at(len) === at(len + k)) len++;
    len = Math.min(len, limit);
    if (len < p.allowedLength) continue;
    const next = at(k - 1);
    if ((extended.get(next) ?? -1) < len) extended.set(next, len);
  }
  const maxExponent = p.base > 1.000001 ? Math.trunc(FLOAT_MAX_LOG / Math.log(p.base)) : 0;
  const singleBreakers = new Set(p.breakers.filter((b) => b.tailTokenIds.length === 0).map((b) => b.headTokenId));
  for (const t of c.list) {
    const len = extended.get(t.id);
    if (len === undefined || singleBreakers.has(t.id)) continue;
    let exponent = len - p.allowedLength;
    if (maxExponent > 0 && exponent > maxExponent) exponent = maxExponent;
    t.logit -= p.multiplier * Math.pow(p.base, exponent);
  }
  c.sorted = false;
  return extended;
}
