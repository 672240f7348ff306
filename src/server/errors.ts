/**
 * Every failure the HTTP layer returns, as the OpenAI error object `{"error":{"message","type","param","code"}}` with
 * the HTTP status equal to `code` (vLLM: serving_engine.py create_error_response, protocol.py ErrorResponse). Handlers throw `ApiError`; one `onError` (app.ts) turns
 * ApiError, Elysia's VALIDATION / PARSE / NOT_FOUND and anything unexpected into that body. Never a stack trace.
 */
import { Elysia, ValidationError } from "elysia";
import type { LogLevel } from "../util/logger.ts";
import { oneLineError } from "../util/error-message.ts";
import { jsonPreview } from "../util/json-limits.ts";

/** OpenAI / vLLM error `type` per status: the table the whole server uses. */
export const ERROR_TYPES = {
  /** semantic validation (vLLM VLLMValidationError) */
  badRequest: { status: 400, type: "BadRequestError" },
  /** schema validation and unparsable bodies (vLLM reports pydantic errors with the HTTP phrase) */
  invalidBody: { status: 400, type: "Bad Request" },
  unauthorized: { status: 401, type: "AuthenticationError" },
  notFound: { status: 404, type: "NotFoundError" },
  /** no such route, or not with this method: vLLM (Starlette) answers with the HTTP phrase as the type */
  routeNotFound: { status: 404, type: "Not Found" },
  methodNotAllowed: { status: 405, type: "Method Not Allowed" },
  /** vLLM raises HTTPException(409) (reset_prefix_cache); its handler names the HTTP phrase as the type */
  conflict: { status: 409, type: "Conflict" },
  payloadTooLarge: { status: 413, type: "PayloadTooLargeError" },
  internal: { status: 500, type: "InternalServerError" },
  unavailable: { status: 503, type: "ServiceUnavailableError" },
} as const;

export type ErrorKind = keyof typeof ERROR_TYPES;

export interface OpenAiErrorBody {
  readonly error: { readonly message: string; readonly type: string; readonly param: string | null; readonly code: number };
}

/** An error meant for the client: its message is safe to show. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  constructor(kind: ErrorKind, message: string, param: string | null = null) {
    super(message);
    this.status = ERROR_TYPES[kind].status;
    this.type = ERROR_TYPES[kind].type;
    this.param = param;
  }
  toBody(): OpenAiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.status } };
  }
}

/** vLLM's semantic-validation message: `<text> (parameter=<name>, value=<value>)`, param set. */
export function invalidParam(param: string, message: string, value?: unknown): ApiError {
  const suffix = value === undefined ? "" : ` (parameter=${param}, value=${jsonPreview(value, 200)})`;
  return new ApiError("badRequest", `${message}${suffix}`, param);
}

export function errorResponse(error: ApiError): Response {
  const text = JSON.stringify(error.toBody());
  return new Response(text, {
    status: error.status,
    headers: { "content-type": "application/json;charset=utf-8", "content-length": String(Buffer.byteLength(text)) },
  });
}

