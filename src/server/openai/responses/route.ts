/**
 * The OpenAI Responses API as vLLM serves it (vllm/entrypoints/openai/responses/api_router.py, serving.py):
 * POST /v1/responses (JSON, typed SSE events, or a background run), GET /v1/responses/{id} (the stored response, or
 * with stream=true the background run's events after starting_after), POST /v1/responses/{id}/cancel (background
 * runs still queued or in progress) and DELETE /v1/responses/{id} (OpenAI's; vLLM has none). One preparation step
 * (prepare.ts), then generate (server/generation/run-generation.ts), then output-items.ts or stream-events.ts.
 * @example app.use(responsesRoutes(options, load.track, contexts));
 */
import { Elysia, t } from "elysia";
import type { ServerLoad } from "../../load.ts";
import type { ServerOptions } from "../../server-options.ts";
import { ApiError } from "../../errors.ts";
import { RequestContexts, type RequestContext } from "../../request-context.ts";
import { collectGeneration, generateOutputs, linkAbort, primed } from "../../generation/run-generation.ts";
import { eventStreamResponse } from "./event-stream.ts";
import { outputItems, outputMessages, reasoningOf, reasoningTokens, responseObject, statusOf, usageWire, type ResponseState } from "./output-items.ts";
import { prepareResponse, type PreparedResponse } from "./prepare.ts";
import { ResponsesRequest, type ResponsesBody } from "./request-schema.ts";
import { newStoredResponse, pushEvent, replayEvents, ResponseStore, wake, type StoredResponse } from "./response-store.ts";
import { numberEvents, responseEvents, type ResponseEvent } from "./stream-events.ts";
import { metricsWire } from "../usage.ts";

const notFound = (id: string) => new ApiError("notFound", `Response with id '${id}' not found.`, "response_id");

/** Stores a finished answer (store: true), with the chat messages previous_response_id replays. */
function keep(store: ResponseStore, prepared: PreparedResponse, response: Record<string, unknown>, state: ResponseState): void {
  if (!prepared.answer.store) return;
  const entry = newStoredResponse(prepared.answer.id, response, prepared.answer.inputMessages, false);
  entry.outputMessages = state.outputMessages ?? [];
  store.put(entry);
}

/**
 * background: true: the response is stored as `queued` and the generation runs on its own (vLLM's asyncio task);
 * its events are kept for GET ?stream=true when the request streams. Cancel aborts it; shutdown too.
 */
function startBackground(options: ServerOptions, store: ResponseStore, prepared: PreparedResponse, stream: boolean): { entry: StoredResponse; queued: Record<string, unknown> } {
  const { request, answer } = prepared;
  const entry = newStoredResponse(answer.id, responseObject(answer, { status: "queued", output: [], usage: null }), answer.inputMessages, true);
  if (!stream) entry.events = null;
  const cancel = new AbortController();
  entry.abort = cancel;
  store.put(entry);
  const queued = entry.response;
  const abort = linkAbort(cancel.signal, options.shutdownSignal);
  void (async () => {
    try {
      entry.response = { ...entry.response, status: "in_progress" };
      const events = responseEvents(answer, generateOutputs(options.orchestrator, request, abort), () => abort.controller.signal.aborted, (state) => {
        entry.outputMessages = state.outputMessages ?? [];
        entry.response = responseObject(answer, state);
      });
      for await (const event of numberEvents(events)) pushEvent(entry, { type: event.type, data: event });
      if (cancel.signal.aborted) entry.response = { ...entry.response, status: "cancelled" };
    } catch (error) {
      // vLLM: a background request that ended in an error is `failed`
      options.log(`${answer.id} failed in the background: ${error instanceof Error ? error.message : String(error)}`, "WARNING");
      const e = error instanceof ApiError ? error : new ApiError("internal", "The generation failed.");
      entry.response = { ...entry.response, status: "failed", error: { code: String(e.status), message: e.message } };
      pushEvent(entry, { type: "error", data: { type: "error", code: String(e.status), message: e.message, param: e.param, sequence_number: entry.events?.length ?? 0 } });
    } finally {
      abort.dispose();
      entry.done = true;
      wake(entry);
      store.measure(entry);
    }
  })();
  return { entry, queued };
}

function streamStored(options: ServerOptions, entry: StoredResponse, startingAfter: number): Response {
  const events = (async function* (): AsyncGenerator<ResponseEvent> {
    for await (const e of replayEvents(entry, startingAfter)) yield e.data as ResponseEvent;
  })();
  // a reader going away leaves the background run alone
  return eventStreamResponse(events, { onCancel: () => {}, onEnd: () => {}, log: options.log });
}

