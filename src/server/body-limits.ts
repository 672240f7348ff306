/**
 * Limits on a JSON request body checked on its raw text before JSON.parse and validation (issue 12): size is the app's
 * --max body limit (server-options.ts, 413 while reading), nesting depth is checked here (400 naming the limit).
 * 128 levels hold any real request (a JSON schema in response_format or tools nests two levels per object level)
 * and keep the parser, the validator and every error path far from their stack limits.
 * @example checkBodyNesting(text); const value = JSON.parse(text);
 */
import { nestingProblem } from "../util/json-limits.ts";
import { ApiError } from "./errors.ts";

export const MAX_JSON_DEPTH = 128;

/** Throws the 400 for a body nested deeper than MAX_JSON_DEPTH. */
export function checkBodyNesting(text: string): void {
  const problem = nestingProblem(text, { maxDepth: MAX_JSON_DEPTH });
  if (problem !== null) throw new ApiError("invalidBody", `Request body is refused: its JSON ${problem}`);
}