/** "/messages/0/content" -> "messages[0].content" */
function fieldName(path: string): string {
  return path.split("/").filter((p) => p !== "").map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`)).join("");
}

function describeValue(value: unknown): string {
  if (value === undefined) return "";
  // never the whole value: it may be a 15 MB prompt or a million-entry list
  return ` (got ${jsonPreview(value, 60)})`;
}

/** A JSON-schema node as TypeBox errors carry it (only the parts read here). */
interface SchemaNode {
  readonly type?: string;
  readonly format?: string;
  readonly anyOf?: readonly SchemaNode[];
  readonly items?: SchemaNode;
  readonly minimum?: number;
  readonly maximum?: number;
}

/** JSON-schema type -> the words a message uses; `items` nests ("a list of integers"). */
const TYPE_WORDS: Readonly<Record<string, readonly [string, string]>> = {
  integer: ["an integer", "integers"],
  number: ["a number", "numbers"],
  string: ["a string", "strings"],
  boolean: ["a boolean", "booleans"],
  null: ["null", "nulls"],
  object: ["an object", "objects"],
  array: ["a list", "lists"],
};

/** The types a schema accepts, in words; Elysia's coercions (numeric strings, JSON strings) count as what they stand for. */
function typeWords(schema: SchemaNode, plural = false): string[] {
  if (schema.anyOf !== undefined) {
    // Elysia wraps integers as anyOf[numeric string, integer] and arrays as anyOf[JSON string, array]: the last is the real type
    const coerced = schema.anyOf.length === 2 && schema.anyOf[0]!.type === "string" && schema.anyOf[0]!.format !== undefined;
    return coerced ? typeWords(schema.anyOf[1]!, plural) : [...new Set(schema.anyOf.flatMap((s) => typeWords(s, plural)))];
  }
  const words = schema.type === undefined ? undefined : TYPE_WORDS[schema.type];
  if (words === undefined) return [];
  const word = words[plural ? 1 : 0];
  if (schema.type === "array" && schema.items !== undefined) {
    const items = typeWords(schema.items, true);
    if (items.length > 0) return [`${word} of ${items.join(" or ")}`];
  }
  return [word];
}

/** int64 bounds are not exact doubles: print them as pydantic does. */
function boundText(bound: number): string {
  if (bound >= 2 ** 63) return "9223372036854775807";
  if (bound <= -(2 ** 63)) return "-9223372036854775808";
  return String(bound);
}

/** pydantic's wording for a number outside a numeric member's range (vLLM clients match `less_than_equal`), or null. */
function rangeProblem(schema: SchemaNode, value: unknown): string | null {
  if (typeof value !== "number") return null;
  const members = schema.anyOf === undefined ? [schema] : schema.anyOf.flatMap((s) => (s.anyOf === undefined ? [s] : s.anyOf));
  for (const m of members) {
    if (m.type !== "integer" && m.type !== "number") continue;
    if (m.maximum !== undefined && value > m.maximum) return `should be less than or equal to ${boundText(m.maximum)} [less_than_equal]`;
    if (m.minimum !== undefined && value < m.minimum) return `should be greater than or equal to ${boundText(m.minimum)} [greater_than_equal]`;
  }
  return null;
}

/**
 * Elysia converts some values before validating (a string where a list is expected becomes a list of empty objects):
 * the first ancestor whose raw value is a scalar where the path goes deeper is the real problem.
 */
function scalarAncestor(raw: unknown, segments: readonly string[]): { depth: number; value: unknown } | null {
  let value = raw;
  for (let depth = 0; depth < segments.length; depth++) {
    if (typeof value !== "object" || value === null) return depth === 0 ? null : { depth, value };
    value = (value as Record<string, unknown>)[segments[depth]!];
  }
  return null;
}

/**
 * Elysia's TypeBox error list -> one readable line naming the field (never Elysia's raw JSON shape). `rawBody` is
 * the body as the client sent it, before Elysia's conversions, so that the message shows what was really there.
 */
export function validationToApiError(error: ValidationError, rawBody?: unknown): ApiError {
  // unknown fields are accepted (vLLM ignores them), but Elysia lists them beside real errors: leave them out
  const errors = error.all.filter((e) => !("message" in e) || e.message !== "Unexpected property");
  const first = errors[0];
  if (first === undefined || !("path" in first)) return new ApiError("invalidBody", "Invalid request body");
  const segments = first.path.split("/").filter((p) => p !== "");
  const count = errors.length;
  const prefix = count > 1 ? `${count} validation errors, first` : "1 validation error";
  const ancestor = rawBody === undefined ? null : scalarAncestor(rawBody, segments);
  if (ancestor !== null) {
    const field = fieldName(`/${segments.slice(0, ancestor.depth).join("/")}`);
    const expected = /^\d+$/.test(segments[ancestor.depth]!) ? "a list" : "an object";
    return new ApiError("invalidBody", `1 validation error: '${field}' should be ${expected}${describeValue(ancestor.value)}`, field);
  }
  const field = fieldName(first.path);
  if (field === "") return new ApiError("invalidBody", "Request body must be a JSON object");
  const schema = first.schema as SchemaNode;
  const expected = typeWords(schema).filter((w) => w !== "");
  const what = first.message === "Expected required property" ? "is required"
    : rangeProblem(schema, first.value) ?? (expected.length > 0 ? `should be ${expected.join(" or ")}`
      : first.message.charAt(0).toLowerCase() + first.message.slice(1));
  return new ApiError("invalidBody", `${prefix}: '${field}' ${what}${describeValue(first.value)}`, field);
}

/** Anything thrown inside a handler -> the ApiError to send. Unknown errors become a plain 500. */
/** What the error plugin needs from the app: the raw body of a request, and the methods a path has routes for. */
export interface ErrorContext {
  readonly rawBodyOf: (request: Request) => unknown;
  readonly methodsOf: (pathname: string) => readonly string[];
  /** the error response a request got (for the HTTP metrics, which run after the response) */
  readonly noteError?: (request: Request, response: Response) => void;
  /** another dialect's error body for this request (Anthropic's under /v1/messages, Ollama's under /api); null = the OpenAI body */
  readonly dialectResponse?: (request: Request, error: ApiError) => Response | null;
}

export function toApiError(code: string | number, error: unknown, log: (message: string, level?: LogLevel) => void, rawBody?: unknown, allowedMethods: readonly string[] = []): ApiError {
  if (error instanceof ApiError) return error;
  // a parse hook's own ApiError arrives wrapped in Elysia's ParseError
  if (error instanceof Error && error.cause instanceof ApiError) return error.cause;
  if (error instanceof ValidationError) return validationToApiError(error, rawBody);
  switch (code) {
    case "PARSE": return new ApiError("invalidBody", "Request body is not valid JSON");
    case "NOT_FOUND": return allowedMethods.length > 0 ? new ApiError("methodNotAllowed", "Method Not Allowed") : new ApiError("routeNotFound", "Not Found");
    case "INVALID_FILE_TYPE":
    case "INVALID_COOKIE_SIGNATURE": return new ApiError("invalidBody", "Bad Request");
  }
  // the operator sees one line; the stack only with VLLM_LOGGING_LEVEL=DEBUG
  log(`internal error: ${oneLineError(error)}`, "ERROR");
  if (error instanceof Error && error.stack !== undefined) log(error.stack, "DEBUG");
  return new ApiError("internal", "Internal server error");
}

/** The one error plugin: global scope, so routes of every plugin answer with the OpenAI error object. */
export function errorPlugin(log: (message: string, level?: LogLevel) => void, context: ErrorContext = { rawBodyOf: () => undefined, methodsOf: () => [] }) {
  return new Elysia({ name: "fennec-errors" })
    .error({ ApiError })
    .onError({ as: "global" }, ({ code, error, request }) => {
      const allowed = code === "NOT_FOUND" ? context.methodsOf(new URL(request.url).pathname) : [];
      const apiError = toApiError(code, error, log, context.rawBodyOf(request), allowed);
      const response = context.dialectResponse?.(request, apiError) ?? errorResponse(apiError);
      if (response.status === 405) response.headers.set("allow", allowed.join(", "));
      context.noteError?.(request, response);
      return response;
    });
}
