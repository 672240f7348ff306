/**
 * GET /v1/models: the served model under each of its names, in vLLM's shape (vllm/entrypoints/openai/serving_models.py:
 * show_available_models); GET /v1/models/{id}: one of those cards, as OpenAI's retrieve-model endpoint (ids may hold
 * "/", as a Hugging Face name does), else vLLM's 404 for an unknown model.
 */
import { Elysia } from "elysia";
import type { ServerOptions } from "../server-options.ts";
import { MODEL_RESPONSES, MODELS_RESPONSES } from "./response-docs.ts";
import { unixSeconds } from "./wire-to-request.ts";
import { ApiError } from "../errors.ts";
import { nowMs } from "../../util/clock.ts";

export function listModels(options: ServerOptions) {
  const created = unixSeconds(nowMs());
  const permission = () => [{
    id: `modelperm-${crypto.randomUUID().replaceAll("-", "")}`, object: "model_permission", created,
    allow_create_engine: false, allow_sampling: true, allow_logprobs: true, allow_search_indices: false,
    allow_view: true, allow_fine_tuning: false, organization: "*", group: null, is_blocking: false,
  }];
  // one card per --served-model-name, as vLLM lists its base model paths, then each LoRA adapter (root: its file,
  // parent: its base model, no max_model_len: vLLM show_available_models)
  const base = [options.servedModelName, ...(options.servedModelAliases ?? [])].map((id) => ({
    id, object: "model", created, owned_by: "fennec", root: options.modelPath, parent: null as string | null,
    max_model_len: options.orchestrator.maxModelLen as number | null, permission: permission(),
  }));
  const adapters = (options.lora?.list() ?? []).map((a) => ({
    id: a.name, object: "model", created, owned_by: "fennec", root: a.path, parent: a.parent as string | null, max_model_len: null as number | null, permission: permission(),
  }));
  return { object: "list", data: [...base, ...adapters] };
}

export function retrieveModel(options: ServerOptions, id: string) {
  const card = listModels(options).data.find((m) => m.id === id);
  if (card === undefined) throw new ApiError("notFound", `The model \`${id}\` does not exist.`, "model");
  return card;
}

export function modelsRoutes(options: ServerOptions) {
  return new Elysia({ name: "openai-models" })
    .get("/v1/models", () => listModels(options), {
      detail: { tags: ["OpenAI"], summary: "List the served model", security: [{ bearerAuth: [] }], responses: MODELS_RESPONSES },
    })
    .get("/v1/models/*", ({ params }) => retrieveModel(options, decodeURIComponent(params["*"])), {
      detail: { tags: ["OpenAI"], summary: "Retrieve one served model by any of its names", security: [{ bearerAuth: [] }], responses: MODEL_RESPONSES },
    });
}
