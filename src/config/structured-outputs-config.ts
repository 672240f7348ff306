/**
 * `--structured-outputs-config` (vllm/config/structured_outputs.py StructuredOutputsConfig): the server-wide structured
 * output settings, read by serve and run-batch and applied per request by server/openai/structured-outputs.ts.
 */
import { err, ok, type Result } from "../util/result.ts";

/** --structured-outputs-config (vllm/config/structured_outputs.py StructuredOutputsConfig), what fennec acts on. */
export interface StructuredOutputsSettings {
  /** compact JSON for every structured request */
  readonly disableAnyWhitespace: boolean;
}

/** vLLM's backends: fennec runs xgrammar ("auto" chooses it first in vLLM too); the others are refused */
const STRUCTURED_BACKENDS = ["auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer"];

/**
 * --structured-outputs-config as vLLM's StructuredOutputsConfig validates it (unknown keys refused, its messages);
 * keys fennec cannot act on are refused rather than ignored.
 * @example structuredOutputsConfig('{"backend": "xgrammar", "disable_any_whitespace": true}') // ok({ disableAnyWhitespace: true })
 */
export function structuredOutputsConfig(raw: string | null): Result<StructuredOutputsSettings> {
  if (raw === null) return ok({ disableAnyWhitespace: false });
  let value: unknown;
  try { value = JSON.parse(raw); } catch (e) { return err(`--structured-outputs-config must be a JSON object: ${(e as Error).message}`); }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return err("--structured-outputs-config must be a JSON object");
  const c = value as Record<string, unknown>;
  const known = ["backend", "disable_any_whitespace", "disable_additional_properties", "reasoning_parser", "reasoning_parser_plugin", "enable_in_reasoning"];
  const unknown = Object.keys(c).filter((k) => !known.includes(k));
  if (unknown.length > 0) return err(`--structured-outputs-config: unknown key(s) ${unknown.join(", ")} (known: ${known.join(", ")})`);
  const backend = c.backend ?? "auto";
  if (typeof backend !== "string" || !STRUCTURED_BACKENDS.includes(backend)) return err(`--structured-outputs-config: backend must be one of ${STRUCTURED_BACKENDS.join(", ")} (got ${JSON.stringify(backend)})`);
  if (backend !== "auto" && backend !== "xgrammar") return err(`--structured-outputs-config: backend ${backend} is not available in fennec; use "xgrammar" (or "auto", which picks it)`);
  const disableAnyWhitespace = c.disable_any_whitespace ?? false;
  if (typeof disableAnyWhitespace !== "boolean") return err("--structured-outputs-config: disable_any_whitespace must be true or false");
  if (disableAnyWhitespace && backend !== "xgrammar") return err("--structured-outputs-config: disable_any_whitespace is only supported for xgrammar and guidance backends.");
  if (c.disable_additional_properties === true) return err("--structured-outputs-config: disable_additional_properties is only supported for the guidance backend.");
  for (const k of ["reasoning_parser", "reasoning_parser_plugin"]) {
    if (c[k] !== undefined && c[k] !== "") return err(`--structured-outputs-config: ${k} is set from --reasoning-parser in fennec; remove it here`);
  }
  if (c.enable_in_reasoning === true) return err("--structured-outputs-config: enable_in_reasoning is not supported by fennec (the grammar constrains the whole answer)");
  return ok({ disableAnyWhitespace });
}
