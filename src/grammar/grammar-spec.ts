/**
 * One structured-output constraint as both threads see it (vLLM StructuredOutputsParams after its one-kind check),
 * and how it becomes an xgrammar grammar (vllm/v1/structured_output/backend_xgrammar.py compile_grammar). Used by the
 * main thread's checker (grammar-checker.ts: a 400 before any engine work) and by the engine's grammar thread
 * (grammar-worker.ts: the compiled grammar and its matchers), so both build exactly the same grammar.
 */
import type { CompiledGrammar, Grammar, GrammarCompiler, Testings } from "@mlc-ai/web-xgrammar";
import { withNumberRanges } from "./schema-ranges.ts";

export type GrammarSpec = GrammarConstraint & ReasoningGate;

/**
 * vLLM's reasoning gate (vllm/v1/structured_output/__init__.py StructuredOutputManager.should_advance and
 * should_fill_bitmask, via the reasoner's is_reasoning_end): the engine neither masks nor advances the matcher until
 * a generated token is one of these ids; from the token after it the grammar holds. Absent or null = from the first
 * token (no reasoning parser, a parser whose end is not one special token, or a prompt that already ends reasoning).
 * Not part of the grammar itself: grammarKey leaves it out.
 */
export interface ReasoningGate {
  readonly reasoningEndTokenIds?: readonly number[] | null;
}

type GrammarConstraint =
  /** a JSON schema (as JSON text); anyWhitespace false = compact JSON on one line (disable_any_whitespace) */
  | { readonly kind: "json"; readonly schema: string; readonly anyWhitespace: boolean }
  /** any JSON object: xgrammar compiles the schema {"type": "object"} (vLLM json_object) */
  | { readonly kind: "json_object"; readonly anyWhitespace: boolean }
  /** the web build has no regex compiler of its own: a structural tag with a regex format */
  | { readonly kind: "regex"; readonly pattern: string }
  | { readonly kind: "choice"; readonly choices: readonly string[] }
  /** EBNF / GBNF as xgrammar reads it, root rule "root" */
  | { readonly kind: "grammar"; readonly ebnf: string }
  /** a structural tag as JSON text: {"type": "structural_tag", "format": ...} or the legacy {structures, triggers} */
  | { readonly kind: "structural_tag"; readonly tag: string };

export type GrammarKind = GrammarSpec["kind"];

/** vLLM's one-line failure texts per kind (backend_xgrammar.py validate_xgrammar_grammar); the detail follows. */
export const GRAMMAR_ERROR_PREFIX: Readonly<Record<GrammarKind, string>> = {
  json: "Failed to transform json schema into a grammar: ",
  json_object: "Failed to transform json schema into a grammar: ",
  regex: "Failed to transform regex into a grammar: ",
  choice: "Failed to transform choices into a grammar: ",
  grammar: "Invalid grammar specification. ",
  structural_tag: "Invalid structural tag specification. ",
};

/** Cache key: two specs with the same key compile to the same grammar. */
export function grammarKey(spec: GrammarSpec): string {
  const { reasoningEndTokenIds: _gate, ...grammar } = spec;
  return JSON.stringify(grammar);
}

/** vLLM choice_as_grammar: root ::= "a" | "b", with `"` and `\` escaped. */
export function choiceEbnf(choices: readonly string[]): string {
  const escape = (s: string): string => s.replaceAll("\\", "\\\\").replaceAll('"', '\\"');
  return `root ::= ${choices.map((c) => `"${escape(c)}"`).join(" | ")}`;
}

const JSON_OBJECT_SCHEMA = '{"type": "object"}';

interface LegacyStructure {
  readonly begin: string;
  readonly schema: unknown;
  readonly end: string;
}

/**
 * The structural tag JSON text xgrammar takes: the legacy {structures: [{begin, schema, end}], triggers} form is
 * rewritten as triggered tags of JSON-schema content, which is what xgrammar's own legacy path builds.
 */
export function structuralTagJson(tag: string): string {
  const parsed: unknown = JSON.parse(tag);
  if (typeof parsed === "object" && parsed !== null && "structures" in parsed) {
    const legacy = parsed as { structures: readonly LegacyStructure[]; triggers: readonly string[] };
    if (!Array.isArray(legacy.structures) || !Array.isArray(legacy.triggers)) throw new Error("structures and triggers must be lists");
    return JSON.stringify({
      type: "structural_tag",
      format: {
        type: "triggered_tags", triggers: legacy.triggers,
        tags: legacy.structures.map((s) => ({ type: "tag", begin: s.begin, content: { type: "json_schema", json_schema: s.schema }, end: s.end })),
      },
    });
  }
  return tag;
}

