/**
 * POST /invocations (SageMaker; vllm/entrypoints/openai/api_server.py: invocations): vLLM routes it by the body's shape, `messages` to chat completions,
 * `prompt` to completions, `input` to embeddings, `text_1` to score, `documents` to rerank, and leaves it outside --api-key. fennec forwards the body to that route of the same app,
 * so the answer (stream or not, errors included) is exactly the route's.
 */
import { Elysia } from "elysia";
import { ApiError } from "../errors.ts";

/** Body shape -> the route that serves it: the table vLLM's invocation router walks. */
export const INVOCATION_ROUTES: readonly { readonly field: string; readonly path: string }[] = [
  { field: "messages", path: "/v1/chat/completions" },
  { field: "prompt", path: "/v1/completions" },
  { field: "input", path: "/v1/embeddings" },
  { field: "text_1", path: "/score" },
  { field: "documents", path: "/rerank" },
];

/** `forward(path, body, request)` answers the body as `path` would (the app's own handler, with the server's key). */
export function invocationsRoutes(forward: (path: string, body: Record<string, unknown>, request: Request) => Promise<Response>) {
  return new Elysia({ name: "sagemaker-invocations" }).post("/invocations", ({ body, request }) => {
    const fields = body as Record<string, unknown>;
    // a list under a field picks its route first (vLLM tries each request model in turn); then any field present
    const route = INVOCATION_ROUTES.find((r) => Array.isArray(fields[r.field])) ?? INVOCATION_ROUTES.find((r) => r.field in fields);
    if (route === undefined) {
      throw new ApiError("badRequest", `Cannot find suitable handler for request: the body needs one of ${INVOCATION_ROUTES.map((r) => `\`${r.field}\``).join(", ")}.`);
    }
    return forward(route.path, fields, request);
  }, {
    detail: {
      tags: ["Server"],
      summary: "SageMaker invocations",
      description: "A chat completions body (with `messages`) or a completions body (with `prompt`), answered by that route. Not guarded by --api-key, as in vLLM.",
    },
  });
}
