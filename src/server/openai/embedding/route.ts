/**
 * POST /v1/embeddings and POST /pooling (vllm/entrypoints/pooling/embed/serving.py, pooling/serving.py): every input is
 * one pooling request, all sent at once so the scheduler batches them with whatever else runs; the answer lists the
 * vectors in input order, with usage. A generative model answers vLLM's "The model does not support Embeddings API".
 */
import { Elysia, t } from "elysia";
import type { EncodeOutput, EncodeRequest, Orchestrator } from "../../../frontend/orchestrator.ts";
import { ApiError } from "../../errors.ts";
import type { ServerLoad } from "../../load.ts";
import type { ServerOptions } from "../../server-options.ts";
import { RequestContexts, type RequestContext } from "../../request-context.ts";
import { EmbeddingRequest, encodeEmbedding, poolingFields, prepareEmbedding, type EmbeddingBody } from "./prepare.ts";
import { engineErrorToApiError } from "../../generation/engine-errors.ts";
import { linkAbort, SHUTTING_DOWN, type RequestAbort } from "../../generation/run-generation.ts";

/** Runs every request at once; the first failure aborts the rest (their KV blocks are freed at once). */
export async function encodeAll(options: ServerOptions, requests: readonly EncodeRequest[], clientSignal: AbortSignal | undefined): Promise<EncodeOutput[]> {
  const orchestrator = options.orchestrator as Orchestrator & Required<Pick<Orchestrator, "encode">>;
  const abort: RequestAbort = linkAbort(clientSignal, options.shutdownSignal, () => options.log(`${requests[0]?.externalRequestId ?? "pooling request"} aborted: the client disconnected`));
  try {
    return await Promise.all(requests.map((r) => orchestrator.encode(r, abort.controller.signal)));
  } catch (error) {
    if (abort.shuttingDown()) throw SHUTTING_DOWN();
    throw engineErrorToApiError(error) ?? error;
  } finally {
    abort.dispose();
  }
}

function usageOf(outputs: readonly EncodeOutput[]) {
  const promptTokens = outputs.reduce((sum, o) => sum + o.numPromptTokens, 0);
  return { prompt_tokens: promptTokens, total_tokens: promptTokens, completion_tokens: 0, prompt_tokens_details: null };
}

export async function createEmbedding(options: ServerOptions, body: EmbeddingBody, context: RequestContext) {
  const prepared = await prepareEmbedding(options, body, context, "embd");
  const outputs = await encodeAll(options, prepared.requests, context.clientSignal);
  return {
    id: prepared.id, object: "list", created: prepared.created, model: options.servedModelName,
    data: outputs.map((o, index) => ({ index, object: "embedding", embedding: encodeEmbedding(o.embedding, prepared.encoding) })),
    usage: usageOf(outputs),
  };
}

/** vLLM /pooling: the embed task's pooled vectors, each under `data` (PoolingResponseData). */
export async function createPooling(options: ServerOptions, body: EmbeddingBody & { task?: string | null }, context: RequestContext) {
  const task = body.task ?? "embed";
  if (task !== "embed") throw new ApiError("badRequest", `task ${task} is not supported by fennec's /pooling: only embed (the served embedding model's task).`, "task");
  const prepared = await prepareEmbedding(options, body, context, "pool");
  const outputs = await encodeAll(options, prepared.requests, context.clientSignal);
  return {
    id: prepared.id, object: "list", created: prepared.created, model: options.servedModelName,
    data: outputs.map((o, index) => ({ index, object: "pooling", data: encodeEmbedding(o.embedding, prepared.encoding) })),
    usage: usageOf(outputs),
  };
}

const EMBEDDING_RESPONSES = {
  200: {
    description: "One embedding per input, in input order (`embedding` is a base64 string with encoding_format base64).",
    content: { "application/json": { example: { id: "embd-5a2e", object: "list", created: 1764400000, model: "qwen3-embedding", data: [{ index: 0, object: "embedding", embedding: [0.0123, -0.0456, 0.0789] }], usage: { prompt_tokens: 5, total_tokens: 5, completion_tokens: 0, prompt_tokens_details: null } } } },
  },
  400: { description: "BadRequestError", content: { "application/json": { example: { error: { message: "The model does not support Embeddings API", type: "BadRequestError", param: null, code: 400 } } } } },
};

const POOLING_RESPONSES = {
  200: {
    description: "One pooled vector per input, in input order.",
    content: { "application/json": { example: { id: "pool-5a2e", object: "list", created: 1764400000, model: "qwen3-embedding", data: [{ index: 0, object: "pooling", data: [0.0123, -0.0456, 0.0789] }], usage: { prompt_tokens: 5, total_tokens: 5, completion_tokens: 0, prompt_tokens_details: null } } } },
  },
  400: { description: "BadRequestError", content: { "application/json": { example: { error: { message: "The model does not support Pooling API", type: "BadRequestError", param: null, code: 400 } } } } },
};

/** `track` counts the request for GET /load (server/load.ts) until its response is over; `contexts` are the app's. */
export function embeddingsRoutes(options: ServerOptions, track: ServerLoad["track"] = (handler) => handler(), contexts = new RequestContexts()) {
  return new Elysia({ name: "openai-embeddings" })
    .post("/v1/embeddings", ({ body, request }) => track(() => createEmbedding(options, body, contexts.of(request))), {
      body: EmbeddingRequest,
      detail: {
        tags: ["OpenAI"], summary: "Create embeddings",
        description: "OpenAI Embeddings on an embedding model (a GGUF with a pooling type, or --runner pooling): `input` is a string, a list of strings, token ids or lists of token ids; pooling (LAST, MEAN, CLS) and normalisation follow --pooler-config or the GGUF.",
        security: [{ bearerAuth: [] }], responses: EMBEDDING_RESPONSES,
      },
    })
    .post("/pooling", ({ body, request }) => track(() => createPooling(options, body, contexts.of(request))), {
      body: t.Object({ ...poolingFields, task: t.Optional(t.Nullable(t.String({ description: "Only `embed` (the default)." }))) }, { description: "vLLM /pooling: the pooled output of each input." }),
      detail: { tags: ["vLLM"], summary: "Pooled outputs of an embedding model", description: "vLLM's pooling API for the embed task: the same vectors as /v1/embeddings, as `data` of `object: pooling` items.", security: [{ bearerAuth: [] }], responses: POOLING_RESPONSES },
    });
}
