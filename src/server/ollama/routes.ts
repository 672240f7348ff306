/**
 * Ollama's native API on fennec's port (ollama server/routes.go GenerateRoutes; docs/api.md): /api/chat and
 * /api/generate (NDJSON streams by default, one JSON with `stream: false`), /api/tags, /api/show, /api/ps,
 * /api/embed, /api/embeddings, /api/pull, /api/version, /api/copy and /api/delete. Each generating request is
 * translated into vLLM's field names and goes through the preparation and the run every dialect shares
 * (generation/prepare-generation.ts, run-generation.ts); the answer is Ollama's records (generation-records.ts).
 * Errors are Ollama's `{"error": "..."}` (ollama-errors.ts, through the app's one error handler). Every request is
 * counted by the app's HTTP metrics and access log like any other route.
 * @example app.use(ollamaRoutes(options, load.track, contexts));
 */
import { Elysia } from "elysia";
import pkg from "../../../package.json" with { type: "json" };
import { ApiError } from "../errors.ts";
import type { ServerLoad } from "../load.ts";
import type { ServerOptions } from "../server-options.ts";
import { RequestContexts, type RequestContext } from "../request-context.ts";
import { prepareChatGeneration, prepareTextGeneration, textSampling } from "../generation/prepare-generation.ts";
import { collectGeneration, generateOutputs, linkAbort, primed } from "../generation/run-generation.ts";
import type { GenerateRequest } from "../../frontend/orchestrator.ts";
import { chatGenerationBody, chatMessages } from "./chat-request.ts";
import { fimPrompt, fimTokens, generateInput } from "./generate-request.ts";
import { vllmFields, withOllamaSampling } from "./generation-sampling.ts";
import { loadRecord, streamRecords, wholeRecord, type OllamaAnswer } from "./generation-records.ts";
import { embed, legacyEmbedding } from "./embed.ts";
import { KeepAliveClock, parseKeepAlive } from "./keep-alive.ts";
import { ModelNames, withTag } from "./model-names.ts";
import { psEntry, tagEntry } from "./model-details.ts";
import { ndjsonResponse } from "./ndjson-stream.ts";
import { modelParameters } from "./options-table.ts";
import { pullRecords } from "./pull-progress.ts";
import { bodyObject, commonFields, optionalString, type Body, type CommonFields } from "./request-fields.ts";
import { showModel } from "./show.ts";
import { adapterOf, adapterPsEntries, adapterTagEntries, showAdapter } from "./adapter-models.ts";
import { OLLAMA_DOCS } from "./api-docs.ts";
import { LOAD_MS_HEADER, routedRequests } from "../model-router.ts";

/** The state Ollama's routes keep: the names the model answers to and its keep-alive expiry. */
interface OllamaState {
  readonly names: ModelNames;
  readonly keepAlive: KeepAliveClock;
}

/** ollama: a generation request to an embedding model */
function refuseOnPoolingModel(options: ServerOptions, model: string, what: string): void {
  if ((options.orchestrator.pooler ?? null) !== null) throw new ApiError("badRequest", `"${model}" does not support ${what}`);
}

/** Runs a prepared request and answers with one record or an NDJSON stream; the keep-alive starts when it ends. */
async function respond(options: ServerOptions, state: OllamaState, answer: OllamaAnswer, request: GenerateRequest, fields: CommonFields, context: RequestContext): Promise<Response | Record<string, unknown>> {
  const abort = linkAbort(context.clientSignal, options.shutdownSignal, () => options.log(`${request.externalRequestId ?? request.requestId} aborted: the client disconnected`));
  const ended = () => {
    abort.dispose();
    state.keepAlive.touch(Date.now(), fields.keepAliveMs);
  };
  if (!fields.stream) {
    try {
      return wholeRecord(answer, await collectGeneration(options.orchestrator, request, abort));
    } finally {
      ended();
    }
  }
  const outputs = await primed(generateOutputs(options.orchestrator, request, abort)).catch((error: unknown) => {
    ended();
    throw error;
  });
  return ndjsonResponse(streamRecords(answer, outputs), { onCancel: () => abort.clientGone(), onEnd: ended, log: options.log });
}

/**
 * Ollama's load request (nothing to generate): the model is loaded already; one record either way. With keep_alive 0
 * it is Ollama's unload request (server/routes.go: done_reason "unload"): what is in front (the registry, or the one
 * model's keeper) unloads the model when this request ends.
 */
