/**
 * POST /v1/chat/completions: one preparation step (prepare.ts: render the chat template, tokenize, check), then
 * generate (server/generation/run-generation.ts), then one of the two response builders of response.ts: one JSON
 * body, or SSE chunks in vLLM's order (role chunk, content deltas, one finish chunk per choice, optional usage chunk,
 * [DONE]). The request's RequestContext carries its id header, arrival time and client signal through all three.
 * @example app.use(chatCompletionsRoutes(options, load.track, contexts));
 */
import { Elysia } from "elysia";
import type { ServerLoad } from "../../load.ts";
import type { ServerOptions } from "../../server-options.ts";
import { RequestContexts, type RequestContext } from "../../request-context.ts";
import { collectGeneration, generateOutputs, linkAbort, primed } from "../../generation/run-generation.ts";
import { ChatCompletionRequest, type ChatCompletionBody } from "../schemas.ts";
import { chatCompletionBody, chatCompletionChunks } from "./response.ts";
import { prepareChatCompletion } from "./prepare.ts";
import { CHAT_COMPLETION_RESPONSES } from "../response-docs.ts";
import { sseResponse } from "../stream.ts";

export async function createChatCompletion(options: ServerOptions, body: ChatCompletionBody, context: RequestContext): Promise<Response | Record<string, unknown>> {
  const { request, answer } = await prepareChatCompletion(options, body, context);
  const { orchestrator } = options;
  const abort = linkAbort(context.clientSignal, options.shutdownSignal, () => options.log(`${answer.id} aborted: the client disconnected`));
  if (body.stream !== true) {
    try {
      return chatCompletionBody(answer, await collectGeneration(orchestrator, request, abort));
    } finally {
      abort.dispose();
    }
  }
  const outputs = await primed(generateOutputs(orchestrator, request, abort)).catch((error: unknown) => {
    abort.dispose();
    throw error;
  });
  const chunks = chatCompletionChunks(answer, outputs, () => abort.controller.signal.aborted);
  return sseResponse(chunks, { onCancel: () => abort.clientGone(), onEnd: () => abort.dispose(), log: options.log });
}

/** `track` counts the request for GET /load (server/load.ts) until its response is over; `contexts` are the app's. */
export function chatCompletionsRoutes(options: ServerOptions, track: ServerLoad["track"] = (handler) => handler(), contexts = new RequestContexts()) {
  return new Elysia({ name: "openai-chat-completions" }).post(
    "/v1/chat/completions",
    ({ body, request }) => track(() => createChatCompletion(options, body, contexts.of(request))),
    {
      body: ChatCompletionRequest,
      detail: {
        tags: ["OpenAI"],
        summary: "Create a chat completion",
        description: "OpenAI Chat Completions with vLLM's extra sampling fields. With `stream: true` the answer comes as server-sent events. With `--enable-per-request-metrics` the response carries a top-level `metrics` object.",
        security: [{ bearerAuth: [] }],
        responses: CHAT_COMPLETION_RESPONSES,
      },
    },
  );
}
