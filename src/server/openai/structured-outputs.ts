/**
 * The request's structured-output constraint, as vLLM reads it (vllm/entrypoints/openai/chat_completion/protocol.py
 * to_sampling_params, vllm/sampling_params.py StructuredOutputsParams.__post_init__, backend_xgrammar.py
 * validate_xgrammar_grammar): `response_format` (json_object / json_schema / structural_tag) overrides the matching
 * key of `structured_outputs` {json, regex, choice, grammar, json_object, structural_tag, disable_any_whitespace, ...};
 * exactly one kind may be set. The pre-0.12 `guided_*` fields, which vLLM now silently ignores, are honoured here as
 * aliases (older clients keep working; ignoring them is the one wrong answer). Every failure is a 400 naming the field
 * the client sent, before any engine work; the grammar itself is checked by xgrammar (grammar/grammar-checker.ts).
 */
import type { GrammarSpec } from "../../grammar/grammar-spec.ts";
import type { GrammarChecker } from "../../grammar/grammar-checker.ts";
import type { StructuredOutputsSettings } from "../../config/structured-outputs-config.ts";
import { ApiError } from "../errors.ts";

/** The wire fields this file reads (chat and completions share them). */
export interface StructuredOutputsBody {
  readonly response_format?: ResponseFormatBody | null;
  readonly structured_outputs?: StructuredOutputsParamsBody | null;
  readonly guided_json?: unknown;
  readonly guided_regex?: string | null;
  readonly guided_choice?: readonly string[] | null;
  readonly guided_grammar?: string | null;
  readonly guided_decoding_backend?: string | null;
  readonly guided_whitespace_pattern?: string | null;
  /** llama.cpp server's fields */
  readonly json_schema?: unknown;
  readonly grammar?: string | null;
}

export interface ResponseFormatBody {
  readonly type: string;
  readonly json_schema?: { readonly name?: string; readonly description?: string | null; readonly schema?: unknown; readonly strict?: boolean | null } | null;
  readonly format?: unknown;
  readonly structures?: unknown;
  readonly triggers?: unknown;
}

export interface StructuredOutputsParamsBody {
  readonly json?: unknown;
  readonly regex?: string | null;
  readonly choice?: readonly string[] | null;
  readonly grammar?: string | null;
  readonly json_object?: boolean | null;
  readonly structural_tag?: string | null;
  readonly disable_any_whitespace?: boolean | null;
  readonly disable_additional_properties?: boolean | null;
  readonly whitespace_pattern?: string | null;
  readonly _backend?: string | null;
}

export interface RequestGrammar {
  readonly spec: GrammarSpec;
  /** the field the constraint came from, for error messages */
  readonly param: string;
}

const KINDS = ["json", "regex", "choice", "grammar", "json_object", "structural_tag"] as const;
type Kind = (typeof KINDS)[number];

/** the one backend fennec has; vLLM's "auto" picks xgrammar first */
const BACKENDS = new Set(["xgrammar", "auto"]);

/** String formats xgrammar enforces (vLLM has_xgrammar_unsupported_json_features). */
const XGRAMMAR_STRING_FORMATS = new Set(["email", "date", "time", "date-time", "duration", "ipv4", "ipv6", "hostname", "uuid", "uri", "uri-reference", "uri-template", "json-pointer", "relative-json-pointer"]);

/**
 * vLLM's has_xgrammar_unsupported_json_features: schema keywords xgrammar would not enforce. fennec refuses them as
 * vLLM's xgrammar backend does, rather than produce output that ignores them.
 */
