/**
 * Every sampling parameter of the OpenAI and vLLM APIs, camelCase inside fennec (the server maps snake_case wire
 * names to this). Defaults follow vLLM's SamplingParams. OWNER: engine helper (validation lives here too).
 */
export interface SamplingParams {
  readonly n: number;
  /** 0 = greedy */
  readonly temperature: number;
  readonly topP: number;
  /** 0 or -1 = off */
  readonly topK: number;
  readonly minP: number;
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
  readonly repetitionPenalty: number;
  /** token id -> bias added to the logit */
  readonly logitBias: Readonly<Record<number, number>> | null;
  /** per-request reproducible randomness; null = from the engine's generator */
  readonly seed: number | null;
  /** number of top logprobs per generated token (0 = only the sampled token's), null = none */
  readonly logprobs: number | null;
  /** number of top logprobs per prompt token, null = none */
  readonly promptLogprobs: number | null;
  readonly stop: readonly string[];
  readonly stopTokenIds: readonly number[];
  readonly includeStopStrInOutput: boolean;
  readonly ignoreEos: boolean;
  readonly minTokens: number;
  /** null = up to the context length */
  readonly maxTokens: number | null;
  readonly skipSpecialTokens: boolean;
}

export const DEFAULT_SAMPLING_PARAMS: SamplingParams = {
  n: 1, temperature: 1, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1,
  logitBias: null, seed: null, logprobs: null, promptLogprobs: null, stop: [], stopTokenIds: [],
  includeStopStrInOutput: false, ignoreEos: false, minTokens: 0, maxTokens: 16, skipSpecialTokens: true,
};
