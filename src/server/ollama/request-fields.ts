/**
 * The request fields /api/chat and /api/generate share (ollama api/types.go ChatRequest / GenerateRequest), read and
 * checked once, before any translation: stream (default true), format ("json" or a JSON schema), think (true/false or
 * "low"/"medium"/"high"/"max"), logprobs/top_logprobs, keep_alive, options, and the fields fennec refuses with a
 * reason (truncate/shift true since fennec neither truncates nor shifts a context,
 * _debug_render_only). Go ignores unknown JSON keys and so does this. Throws ApiError (400) with Ollama's messages.
 * @example const fields = commonFields(body);
 */
import { ApiError } from "../errors.ts";
import { parseKeepAlive } from "./keep-alive.ts";
import { ollamaSampling, type OllamaSampling } from "./options-table.ts";

/** ollama api/types.go ThinkValue: a boolean or one of these levels */
const THINK_LEVELS = ["low", "medium", "high", "max"] as const;
export type Think = boolean | (typeof THINK_LEVELS)[number];

export interface CommonFields {
  readonly stream: boolean;
  /** vLLM's response_format for `format`, null = free text */
  readonly responseFormat: Record<string, unknown> | null;
  /** null = omitted (a thinking model thinks by default) */
  readonly think: Think | null;
  /** top logprobs per token, null = no logprobs */
  readonly logprobs: number | null;
  readonly keepAliveMs: number;
  readonly sampling: OllamaSampling;
}

export type Body = Readonly<Record<string, unknown>>;

/** The body as an object, or Ollama's 400 (ollama answers "missing request body" for none). */
export function bodyObject(body: unknown): Body {
  if (body === undefined || body === null || body === "") throw new ApiError("badRequest", "missing request body");
  if (typeof body !== "object" || Array.isArray(body)) throw new ApiError("badRequest", "the request body must be a JSON object");
  return body as Body;
}

/** A field that must be a string when present. */
export function optionalString(body: Body, key: string): string | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw new ApiError("badRequest", `${key} must be a string`);
  return value;
}

function optionalBoolean(body: Body, key: string): boolean | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "boolean") throw new ApiError("badRequest", `${key} must be a boolean`);
  return value;
}

/** ollama: `format` "json" -> any JSON; an object -> that schema; "" or null -> free text */
function responseFormat(format: unknown): Record<string, unknown> | null {
  if (format === undefined || format === null || format === "") return null;
  if (format === "json") return { type: "json_object" };
  if (typeof format === "object" && !Array.isArray(format)) return { type: "json_schema", json_schema: { name: "format", schema: format } };
  throw new ApiError("badRequest", `invalid format: ${JSON.stringify(format)}; format must be "json" or a JSON schema object`);
}

function think(value: unknown): Think | null {
  if (value === undefined || value === null) return null;
  if (typeof value === "boolean") return value;
  if (typeof value === "string" && (THINK_LEVELS as readonly string[]).includes(value)) return value as Think;
  throw new ApiError("badRequest", `invalid think value: ${JSON.stringify(value)} (must be true, false, "low", "medium", "high" or "max")`);
}

/** Refuses a field whose effect fennec does not have, naming why. */
function refuseTrue(body: Body, key: string, why: string): void {
  if (optionalBoolean(body, key) === true) throw new ApiError("badRequest", `${key} true is not supported by fennec: ${why}`);
}

/**
 * `modelDefaults`: the server's --generation-config as Ollama options (options-table.ts modelParameters);
 * `unloadable`: a registry in front applies keep_alive, so 0 (unload) is honoured there (keep-alive.ts).
 */
export function commonFields(body: Body, modelDefaults: Readonly<Record<string, number>> = {}, unloadable = false): CommonFields {
  refuseTrue(body, "truncate", "it does not cut prompts to fit the context; a prompt that does not fit is a 400 (send truncate false or leave it out)");
  refuseTrue(body, "shift", "it does not shift the context when generation reaches its end; generation stops with done_reason \"length\" (send shift false or leave it out)");
  refuseTrue(body, "_debug_render_only", "it has no render-only mode");
  const logprobs = optionalBoolean(body, "logprobs") === true;
  const top = body["top_logprobs"];
  if (top !== undefined && top !== null && (!Number.isInteger(top) || (top as number) < 0 || (top as number) > 20)) {
    throw new ApiError("badRequest", "top_logprobs must be between 0 and 20");
  }
  return {
    stream: optionalBoolean(body, "stream") ?? true,
    responseFormat: responseFormat(body["format"]),
    think: think(body["think"]),
    logprobs: logprobs ? ((top as number | undefined | null) ?? 0) : null,
    keepAliveMs: parseKeepAlive(body["keep_alive"], unloadable),
    sampling: ollamaSampling(body["options"], modelDefaults),
  };
}