export function unsupportedJsonFeature(schema: unknown): string | null {
  if (Array.isArray(schema)) {
    for (const item of schema) {
      const found = unsupportedJsonFeature(item);
      if (found) return found;
    }
    return null;
  }
  if (typeof schema !== "object" || schema === null) return null;
  const s = schema as Record<string, unknown>;
  const types = Array.isArray(s.type) ? s.type : [s.type];
  if ((types.includes("integer") || types.includes("number")) && "multipleOf" in s) return "multipleOf";
  // number ranges are served: grammar/schema-ranges.ts builds exact rules for them (vLLM's auto backend: llguidance)
  if (types.includes("array")) for (const k of ["uniqueItems", "contains", "minContains", "maxContains"]) if (k in s) return k;
  if (types.includes("string") && typeof s.format === "string" && !XGRAMMAR_STRING_FORMATS.has(s.format)) return `format "${s.format}"`;
  if (types.includes("object")) for (const k of ["patternProperties", "propertyNames"]) if (k in s) return k;
  for (const value of Object.values(s)) {
    const found = unsupportedJsonFeature(value);
    if (found) return found;
  }
  return null;
}

const bad = (param: string, message: string): ApiError => new ApiError("badRequest", message, param);

/** The constraint keys one request sets, each with the field it came from. */
function gatherKeys(body: StructuredOutputsBody): Map<Kind, { value: unknown; param: string }> {
  const keys = new Map<Kind, { value: unknown; param: string }>();
  const so = body.structured_outputs;
  if (so) for (const kind of KINDS) if (so[kind] !== undefined && so[kind] !== null) keys.set(kind, { value: so[kind], param: `structured_outputs.${kind}` });
  const aliases: [Kind, unknown, string][] = [
    ["json", body.guided_json, "guided_json"], ["regex", body.guided_regex, "guided_regex"],
    ["choice", body.guided_choice, "guided_choice"], ["grammar", body.guided_grammar, "guided_grammar"],
    ["json", body.json_schema, "json_schema"], ["grammar", body.grammar, "grammar"],
  ];
  for (const [kind, value, param] of aliases) {
    if (value === undefined || value === null) continue;
    if (keys.has(kind)) throw bad(param, `${param} and structured_outputs.${kind} are both set; use structured_outputs.${kind} only.`);
    keys.set(kind, { value, param });
  }
  const format = body.response_format;
  if (format && format.type !== "text") {
    switch (format.type) {
      case "json_object":
        keys.set("json_object", { value: true, param: "response_format" });
        break;
      case "json_schema":
        if (!format.json_schema) throw bad("response_format", "When response_format type is 'json_schema', the 'json_schema' field must be provided.");
        if (format.json_schema.schema === undefined || format.json_schema.schema === null) {
          throw bad("response_format", "response_format.json_schema.schema must be provided: You must use one kind of structured outputs constraint but none are specified.");
        }
        keys.set("json", { value: format.json_schema.schema, param: "response_format" });
        break;
      case "structural_tag": {
        const { type: _type, ...tag } = format;
        if (tag.format === undefined && tag.structures === undefined) throw bad("response_format", "Invalid response_format structural_tag specification.");
        keys.set("structural_tag", { value: JSON.stringify(tag.format !== undefined ? { type: "structural_tag", format: tag.format } : tag), param: "response_format" });
        break;
      }
      default:
        throw bad("response_format", `response_format type must be one of "text", "json_object", "json_schema", "structural_tag", got ${JSON.stringify(format.type)}.`);
    }
  }
  return keys;
}

/**
 * The request's grammar (or null for free text), with every shape rule checked; the grammar itself is checked by
 * checkRequestGrammar. Throws ApiError (400) naming the field.
 */