/** The xgrammar library's surface this file needs (the module itself is imported by the thread that owns it). */
export interface XGrammarModule {
  readonly Grammar: typeof Grammar;
  readonly Testings: typeof Testings;
}

/** xgrammar 0.1.27's character class for strings with minLength / maxLength: it lets control characters through */
const LENGTH_STRING_CHAR = /\[\^\\?"\\\\\\r\\n\]/g;
/** JSON forbids raw U+0000..U+001F inside strings (RFC 8259 §7), as xgrammar's own unbounded string rule does */
const JSON_STRING_CHAR = String.raw`[^\0-\x1f"\\]`;

/**
 * The JSON schema's grammar as EBNF, with the two fixes fennec makes to xgrammar's output: number ranges are exact
 * rules of fennec's own (schema-ranges.ts; xgrammar's let 126 under maximum 120), and length-bounded strings no
 * longer admit raw control characters (xgrammar emits `[^"\\\r\n]` there, so a model could write invalid JSON).
 * Everything else is xgrammar's converter, untouched.
 */
export async function jsonSchemaEbnf(xg: XGrammarModule, schema: string, anyWhitespace: boolean): Promise<string> {
  const ebnf = await withNumberRanges(schema, (s) => xg.Testings._jsonSchemaToEBNF(s, ...jsonArgs(anyWhitespace)));
  return ebnf.replace(LENGTH_STRING_CHAR, JSON_STRING_CHAR);
}

/**
 * JSON schema options as vLLM passes them: any_whitespace, else no indent (one line, xgrammar's default separators
 * ", " and ": " as Python's json.dumps).
 */
function jsonArgs(anyWhitespace: boolean): [boolean, number] {
  return anyWhitespace ? [true, 2] : [false, -1];
}

/** The uncompiled grammar (no tokenizer needed): what the main thread's checker builds. */
export async function buildGrammar(xg: XGrammarModule, spec: GrammarSpec): Promise<Grammar> {
  switch (spec.kind) {
    case "json": return xg.Grammar.fromEBNF(await jsonSchemaEbnf(xg, spec.schema, spec.anyWhitespace));
    case "json_object": return xg.Grammar.fromEBNF(await jsonSchemaEbnf(xg, JSON_OBJECT_SCHEMA, spec.anyWhitespace));
    case "regex": return xg.Grammar.fromStructuralTag({ type: "structural_tag", format: { type: "regex", pattern: spec.pattern } });
    case "choice": return xg.Grammar.fromEBNF(choiceEbnf(spec.choices));
    case "grammar": return xg.Grammar.fromEBNF(spec.ebnf);
    case "structural_tag": return xg.Grammar.fromStructuralTag(structuralTagJson(spec.tag));
  }
}

/** The compiled grammar for one tokenizer (the engine's grammar thread). */
export async function compileGrammar(xg: XGrammarModule, compiler: GrammarCompiler, spec: GrammarSpec): Promise<CompiledGrammar> {
  switch (spec.kind) {
    case "json": return compiler.compileGrammar(await jsonSchemaEbnf(xg, spec.schema, spec.anyWhitespace));
    case "json_object": return compiler.compileGrammar(await jsonSchemaEbnf(xg, JSON_OBJECT_SCHEMA, spec.anyWhitespace));
    case "regex": return compiler.compileStructuralTag({ type: "structural_tag", format: { type: "regex", pattern: spec.pattern } });
    case "choice": return compiler.compileGrammar(choiceEbnf(spec.choices));
    case "grammar": return compiler.compileGrammar(spec.ebnf);
    case "structural_tag": return compiler.compileStructuralTag(structuralTagJson(spec.tag));
  }
}

/**
 * xgrammar's C++ checks print `[FATAL] /path/file.cc:123: Check failed: (x) is false: message` and abort the WASM
 * call; this keeps the message.
 * @example cleanXGrammarError("[FATAL] /a/b.cc:552: EBNF parser error at line 1, column 10: Rule \"foo\" is not defined\nAborted()")
 *   // 'EBNF parser error at line 1, column 10: Rule "foo" is not defined'
 */
export function cleanXGrammarError(text: string): string {
  const lines = text.split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("Aborted("));
  const fatal = lines.find((l) => l.startsWith("[FATAL]")) ?? lines[0] ?? "";
  return fatal.replace(/^\[FATAL\]\s*\S+:\d+:\s*/, "").replace(/^Check failed: \(.*?\) is false:\s*/, "").trim();
}
