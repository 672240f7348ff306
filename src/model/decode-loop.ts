/**
 * The simplest way to run a ModelRunner: one sequence, prompt prefill then one decode token per step, with a caller's
 * `pick` turning logits into the next token. For `fennec generate` and the golden tests; the engine does the general
 * case (many sequences, scheduling, prefix caching).
 */
import type { ModelRunner } from "./model-batch.ts";

export interface DecodeOptions {
  /** tokens to generate at most (fewer when the context fills up or a stop id comes) */
  readonly maxTokens: number;
  /** generation ends after one of these (it is still yielded) */
  readonly stopIds: readonly number[];
  /** logits [vocabSize] -> next token id */
  readonly pick: (logits: Float32Array) => number;
  /** tokens per KV block */
  readonly blockSize?: number;
}

/**
 * Yields the generated token ids one by one. Allocates the runner's KV cache for exactly this one sequence.
 * @example for await (const id of decodeTokens(runner, [bosId], { maxTokens: 16, stopIds: [eosId], pick: argmax })) ...
 */
export async function* decodeTokens(runner: ModelRunner, promptIds: readonly number[], options: DecodeOptions): AsyncGenerator<number> {
  if (promptIds.length === 0) throw new Error("decodeTokens: the prompt needs at least one token (BOS)");
  const contextLength = runner.config.contextLength;
  if (promptIds.length > contextLength) throw new Error(`decodeTokens: prompt of ${promptIds.length} tokens exceeds the context length ${contextLength}`);
  // the last generated token is never fed back, so prompt + maxTokens - 1 positions are computed
  const maxTokens = Math.min(options.maxTokens, contextLength - promptIds.length + 1);
  if (maxTokens <= 0) return;
  const blockSize = options.blockSize ?? 16;
  const numPositions = promptIds.length + maxTokens - 1;
  const numBlocks = Math.ceil(numPositions / blockSize);
  runner.allocateKvCache(numBlocks, blockSize);
  const blockTable = Int32Array.from({ length: numBlocks }, (_, i) => i); // [numBlocks]

  let tokenIds = Int32Array.from(promptIds);
  let startPos = 0;
  for (let generated = 0; generated < maxTokens; generated++) {
    const { logits } = await runner.execute({ sequences: [{ tokenIds, startPos, blockTable, logits: "last" }] });
    const next = options.pick(logits);
    yield next;
    if (options.stopIds.includes(next)) return;
    startPos += tokenIds.length;
    tokenIds = Int32Array.of(next);
  }
}

/**
 * Greedy choice: the largest logit, the lowest id on a tie (vLLM's and llama.cpp's argmax).
 * @example const id = argmax(logits);
 */
export function argmax(logits: Float32Array): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  return best;
}
