/**
 * tool_choice "required" and a named function, as vLLM does them (tool parser adjust_request +
 * serving_chat's forced branches): the output is constrained by a JSON schema over the tools' parameter schemas, so
 * it always parses;
 *   named: the model writes just the arguments object of that function;
 *   required: a JSON array of `{"name": ..., "parameters": {...}}`, at least one.
 * The parsers below read those outputs with the same parse(text, final) contract as the model-format parsers, so
 * streaming and non-streaming share the differ.
 */
import { contentOnly, jsonObjectCall, type ParsedCall, type ToolParse, type ToolParser } from "./tool-parser.ts";
import type { ToolDefinition } from "./tool-definition.ts";

const EMPTY_OBJECT_SCHEMA = { type: "object", properties: {} };

/** vLLM's get_json_schema_from_tools: `$defs` of every tool hoisted to the top; conflicting ones are refused. */
export function toolChoiceSchema(tools: readonly ToolDefinition[], choice: "required" | { readonly name: string }): { schema: Record<string, unknown> } | { error: string } {
  if (choice !== "required") {
    const tool = tools.find((t) => t.function.name === choice.name)!;
    return { schema: (tool.function.parameters ?? EMPTY_OBJECT_SCHEMA) as Record<string, unknown> };
  }
  const defs: Record<string, unknown> = {};
  const anyOf = [];
  for (const tool of tools) {
    const { $defs, ...params } = (tool.function.parameters ?? EMPTY_OBJECT_SCHEMA) as Record<string, unknown>;
    for (const [key, value] of Object.entries(($defs ?? {}) as Record<string, unknown>)) {
      if (key in defs && JSON.stringify(defs[key]) !== JSON.stringify(value)) return { error: `Tool definition '${key}' has multiple schemas, which is not supported.` };
      defs[key] = value;
    }
    anyOf.push({ properties: { name: { type: "string", enum: [tool.function.name] }, parameters: params }, required: ["name", "parameters"] });
  }
  const schema: Record<string, unknown> = { type: "array", minItems: 1, items: { type: "object", anyOf } };
  if (Object.keys(defs).length > 0) schema["$defs"] = defs;
  return { schema };
}

/** The named function's arguments are the whole output; the name is known before the first token. */
export function namedCallParser(name: string): ToolParser {
  return {
    name: `named:${name}`,
    parse(text: string, final: boolean): ToolParse {
      const args = text.trim();
      // vLLM: an empty (or blank) output makes no call
      if (final && args === "") return contentOnly("");
      return { content: "", calls: [{ name, arguments: final ? args : text.trimStart() }] };
    },
  };
}

/** The required form: a JSON array of {"name", "parameters"} objects. */
export const requiredCallsParser: ToolParser = {
  name: "required",
  parse(text: string, final: boolean): ToolParse {
    const start = text.search(/\S/);
    if (start < 0) return contentOnly(final ? text : "");
    if (text[start] !== "[") return final ? contentOnly(text) : contentOnly("");
    const calls: ParsedCall[] = [];
    let at = start + 1;
    for (;;) {
      while (at < text.length && /[\s,]/.test(text[at]!)) at++;
      if (at >= text.length) return final ? contentOnly(text) : { content: "", calls };
      if (text[at] === "]") return { content: "", calls };
      const call = jsonObjectCall(text, at, final, ["parameters"]);
      if (call === null) return final ? contentOnly(text) : { content: "", calls };
      calls.push(call.call);
      if (!call.closed) return final ? contentOnly(text) : { content: "", calls };
      at = call.end;
    }
  },
};