export function requestGrammar(body: StructuredOutputsBody, server: StructuredOutputsSettings): RequestGrammar | null {
  const so = body.structured_outputs;
  for (const [param, backend] of [["guided_decoding_backend", body.guided_decoding_backend], ["structured_outputs._backend", so?._backend]] as const) {
    if (backend !== undefined && backend !== null && !BACKENDS.has(backend)) {
      throw bad(param, `Request-level structured output backend selection is not supported. The request specified '${backend}', but fennec was initialised with 'xgrammar'. This error can be resolved by removing '${param}' from the request.`);
    }
  }
  const whitespacePattern = so?.whitespace_pattern ?? body.guided_whitespace_pattern;
  if (whitespacePattern !== undefined && whitespacePattern !== null) {
    const param = so?.whitespace_pattern != null ? "structured_outputs.whitespace_pattern" : "guided_whitespace_pattern";
    throw bad(param, `${param} is not supported by the xgrammar backend (vLLM's outlines backend only); use structured_outputs.disable_any_whitespace for compact JSON.`);
  }
  const keys = gatherKeys(body);
  if (keys.size === 0) {
    if (so && (so.disable_any_whitespace != null || so.disable_additional_properties != null)) {
      throw bad("structured_outputs", "You must use one kind of structured outputs constraint but none are specified: set one of json, regex, choice, grammar, json_object, structural_tag.");
    }
    return null;
  }
  if (keys.size > 1) {
    const named = [...keys.values()].map((k) => k.param).join(", ");
    throw bad([...keys.values()][1]!.param, `You can only use one kind of structured outputs constraint but multiple are specified: ${named}.`);
  }
  const [kind, { value, param }] = [...keys.entries()][0]!;
  const anyWhitespace = !(so?.disable_any_whitespace ?? server.disableAnyWhitespace);
  switch (kind) {
    case "json": {
      if (value === "") throw bad(param, "structured_outputs.json cannot be an empty string");
      let schema: unknown = value;
      if (typeof value === "string") {
        try {
          schema = JSON.parse(value);
        } catch (e) {
          throw bad(param, `Invalid JSON grammar specification. ${(e as Error).message}`);
        }
      }
      if (typeof schema !== "object" && typeof schema !== "boolean") throw bad(param, "Invalid JSON grammar specification. A JSON schema is an object (or true / false).");
      const feature = unsupportedJsonFeature(schema);
      if (feature) throw bad(param, `The provided JSON schema contains features not supported by xgrammar: ${feature}.`);
      return { spec: { kind: "json", schema: JSON.stringify(schema), anyWhitespace }, param };
    }
    case "json_object":
      if (value !== true) throw bad(param, "structured_outputs.json_object must be True if set; omit structured_outputs to disable structured outputs");
      return { spec: { kind: "json_object", anyWhitespace }, param };
    case "regex":
      if (typeof value !== "string") throw bad(param, `${param} must be a string.`);
      if (value.includes("\u0000")) throw bad(param, "structured_outputs.regex must not contain a NUL character ('\\x00')");
      return { spec: { kind: "regex", pattern: value }, param };
    case "choice":
      if (!Array.isArray(value) || value.some((c) => typeof c !== "string")) throw bad(param, `${param} must be a list of strings.`);
      if (value.length === 0) throw bad(param, "Choice '[]' cannot be an empty list");
      return { spec: { kind: "choice", choices: value as string[] }, param };
    case "grammar":
      if (typeof value !== "string") throw bad(param, `${param} must be a string.`);
      if (value === "") throw bad(param, "structured_outputs.grammar cannot be an empty string");
      return { spec: { kind: "grammar", ebnf: value }, param };
    case "structural_tag": {
      if (typeof value !== "string") throw bad(param, `${param} must be a JSON string.`);
      try {
        JSON.parse(value);
      } catch (e) {
        throw bad(param, `Invalid structural tag specification. ${(e as Error).message}`);
      }
      return { spec: { kind: "structural_tag", tag: value }, param };
    }
  }
}

/** xgrammar's verdict on the grammar, as a 400 naming the field (vLLM validate_xgrammar_grammar). */
export async function checkRequestGrammar(checker: GrammarChecker, grammar: RequestGrammar): Promise<void> {
  const error = await checker.check(grammar.spec);
  if (error === null) return;
  // a C++ exception surfaces as a bare pointer value, not a text
  const message = /\. \d+$/.test(error) ? error.replace(/ \d+$/, " xgrammar refused it without a reason.") : error;
  throw bad(grammar.param, message);
}