export async function createResponse(options: ServerOptions, store: ResponseStore, body: ResponsesBody, context: RequestContext): Promise<Response | Record<string, unknown>> {
  const prepared = await prepareResponse(options, body, context, store);
  const { request, answer } = prepared;
  if (answer.background) {
    const { entry, queued } = startBackground(options, store, prepared, body.stream === true);
    return body.stream === true ? streamStored(options, entry, -1) : queued;
  }
  const { orchestrator } = options;
  const abort = linkAbort(context.clientSignal, options.shutdownSignal, () => options.log(`${answer.id} aborted: the client disconnected`));
  if (body.stream !== true) {
    try {
      const result = await collectGeneration(orchestrator, request, abort);
      const choice = result.choices[0]!;
      const output = outputItems(answer, choice);
      const { status, incompleteDetails } = statusOf(choice.finishReason);
      const usage = usageWire({ inputTokens: result.numPromptTokens, cachedTokens: result.numCachedTokens, outputTokens: choice.numGeneratedTokens, reasoningTokens: reasoningTokens(answer, choice.tokenIds, reasoningOf(output)) });
      const metrics = metricsWire({ enabled: answer.enablePerRequestMetrics, n: 1, numPrompts: 1, times: result.times, numGenerationTokens: choice.numGeneratedTokens }, false);
      const state: ResponseState = { status, output, usage, incompleteDetails, outputMessages: outputMessages(output), metrics };
      const response = responseObject(answer, state);
      // a client that went away gets nothing, and nothing is kept
      if (!abort.controller.signal.aborted) keep(store, prepared, response, state);
      return response;
    } finally {
      abort.dispose();
    }
  }
  const outputs = await primed(generateOutputs(orchestrator, request, abort)).catch((error: unknown) => {
    abort.dispose();
    throw error;
  });
  // stored once complete: a stream the client left is not kept
  const events = responseEvents(answer, outputs, () => abort.controller.signal.aborted, (state) => keep(store, prepared, responseObject(answer, state), state));
  return eventStreamResponse(numberEvents(events), { onCancel: () => abort.clientGone(), onEnd: () => abort.dispose(), log: options.log });
}

function retrieve(options: ServerOptions, store: ResponseStore, id: string, query: { stream?: string; starting_after?: string }): Response | Record<string, unknown> {
  const entry = store.get(id);
  if (entry === undefined) throw notFound(id);
  if (query.stream !== "true") return entry.response;
  if (entry.events === null) throw new ApiError("badRequest", `Response '${id}' has no event stream to replay: only background responses created with stream: true keep their events.`, "stream");
  const startingAfter = query.starting_after === undefined ? -1 : Number(query.starting_after);
  if (!Number.isInteger(startingAfter) || startingAfter < -1) throw new ApiError("badRequest", "starting_after must be an integer of at least -1.", "starting_after");
  return streamStored(options, entry, startingAfter);
}

function cancel(store: ResponseStore, id: string): Record<string, unknown> {
  const entry = store.get(id);
  if (entry === undefined) throw notFound(id);
  const status = entry.response["status"];
  if (entry.abort === null || (status !== "queued" && status !== "in_progress")) throw new ApiError("badRequest", "Cannot cancel a synchronous response.", "response_id");
  entry.response = { ...entry.response, status: "cancelled" };
  entry.abort.abort();
  return entry.response;
}

function remove(store: ResponseStore, id: string): Record<string, unknown> {
  const entry = store.get(id);
  if (entry === undefined) throw notFound(id);
  entry.abort?.abort();
  store.delete(id);
  return { id, object: "response", deleted: true };
}

const ResponseId = t.Object({ response_id: t.String() });

/** `track` counts a request for GET /load until its response is over; `store` defaults to a bounded one per app. */
export function responsesRoutes(options: ServerOptions, track: ServerLoad["track"] = (handler) => handler(), contexts = new RequestContexts(), store = new ResponseStore()) {
  const detail = (summary: string, description: string) => ({ tags: ["OpenAI"], summary, description, security: [{ bearerAuth: [] }] });
  return new Elysia({ name: "openai-responses" })
    .post("/v1/responses", ({ body, request }) => track(() => createResponse(options, store, body, contexts.of(request))), {
      body: ResponsesRequest,
      detail: detail("Create a response", "OpenAI Responses API as vLLM serves it: text or items in, output items out; `stream: true` sends typed events with `sequence_number`; `background: true` answers at once with a queued response."),
    })
    .get("/v1/responses/:response_id", ({ params, query }) => retrieve(options, store, params.response_id, query), {
      params: ResponseId,
      query: t.Object({ stream: t.Optional(t.String()), starting_after: t.Optional(t.String()), include: t.Optional(t.Unknown()) }),
      detail: detail("Retrieve a stored response", "The stored response; with `stream=true` a background stream's events after `starting_after`."),
    })
    .post("/v1/responses/:response_id/cancel", ({ params }) => cancel(store, params.response_id), {
      params: ResponseId,
      // OpenAI's SDK sends no body; the empty object documents that there is nothing to send
      body: t.Optional(t.Object({}, { description: "No fields: the response id is in the path." })),
      detail: detail("Cancel a background response", "Only while it is queued or in progress."),
    })
    .delete("/v1/responses/:response_id", ({ params }) => remove(store, params.response_id), {
      params: ResponseId,
      detail: detail("Delete a stored response", "OpenAI's delete (vLLM has none): the response leaves the store; a running background response is cancelled."),
    });
}
