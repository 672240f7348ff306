/**
 * POST /api/embed and the older POST /api/embeddings (ollama server/routes.go EmbedHandler, EmbeddingsHandler) on
 * fennec's pooling path (openai/embedding: the same preparation and engine requests as /v1/embeddings). /api/embed
 * answers L2-normalised vectors for a string or a list of strings (`truncate`, default true, keeps the last tokens
 * that fit, vLLM's truncate_prompt_tokens -1; false makes a too-long input a 400); /api/embeddings answers one
 * vector, not normalised. An empty input answers no vectors, as Ollama does. A generative model answers the 400 of
 * /v1/embeddings. `options` have no effect on pooling, so any given is refused.
 * @example await embed(options, names, body, context)
 */
import { ApiError } from "../errors.ts";
import type { ServerOptions } from "../server-options.ts";
import type { RequestContext } from "../request-context.ts";
import { encodeAll } from "../openai/embedding/route.ts";
import { prepareEmbedding, requirePooler } from "../openai/embedding/prepare.ts";
import { durationFields } from "./durations.ts";
import { optionalString, type Body } from "./request-fields.ts";

function refuseOptions(body: Body): void {
  const options = body["options"];
  if (options !== undefined && options !== null && (typeof options !== "object" || Object.keys(options).length > 0)) {
    throw new ApiError("badRequest", "options do not apply to embeddings in fennec (pooling has no sampling); leave options out");
  }
}

function embedInputs(input: unknown): string[] {
  if (input === undefined || input === null || input === "") return [];
  if (typeof input === "string") return [input];
  if (Array.isArray(input) && input.every((s) => typeof s === "string")) return input as string[];
  throw new ApiError("badRequest", "invalid input type");
}

/** /api/embed: `model` is the resolved display name. */
export async function embed(options: ServerOptions, model: string, body: Body, context: RequestContext): Promise<Record<string, unknown>> {
  requirePooler(options, "Embeddings");
  refuseOptions(body);
  const inputs = embedInputs(body["input"]);
  const truncate = body["truncate"];
  if (truncate !== undefined && truncate !== null && typeof truncate !== "boolean") throw new ApiError("badRequest", "truncate must be a boolean");
  const dimensions = body["dimensions"];
  if (dimensions !== undefined && dimensions !== null && !Number.isInteger(dimensions)) throw new ApiError("badRequest", "dimensions must be an integer");
  if (inputs.length === 0) return { model, embeddings: [] };
  const prepared = await prepareEmbedding(options, {
    input: inputs, normalize: true,
    ...(truncate !== false ? { truncate_prompt_tokens: -1 } : {}),
    ...(typeof dimensions === "number" ? { dimensions } : {}),
  }, context, "embd");
  const outputs = await encodeAll(options, prepared.requests, context.clientSignal);
  const numPromptTokens = outputs.reduce((sum, o) => sum + o.numPromptTokens, 0);
  return {
    model, embeddings: outputs.map((o) => Array.from(o.embedding)),
    ...durationFields({ totalMs: performance.now() - context.startedPerfMs, times: null, numPromptTokens, numGeneratedTokens: 0 }),
  };
}

/** /api/embeddings (older): one prompt, one vector, not normalised. */
export async function legacyEmbedding(options: ServerOptions, body: Body, context: RequestContext): Promise<Record<string, unknown>> {
  requirePooler(options, "Embeddings");
  refuseOptions(body);
  const prompt = optionalString(body, "prompt") ?? "";
  if (prompt === "") return { embedding: [] };
  const prepared = await prepareEmbedding(options, { input: prompt, normalize: false }, context, "embd");
  const [output] = await encodeAll(options, prepared.requests, context.clientSignal);
  return { embedding: Array.from(output!.embedding) };
}
