/**
 * Limits on a JSON request body checked on its raw text before JSON.parse and validation: size is the app's
 * --max body limit (server-options.ts, 413 while reading), nesting depth is checked here (400 naming the limit).
 * 128 levels hold any real request (a JSON schema in response_format or tools nests two levels per object level)
 * and keep the parser, the validator and every error path far from their stack limits.
 * @example const problem = new NestingScanner({ maxDepth: MAX_JSON_DEPTH }).feed(text); if (problem) throw nestingError(problem);
 */
import { ApiError } from "./errors.ts";

export const MAX_JSON_DEPTH = 128;

/** The 400 for a body whose JSON nests too deep (`problem`: NestingScanner's words). */
export function nestingError(problem: string): ApiError {
  return new ApiError("invalidBody", `Request body is refused: its JSON ${problem}`);
}
