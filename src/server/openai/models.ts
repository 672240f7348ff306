/** GET /v1/models: the served model under each of its names, in vLLM's shape (vllm/entrypoints/openai/serving_models.py: show_available_models). */
import { Elysia } from "elysia";
import type { ServerOptions } from "../server-options.ts";
import { MODELS_RESPONSES } from "./response-docs.ts";
import { unixSeconds } from "./wire-to-request.ts";
import { nowMs } from "../../util/clock.ts";

export function listModels(options: ServerOptions) {
  const created = unixSeconds(nowMs());
  // one card per --served-model-name, as vLLM lists its base model paths
  return {
    object: "list",
    data: [options.servedModelName, ...(options.servedModelAliases ?? [])].map((id) => ({
      id,
      object: "model",
      created,
      owned_by: "fennec",
      root: options.modelPath,
      parent: null,
      max_model_len: options.orchestrator.maxModelLen,
      permission: [{
        id: `modelperm-${crypto.randomUUID().replaceAll("-", "")}`, object: "model_permission", created,
        allow_create_engine: false, allow_sampling: true, allow_logprobs: true, allow_search_indices: false,
        allow_view: true, allow_fine_tuning: false, organization: "*", group: null, is_blocking: false,
      }],
    })),
  };
}

export function modelsRoutes(options: ServerOptions) {
  return new Elysia({ name: "openai-models" }).get("/v1/models", () => listModels(options), {
    detail: { tags: ["OpenAI"], summary: "List the served model", security: [{ bearerAuth: [] }], responses: MODELS_RESPONSES },
  });
}
