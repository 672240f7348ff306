/**
 * POST /score, /v1/score, /rerank, /v1/rerank, /v2/rerank on an embedding model (vllm/entrypoints/pooling/score/
 * serving.py ServingScores._embedding_score and do_rerank; protocol.py ScoreRequest, RerankRequest): every text is
 * embedded through the same pooling requests as /v1/embeddings, and a pair's score is the cosine similarity of its two
 * embeddings. text_1 of one item is paired with every text_2 (1:N), lists of equal length pair up (N:N). /rerank ranks
 * the documents against the query by that score (top_n: the best n; 0 keeps all).
 */
import { Elysia, t } from "elysia";
import { ApiError } from "../errors.ts";
import type { ServerLoad } from "../load.ts";
import type { ServerOptions } from "../server-options.ts";
import { RequestContexts, type RequestContext } from "../request-context.ts";
import { prepareEmbedding } from "./embedding/prepare.ts";
import { encodeAll } from "./embedding/route.ts";

const texts = (description: string) => t.Union([t.String(), t.Array(t.String())], { description });
const nullableInteger = (description: string) => t.Optional(t.Nullable(t.Integer({ description })));
const classifierFields = {
  use_activation: t.Optional(t.Nullable(t.Boolean({ description: "Classifier scoring only: refused on an embedding model (the score is a cosine similarity)." }))),
  softmax: t.Optional(t.Nullable(t.Boolean({ description: "Deprecated alias of use_activation: refused." }))),
  activation: t.Optional(t.Nullable(t.Boolean({ description: "Deprecated alias of use_activation: refused." }))),
};
const commonFields = {
  model: t.Optional(t.Nullable(t.String({ description: "Served model name; empty or null means the served model." }))),
  truncate_prompt_tokens: nullableInteger("Keep only the last k tokens of each text; -1 keeps as many as --max-model-len holds."),
  priority: nullableInteger("With --scheduling-policy priority, lower runs first; non-zero under fcfs is refused."),
  mm_processor_kwargs: t.Optional(t.Unknown({ description: "Refused: fennec serves text models only." })),
  ...classifierFields,
};

export const ScoreRequest = t.Object({
  ...commonFields,
  text_1: texts("One text (scored against every text_2) or a list as long as text_2."),
  text_2: texts("The texts to score."),
}, { description: "vLLM /score on an embedding model: cosine similarity of each pair's embeddings.", example: { text_1: "What is the capital of France?", text_2: ["Paris is the capital of France.", "The Eiffel Tower is in Paris."] } });

export const RerankRequest = t.Object({
  ...commonFields,
  query: t.String({ description: "The query the documents are ranked against." }),
  documents: t.Array(t.String(), { description: "The documents to rank." }),
  top_n: nullableInteger("Return only the n best documents; 0 (the default) returns all."),
}, { description: "vLLM /rerank (Jina / Cohere style) on an embedding model: documents by cosine similarity to the query.", example: { query: "capital of France", documents: ["Paris is the capital of France.", "Bananas are yellow."], top_n: 1 } });

type ScoreBody = typeof ScoreRequest.static;
type RerankBody = typeof RerankRequest.static;
type CommonBody = Pick<ScoreBody, "model" | "truncate_prompt_tokens" | "priority" | "mm_processor_kwargs" | "use_activation" | "softmax" | "activation">;

/** cosine similarity in float64 (vLLM: torch.nn.functional.cosine_similarity, eps 1e-8) */
function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) { dot += a[i]! * b[i]!; na += a[i]! * a[i]!; nb += b[i]! * b[i]!; }
  return dot / Math.max(Math.sqrt(na) * Math.sqrt(nb), 1e-8);
}

/** Embeds texts_1 + texts_2 in one batch; returns each pair's score and prompt tokens (vLLM _embedding_score). */
async function scorePairs(options: ServerOptions, body: CommonBody, texts1: readonly string[], texts2: readonly string[], context: RequestContext, idPrefix: string, api: string) {
  for (const key of ["use_activation", "softmax", "activation"] as const) {
    if (body[key] !== undefined && body[key] !== null) {
      throw new ApiError("badRequest", `Task embed only supports ['dimensions', 'normalize'] parameters, does not support ['${key}'] parameters`, key);
    }
  }
  if (texts1.length === 0) throw new ApiError("badRequest", "At least one text element must be given");
  if (texts2.length === 0) throw new ApiError("badRequest", "At least one text_pair element must be given");
  if (texts1.length > 1 && texts1.length !== texts2.length) throw new ApiError("badRequest", "Input lengths must be either 1:1, 1:N or N:N");
  const prepared = await prepareEmbedding(options, {
    input: [...texts1, ...texts2], model: body.model ?? null, truncate_prompt_tokens: body.truncate_prompt_tokens ?? null,
    priority: body.priority ?? null, ...(body.mm_processor_kwargs !== undefined ? { mm_processor_kwargs: body.mm_processor_kwargs } : {}),
  }, context, idPrefix, api);
  const outputs = await encodeAll(options, prepared.requests, context.clientSignal);
  const first = outputs.slice(0, texts1.length);
  const second = outputs.slice(texts1.length);
  const pairs = second.map((o2, i) => {
    const o1 = first.length === 1 ? first[0]! : first[i]!;
    return { score: cosine(o1.embedding, o2.embedding), promptTokens: o1.numPromptTokens + o2.numPromptTokens };
  });
  return { id: prepared.id, created: prepared.created, pairs, promptTokens: pairs.reduce((n, p) => n + p.promptTokens, 0) };
}

