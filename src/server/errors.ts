/**
 * Every failure the HTTP layer returns, as the OpenAI error object `{"error":{"message","type","param","code"}}` with
 * the HTTP status equal to `code` (vLLM reference §5.5). Handlers throw `ApiError`; one `onError` (app.ts) turns
 * ApiError, Elysia's VALIDATION / PARSE / NOT_FOUND and anything unexpected into that body. Never a stack trace.
 */
import { Elysia, ValidationError } from "elysia";

/** OpenAI / vLLM error `type` per status: the table the whole server uses. */
export const ERROR_TYPES = {
  /** semantic validation (vLLM VLLMValidationError) */
  badRequest: { status: 400, type: "BadRequestError" },
  /** schema validation and unparsable bodies (vLLM reports pydantic errors with the HTTP phrase) */
  invalidBody: { status: 400, type: "Bad Request" },
  unauthorized: { status: 401, type: "AuthenticationError" },
  notFound: { status: 404, type: "NotFoundError" },
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
  const suffix = value === undefined ? "" : ` (parameter=${param}, value=${JSON.stringify(value)})`;
  return new ApiError("badRequest", `${message}${suffix}`, param);
}

export function errorResponse(error: ApiError): Response {
  return Response.json(error.toBody(), { status: error.status });
}

/** "/messages/0/content" -> "messages[0].content" */
function fieldName(path: string): string {
  return path.split("/").filter((p) => p !== "").map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`)).join("");
}

function describeValue(value: unknown): string {
  if (value === undefined) return "";
  const text = JSON.stringify(value) ?? String(value);
  return ` (got ${text.length > 60 ? `${text.slice(0, 57)}...` : text})`;
}

/** Elysia's TypeBox error list -> one readable line naming the field (never Elysia's raw JSON shape). */
export function validationToApiError(error: ValidationError): ApiError {
  const first = error.all[0];
  if (first === undefined || !("path" in first)) return new ApiError("invalidBody", "Invalid request body");
  const field = fieldName(first.path);
  if (field === "") return new ApiError("invalidBody", "Request body must be a JSON object");
  const what = first.message === "Expected required property" ? "is required"
    : first.message === "Expected union value" && first.summary ? first.summary.replace(/^Property '[^']*' /, "")
    : first.message.charAt(0).toLowerCase() + first.message.slice(1);
  const count = error.all.length;
  const prefix = count > 1 ? `${count} validation errors, first` : "1 validation error";
  return new ApiError("invalidBody", `${prefix}: '${field}' ${what}${describeValue(first.value)}`, field);
}

/** Anything thrown inside a handler -> the ApiError to send. Unknown errors become a plain 500. */
export function toApiError(code: string | number, error: unknown, log: (message: string) => void): ApiError {
  if (error instanceof ApiError) return error;
  // a parse hook's own ApiError arrives wrapped in Elysia's ParseError
  if (error instanceof Error && error.cause instanceof ApiError) return error.cause;
  if (error instanceof ValidationError) return validationToApiError(error);
  switch (code) {
    case "PARSE": return new ApiError("invalidBody", "Request body is not valid JSON");
    case "NOT_FOUND": return new ApiError("notFound", "Not Found");
    case "INVALID_FILE_TYPE":
    case "INVALID_COOKIE_SIGNATURE": return new ApiError("invalidBody", "Bad Request");
  }
  log(`internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  return new ApiError("internal", "Internal server error");
}

/** The one error plugin: global scope, so routes of every plugin answer with the OpenAI error object. */
export function errorPlugin(log: (message: string) => void) {
  return new Elysia({ name: "fennec-errors" })
    .error({ ApiError })
    .onError({ as: "global" }, ({ code, error }) => errorResponse(toApiError(code, error, log)));
}