function loaded(state: OllamaState, model: string, shape: OllamaAnswer["shape"], fields: CommonFields): Response | Record<string, unknown> {
  state.keepAlive.touch(Date.now(), fields.keepAliveMs);
  const record = loadRecord(model, shape, fields.keepAliveMs === 0 ? "unload" : "load");
  if (!fields.stream) return record;
  return ndjsonResponse((async function* () { yield record; })(), { onCancel: () => {}, onEnd: () => {}, log: () => {} });
}

function requestIds(context: RequestContext): { requestId: string; externalRequestId: string } {
  const id = `ollama-${context.requestIdHeader ?? crypto.randomUUID()}`;
  return { requestId: `${id}-${crypto.randomUUID().slice(0, 8)}`, externalRequestId: id };
}

/** The facts of a request forwarded by what unloads the model (the several-models router, or the one model's keeper,
 * server/single-model-keep-alive.ts); a request from a client directly has neither. */
export interface Routed {
  /** keep_alive is applied in front of this app (0 unloads) */
  readonly unloadable: boolean;
  /** ms the request waited for the model's load */
  readonly loadMs: number;
}

/** the images' embeddings at their placeholder rows, when prepareChatGeneration placed any */
const imagesOf = (prepared: { readonly multimodal?: GenerateRequest["multimodal"] }) => (prepared.multimodal === undefined ? {} : { multimodal: prepared.multimodal });

const DIRECT: Routed = { unloadable: false, loadMs: 0 };

/**
 * The model a chat or generate request names: a LoRA adapter's name (Ollama's name rules: `sql` is `sql:latest`, any
 * case) runs the base model with that adapter, as the OpenAI routes pick one by `model`; else one of the served names.
 */
function pickModel(options: ServerOptions, state: OllamaState, requested: string | undefined): { model: string; lora: { loraName?: string } } {
  const adapter = adapterOf(options, requested);
  if (adapter !== null) return { model: withTag(adapter.name), lora: { loraName: adapter.name } };
  return { model: state.names.resolve(requested), lora: {} };
}

function routedOf(request: Request): Routed {
  if (!routedRequests.has(request)) return DIRECT;
  const loadMs = Number(request.headers.get(LOAD_MS_HEADER) ?? 0);
  return { unloadable: true, loadMs: Number.isFinite(loadMs) && loadMs > 0 ? loadMs : 0 };
}

export async function chat(options: ServerOptions, state: OllamaState, raw: unknown, context: RequestContext, routed: Routed = DIRECT): Promise<Response | Record<string, unknown>> {
  const arrivalMs = context.arrivalMs;
  const body = bodyObject(raw);
  const { model, lora } = pickModel(options, state, optionalString(body, "model"));
  refuseOnPoolingModel(options, model, "chat");
  const messages = chatMessages(body);
  const fields = commonFields(body, modelParameters(options.generationDefaults), routed.unloadable);
  const generationBody = chatGenerationBody(options, model, body, messages, fields);
  if (messages.length === 0) return loaded(state, model, "chat", fields);
  const generation = await prepareChatGeneration(options, generationBody, { maxTokens: { value: fields.sampling.maxTokens, param: "max_tokens" }, logprobs: fields.logprobs });
  const sampling = withOllamaSampling(options, generation, fields.sampling);
  const answer: OllamaAnswer = { model, shape: "chat", output: generation.output, tokenizer: options.orchestrator.tokenizer, logprobs: fields.logprobs, numPromptTokens: generation.promptTokenIds.length, startedPerfMs: context.startedPerfMs, loadMs: routed.loadMs };
  return respond(options, state, answer, { ...requestIds(context), ...imagesOf(generation), promptTokenIds: generation.promptTokenIds, sampling, arrivalMs, traceHeaders: context.traceHeaders, ...lora }, fields, context);
}

