/**
 * Reading one value of the Options bag as the type its flag has (the parser checked kinds and ranges already).
 */
import { err, ok, type Result } from "../util/result.ts";
import type { FlagValue } from "./flags.ts";

export const stringOrNull = (v: FlagValue | undefined): string | null => (typeof v === "string" ? v : null);
export const intOrNull = (v: FlagValue | undefined): number | null => (typeof v === "number" ? v : null);
export const deviceOf = (v: FlagValue | undefined): "cpu" | "webgpu" => (v === "webgpu" ? "webgpu" : "cpu");

/** A JSON list of strings (vLLM's type=json.loads flags). */
export function jsonList(name: string, raw: FlagValue | undefined): Result<string[]> {
  let value: unknown;
  try { value = JSON.parse(String(raw)); } catch { value = null; }
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) return err(`--${name} must be a JSON list of strings, e.g. '["*"]' (got ${String(raw)})`);
  return ok(value as string[]);
}
