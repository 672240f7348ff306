/**
 * POST /v1/completions (legacy): a string, a token-id list, or a list of either. Each prompt is one engine request;
 * choices are numbered prompt_index * n + i (vLLM). Per-request metrics only for one prompt with n = 1. One
 * preparation step (prepare.ts), then generation (server/generation/run-generation.ts), then a response builder of
 * response.ts. The request's RequestContext carries its id header, arrival time and client signal through all three.
 * @example app.use(completionsRoutes(options, load.track, contexts));
 */
import { Elysia } from "elysia";
import type { ServerLoad } from "../../load.ts";
import type { ServerOptions } from "../../server-options.ts";
import { RequestContexts, type RequestContext } from "../../request-context.ts";
import { completionBody, completionChunks } from "./response.ts";
import { collectGeneration, generateOutputs, linkAbort, mergeAsync, primed, type RequestAbort } from "../../generation/run-generation.ts";
import { prepareCompletion } from "./prepare.ts";
import { CompletionRequest, type CompletionBody } from "../schemas.ts";
import { COMPLETION_RESPONSES } from "../response-docs.ts";
import { sseResponse } from "../stream.ts";

export async function createCompletion(options: ServerOptions, body: CompletionBody, context: RequestContext): Promise<Response | Record<string, unknown>> {
  const { requests, answer } = await prepareCompletion(options, body, context);
  const { orchestrator } = options;
  const aborts: RequestAbort[] = requests.map((r) => linkAbort(context.clientSignal, options.shutdownSignal, () => options.log(`${r.requestId} aborted: the client disconnected`)));
  const disposeAll = () => aborts.forEach((a) => a.dispose());
  if (body.stream !== true) {
    try {
      return completionBody(answer, await Promise.all(requests.map((r, i) => collectGeneration(orchestrator, r, aborts[i]!))));
    } finally {
      disposeAll();
    }
  }
  const tagged = requests.map((r, i) => (async function* () {
    for await (const output of generateOutputs(orchestrator, r, aborts[i]!)) yield { promptIndex: i, output };
  })());
  const outputs = await primed(mergeAsync(tagged)).catch((error: unknown) => {
    disposeAll();
    throw error;
  });
  const chunks = completionChunks(answer, outputs, () => aborts.some((a) => a.controller.signal.aborted));
  return sseResponse(chunks, { onCancel: () => aborts.forEach((a) => a.clientGone()), onEnd: disposeAll, log: options.log });
}

/** `track` counts the request for GET /load (server/load.ts) until its response is over; `contexts` are the app's. */
export function completionsRoutes(options: ServerOptions, track: ServerLoad["track"] = (handler) => handler(), contexts = new RequestContexts()) {
  return new Elysia({ name: "openai-completions" }).post(
    "/v1/completions",
    ({ body, request }) => track(() => createCompletion(options, body, contexts.of(request))),
    {
      body: CompletionRequest,
      detail: {
        tags: ["OpenAI"],
        summary: "Create a completion (legacy)",
        description: "OpenAI Completions: `prompt` is a string, a list of strings, a token-id list or a list of token-id lists. Streams as server-sent events with `stream: true`.",
        security: [{ bearerAuth: [] }],
        responses: COMPLETION_RESPONSES,
      },
    },
  );
}