export async function generate(options: ServerOptions, state: OllamaState, raw: unknown, context: RequestContext, routed: Routed = DIRECT): Promise<Response | Record<string, unknown>> {
  const arrivalMs = context.arrivalMs;
  const body = bodyObject(raw);
  const { model, lora } = pickModel(options, state, optionalString(body, "model"));
  refuseOnPoolingModel(options, model, "generate");
  const fim = fimTokens(options.ollama?.metadata);
  const input = generateInput(body, model, fim);
  const fields = commonFields(body, modelParameters(options.generationDefaults), routed.unloadable);
  const vllm = vllmFields(options, model, fields);
  if (input.kind === "load") return loaded(state, model, "generate", fields);
  const choices = { maxTokens: { value: fields.sampling.maxTokens, param: "max_tokens" as const }, logprobs: fields.logprobs };
  let prepared: { promptTokenIds: readonly number[]; sampling: GenerateRequest["sampling"]; multimodal?: GenerateRequest["multimodal"] };
  let output: OllamaAnswer["output"] = null;
  if (input.kind === "chat") {
    const generation = await prepareChatGeneration(options, { ...vllm, messages: input.messages }, choices);
    prepared = generation;
    output = generation.output;
  } else {
    if (vllm["reasoning_effort"] !== undefined) throw new ApiError("badRequest", "think does not apply to raw or suffix prompts: the chat template (which turns thinking on or off) is not used");
    const textBody = { ...vllm };
    const { tokenizer } = options.orchestrator;
    const prompt = input.kind === "raw" ? { text: input.text }
      : { tokenIds: fimPrompt(fim!, (text, addSpecial) => tokenizer.encode(text, { addSpecial, parseSpecial: false }), input.prefix, input.suffix) };
    const [first] = await prepareTextGeneration(options, textBody, [prompt], await textSampling(options, textBody, choices), { maxTokensParam: "max_tokens", promptParam: "prompt" });
    prepared = first!;
  }
  const sampling = withOllamaSampling(options, prepared, fields.sampling);
  const answer: OllamaAnswer = { model, shape: "generate", output, tokenizer: options.orchestrator.tokenizer, logprobs: fields.logprobs, numPromptTokens: prepared.promptTokenIds.length, startedPerfMs: context.startedPerfMs, loadMs: routed.loadMs };
  return respond(options, state, answer, { ...requestIds(context), ...imagesOf(prepared), promptTokenIds: prepared.promptTokenIds, sampling, arrivalMs, traceHeaders: context.traceHeaders, ...lora }, fields, context);
}

async function pull(options: ServerOptions, raw: unknown): Promise<Response | Record<string, unknown>> {
  const body = bodyObject(raw);
  const name = optionalString(body, "model") ?? optionalString(body, "name");
  if (name === undefined || name === "") throw new ApiError("badRequest", "model is required");
  const puller = options.ollama?.pull;
  if (puller === undefined) throw new ApiError("badRequest", "this server cannot pull models (no Hugging Face download is wired in)");
  if (body["insecure"] === true) throw new ApiError("badRequest", "insecure is not supported: fennec downloads from the Hugging Face Hub over HTTPS only");
  const records = pullRecords(puller, name);
  if (body["stream"] === false) {
    let last: Record<string, unknown> = {};
    for await (const record of records) last = record;
    return last;
  }
  return ndjsonResponse(await primed(records), { onCancel: () => {}, onEnd: () => {}, log: options.log });
}

/**
 * Ollama reads every body as JSON whatever its Content-Type (Go's ShouldBindJSON), and its documented calls are
 * `curl -d '{...}'`, which sends application/x-www-form-urlencoded: bodies the app's JSON parser left alone are
 * read here. An empty body stays "" (Ollama's "missing request body").
 */
async function jsonBody({ request, contentType }: { request: Request; contentType: string }): Promise<unknown> {
  if (contentType.startsWith("application/json")) return undefined;
  const text = await request.text();
  if (text.trim() === "") return "";
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ApiError("invalidBody", "Request body is not valid JSON");
  }
}

/** the `model` (or older `name`) of a body */
const modelField = (body: Body): string | undefined => optionalString(body, "model") ?? optionalString(body, "name");

