/**
 * The sampling parameters vLLM refuses per request while speculative decoding is on (vllm/v1/engine/processor.py
 * _validate_supported_sampling_params): the engine answers them with this message (HTTP 400).
 */

/** vLLM's per-request refusal (VLLMValidationError, HTTP 400) while speculative decoding is on. */
export const SPEC_DECODE_UNSUPPORTED_PARAMS = "The min_p and logit_bias sampling parameters are not yet supported with speculative decoding.";

/** vLLM's check: min_p > 1e-5 (temperature 0 forces min_p to 0 first) or a non-empty logit_bias. */
export function specDecodeRefusesParams(p: { readonly temperature: number; readonly minP: number; readonly logitBias: Readonly<Record<string, number>> | null }): boolean {
  const minP = p.temperature < 1e-5 ? 0 : p.minP;
  return minP > 1e-5 || (p.logitBias !== null && Object.keys(p.logitBias).length > 0);
}
