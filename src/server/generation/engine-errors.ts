/**
 * Every failure the engine side reports for a request, as the OpenAI error the client gets. vLLM's serving layer
 * (vllm/entrypoints/openai/serving_engine.py create_error_response, _raise_if_error) answers a request its input
 * processing or SamplingParams refuse (ValueError) with 400, a request the engine ended with finish reason `error`
 * (GenerationError) with 500, and a dead engine (EngineDeadError, launcher.py) with 500 while /health says 503; a
 * request that only cannot run now (no room) is the server's 503.
 * @example engineErrorToApiError(new EngineRequestError("context_length", "...")) // ApiError 400
 */
import { EngineDeadError, EngineRequestError } from "../../frontend/orchestrator.ts";
import { PipelineRequestError } from "../../pipeline/stage-pipeline.ts";
import { ApiError, type ErrorKind } from "../errors.ts";

/**
 * EngineRequestError codes (engine/engine-core.ts validateRequest and failLate, frontend/engine-frontend.ts,
 * pipeline/) -> the error kind. A code missing here is a refusal of the request: 400.
 */
export const ENGINE_ERROR_KINDS: Readonly<Record<string, ErrorKind>> = {
  // the client's input, refused before or while it is scheduled (vLLM: ValueError -> 400)
  duplicate_request_id: "badRequest",
  empty_prompt: "badRequest",
  invalid_sampling_params: "badRequest",
  invalid_token_id: "badRequest",
  context_length: "badRequest",
  pooling_model: "badRequest",
  generative_model: "badRequest",
  invalid_priority: "badRequest",
  invalid_request: "badRequest",
  invalid_kv_transfer_params: "badRequest",
  kv_transfer_params_unsupported: "badRequest",
  structured_outputs_unavailable: "badRequest",
  // media items the engine cannot take: outside the prompt, the wrong size, or on a pooling request
  invalid_multimodal: "badRequest",
  // the request can never fit this KV cache: only asking for fewer tokens helps
  kv_cache_too_small: "badRequest",
  // the request's grammar: xgrammar refused to compile it, or it leaves no token of this vocabulary to continue
  invalid_grammar: "badRequest",
  grammar_dead_end: "badRequest",
  // the server's own failure (vLLM: FINISHED_ERROR -> GenerationError -> 500)
  grammar_error: "internal",
  grammar_rejected: "internal",
  kv_load_failed: "internal",
  kv_handoff: "internal",
  // no free KV blocks for a handoff right now: the same request may pass later
  kv_cache_full: "unavailable",
  // sleep mode: the engine is stopped until POST /wake_up
  engine_sleeping: "unavailable",
  // LoRA: the adapter the request names is not (or no longer) in the engine: vLLM's unknown-model 404; LoRA off: 400;
  // an adapter the engine could not read again from its file when it was needed: the server's failure
  lora_not_found: "notFound",
  lora_disabled: "badRequest",
  lora_load_failed: "internal",
};

/** The message a request the engine ended with finish reason `error` gets (vLLM GenerationError). */
export const GENERATION_FAILED = (): ApiError => new ApiError("internal", "Internal server error");

/** Any error from the orchestrator -> its ApiError; null when it is not one of the engine side's (a bug: plain 500). */
export function engineErrorToApiError(error: unknown): ApiError | null {
  if (error instanceof ApiError) return error;
  if (error instanceof EngineRequestError) return new ApiError(ENGINE_ERROR_KINDS[error.code] ?? "badRequest", error.message);
  if (error instanceof EngineDeadError) return new ApiError("internal", "Internal server error: the engine is not running.");
  // a stage chain lost a request between stages (no KV params, an undecodable handoff): ours, and worth naming
  if (error instanceof PipelineRequestError) return new ApiError("internal", `Internal server error: ${error.message}`);
  return null;
}
