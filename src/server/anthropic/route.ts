/**
 * POST /v1/messages and POST /v1/messages/count_tokens, Anthropic's Messages API as vLLM and llama.cpp serve it
 * (vllm/entrypoints/anthropic/api_router.py; llama.cpp tools/server/server-context.cpp post_anthropic_messages,
 * handle_count_tokens): prepare (prepare.ts: translate, then the shared chat preparation), generate
 * (server/generation/run-generation.ts), answer with one message (message-response.ts) or its event stream
 * (message-stream.ts). Errors on these paths are Anthropic's shape (errors.ts, chosen by app.ts for the paths).
 * @example app.use(messagesRoutes(options, load.track, contexts));
 */
import { Elysia, t } from "elysia";
import { collectGeneration, generateOutputs, linkAbort, primed } from "../generation/run-generation.ts";
import type { ServerLoad } from "../load.ts";
import { RequestContexts, type RequestContext } from "../request-context.ts";
import type { ServerOptions } from "../server-options.ts";
import { anthropicRequestId } from "./errors.ts";
import { messageBody } from "./message-response.ts";
import { messageEvents, messageSseResponse } from "./message-stream.ts";
import { countMessageTokens, prepareMessage } from "./prepare.ts";
import { withThinkingBudget } from "./thinking-budget.ts";

function jsonResponse(body: unknown, requestId: string): Response {
  return new Response(JSON.stringify(body), { status: 200, headers: { "content-type": "application/json;charset=utf-8", "request-id": requestId } });
}

export async function createMessage(options: ServerOptions, body: unknown, context: RequestContext): Promise<Response> {
  const prepared = await prepareMessage(options, body, context);
  const { answer } = prepared;
  const request = withThinkingBudget(options, prepared);
  const requestId = anthropicRequestId(context.requestIdHeader);
  const abort = linkAbort(context.clientSignal, options.shutdownSignal, () => options.log(`${answer.id} aborted: the client disconnected`));
  if (!prepared.stream) {
    try {
      return jsonResponse(messageBody(answer, await collectGeneration(options.orchestrator, request, abort)), requestId);
    } finally {
      abort.dispose();
    }
  }
  const primedOutputs = await primed(generateOutputs(options.orchestrator, request, abort)).catch((error: unknown) => {
    abort.dispose();
    throw error;
  });
  const events = messageEvents(answer, primedOutputs, () => abort.controller.signal.aborted);
  return messageSseResponse(events, requestId, { onCancel: () => abort.clientGone(), onEnd: () => abort.dispose(), log: options.log });
}

const ANY_BODY = t.Record(t.String(), t.Unknown(), { description: "An Anthropic Messages request body (checked field by field; see docs/anthropic.md)." });

/** `track` counts the request for GET /load until its response is over; `contexts` are the app's. */
export function messagesRoutes(options: ServerOptions, track: ServerLoad["track"] = (handler) => handler(), contexts = new RequestContexts()) {
  return new Elysia({ name: "anthropic-messages" })
    .post("/v1/messages", ({ body, request }) => track(() => createMessage(options, body, contexts.of(request))), {
      body: ANY_BODY,
      detail: {
        tags: ["Anthropic"],
        summary: "Create a message (Anthropic Messages API)",
        description: "Anthropic's Messages API: system, messages with text / tool_use / tool_result / thinking blocks, tools, tool_choice, thinking, stop_sequences. With `stream: true` the answer is Anthropic's event stream. Errors use Anthropic's error shape. Accepts `x-api-key` as well as `Authorization: Bearer`.",
        security: [{ bearerAuth: [] }],
      },
    })
    .post("/v1/messages/count_tokens", async ({ body, request }) => jsonResponse(await countMessageTokens(options, body), anthropicRequestId(request.headers.get("x-request-id"))), {
      body: ANY_BODY,
      detail: {
        tags: ["Anthropic"],
        summary: "Count the prompt tokens of a message request",
        description: "The number of tokens the same Messages body would put in the prompt (chat template included): `{\"input_tokens\": N}`.",
        security: [{ bearerAuth: [] }],
      },
    });
}