const asList = (v: string | readonly string[]): readonly string[] => (typeof v === "string" ? [v] : v);

export async function createScore(options: ServerOptions, body: ScoreBody, context: RequestContext) {
  const r = await scorePairs(options, body, asList(body.text_1), asList(body.text_2), context, "score", "Score");
  return {
    id: r.id, object: "list", created: r.created, model: options.servedModelName,
    data: r.pairs.map((p, index) => ({ index, object: "score", score: p.score })),
    usage: { prompt_tokens: r.promptTokens, total_tokens: r.promptTokens, completion_tokens: 0, prompt_tokens_details: null },
  };
}

export async function createRerank(options: ServerOptions, body: RerankBody, context: RequestContext) {
  const topN = body.top_n ?? 0;
  if (topN < 0) throw new ApiError("badRequest", `top_n must be at least 0, got ${topN}.`, "top_n");
  const r = await scorePairs(options, body, [body.query], body.documents, context, "rerank", "Rerank (Score)");
  const results = r.pairs.map((p, index) => ({ index, document: { text: body.documents[index]!, multi_modal: null }, relevance_score: p.score }));
  results.sort((a, b) => b.relevance_score - a.relevance_score);
  return { id: r.id, model: options.servedModelName, usage: { total_tokens: r.promptTokens }, results: topN > 0 ? results.slice(0, topN) : results };
}

const SCORE_RESPONSES = {
  200: { description: "One score per pair, in text_2 order.", content: { "application/json": { example: { id: "score-5a2e", object: "list", created: 1764400000, model: "qwen3-embedding", data: [{ index: 0, object: "score", score: 0.83 }], usage: { prompt_tokens: 14, total_tokens: 14, completion_tokens: 0, prompt_tokens_details: null } } } } },
  400: { description: "BadRequestError", content: { "application/json": { example: { error: { message: "The model does not support Score API", type: "BadRequestError", param: null, code: 400 } } } } },
};
const RERANK_RESPONSES = {
  200: { description: "The documents, best first.", content: { "application/json": { example: { id: "rerank-5a2e", model: "qwen3-embedding", usage: { total_tokens: 14 }, results: [{ index: 0, document: { text: "Paris is the capital of France.", multi_modal: null }, relevance_score: 0.83 }] } } } },
  400: { description: "BadRequestError", content: { "application/json": { example: { error: { message: "The model does not support Rerank (Score) API", type: "BadRequestError", param: null, code: 400 } } } } },
};

/** `track` counts the request for GET /load (server/load.ts) until its response is over; `contexts` are the app's. */
export function scoreRoutes(options: ServerOptions, track: ServerLoad["track"] = (handler) => handler(), contexts = new RequestContexts()) {
  const app = new Elysia({ name: "vllm-score" });
  for (const path of ["/score", "/v1/score"]) {
    app.post(path, ({ body, request }) => track(() => createScore(options, body, contexts.of(request))), {
      body: ScoreRequest,
      detail: { tags: ["vLLM"], summary: "Score text pairs", description: "On an embedding model: the cosine similarity of each pair's embeddings (vLLM's score API for embedding models).", security: [{ bearerAuth: [] }], responses: SCORE_RESPONSES },
    });
  }
  for (const path of ["/rerank", "/v1/rerank", "/v2/rerank"]) {
    app.post(path, ({ body, request }) => track(() => createRerank(options, body, contexts.of(request))), {
      body: RerankRequest,
      detail: { tags: ["vLLM"], summary: "Rerank documents", description: "On an embedding model: the documents ordered by the cosine similarity of their embedding to the query's.", security: [{ bearerAuth: [] }], responses: RERANK_RESPONSES },
    });
  }
  return app;
}