/** `track` counts generating requests for GET /load; `contexts` are the app's. */
export function ollamaRoutes(options: ServerOptions, track: ServerLoad["track"] = (handler) => handler(), contexts = new RequestContexts()) {
  const state: OllamaState = { names: new ModelNames([options.servedModelName, ...(options.servedModelAliases ?? [])]), keepAlive: new KeepAliveClock(Date.now()) };
  // OLLAMA_DOCS is plain OpenAPI JSON; Elysia's DocumentDecoration types it more narrowly than the JSON it copies
  const docs = (route: keyof typeof OLLAMA_DOCS, summary: string, description: string): { summary: string } => {
    const decoration: Record<string, unknown> = { tags: ["Ollama"], summary, description, ...OLLAMA_DOCS[route] };
    return decoration as { summary: string };
  };
  const detail = (route: keyof typeof OLLAMA_DOCS, summary: string, description: string) => ({ detail: docs(route, summary, description) });
  const withBody = (route: keyof typeof OLLAMA_DOCS, summary: string, description: string) => ({ parse: jsonBody, detail: docs(route, summary, description) });
  return new Elysia({ name: "ollama" })
    .post("/api/chat", ({ body, request }) => track(() => chat(options, state, body, contexts.of(request), routedOf(request))), withBody("chat", "Chat (Ollama)", "Ollama's /api/chat: an NDJSON stream of records by default, one JSON with `stream: false`."))
    .post("/api/generate", ({ body, request }) => track(() => generate(options, state, body, contexts.of(request), routedOf(request))), withBody("generate", "Generate (Ollama)", "Ollama's /api/generate: the prompt through the chat template (or `raw`), streamed as NDJSON by default."))
    .post("/api/embed", ({ body, request }) => track(async () => {
      const b = bodyObject(body);
      const keepAliveMs = parseKeepAlive(b["keep_alive"], routedOf(request).unloadable);
      const answer = await embed(options, state.names.resolve(modelField(b)), b, contexts.of(request));
      state.keepAlive.touch(Date.now(), keepAliveMs);
      return answer;
    }), withBody("embed", "Embed (Ollama)", "Ollama's /api/embed: L2-normalised vectors of an embedding model."))
    .post("/api/embeddings", ({ body, request }) => track(async () => {
      const b = bodyObject(body);
      state.names.resolve(modelField(b));
      const keepAliveMs = parseKeepAlive(b["keep_alive"], routedOf(request).unloadable);
      const answer = await legacyEmbedding(options, b, contexts.of(request));
      state.keepAlive.touch(Date.now(), keepAliveMs);
      return answer;
    }), withBody("embeddings", "Embedding, older form (Ollama)", "Ollama's /api/embeddings: one vector, not normalised."))
    .get("/api/tags", () => ({ models: [...state.names.list().map((name) => tagEntry(options, name)), ...adapterTagEntries(options)] }), detail("tags", "List models (Ollama)", "The served model under each of its names, and its LoRA adapters with their parent_model."))
    .get("/api/ps", () => ({ models: [...state.names.list().map((name) => psEntry(options, name, state.keepAlive.expiresAt())), ...adapterPsEntries(options, state.keepAlive.expiresAt())] }), detail("ps", "Running models (Ollama)", "The served model while loaded, with the keep-alive expiry of its latest request, and its LoRA adapters."))
    .post("/api/show", ({ body }) => {
      const b = bodyObject(body);
      const adapter = adapterOf(options, modelField(b));
      if (adapter !== null) return showAdapter(options, adapter, b["verbose"] === true);
      return showModel(options, state.names.resolve(modelField(b)), b["verbose"] === true);
    }, withBody("show", "Show a model (Ollama)", "Details, template and GGUF metadata of the served model (of its base, with parent_model, for a LoRA adapter)."))
    .post("/api/pull", ({ body }) => pull(options, body), withBody("pull", "Pull a model (Ollama)", "Downloads a Hugging Face GGUF into the cache, with Ollama's NDJSON progress records."))
    .post("/api/copy", ({ body }) => {
      const b = bodyObject(body);
      const source = optionalString(b, "source");
      const destination = optionalString(b, "destination");
      if (source === undefined || destination === undefined) throw new ApiError("badRequest", "source and destination are required");
      state.names.copy(source, destination);
      return new Response(null, { status: 200 });
    }, withBody("copy", "Copy a model (Ollama)", "Adds a name for the served model."))
    .delete("/api/delete", ({ body }) => {
      const b = bodyObject(body);
      const name = modelField(b);
      if (name === undefined || name === "") throw new ApiError("badRequest", "model is required");
      state.names.delete(name);
      return new Response(null, { status: 200 });
    }, withBody("delete", "Delete a model name (Ollama)", "Removes a name added with /api/copy; the served model itself stays."))
    .get("/api/version", () => ({ version: pkg.version }), detail("version", "Version (Ollama)", "fennec's version."));
}
