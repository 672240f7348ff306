/**
 * `llama3_json` (Llama 3.1/3.2/3.3 JSON tool calls): an optional `<|python_tag|>`, then one or more JSON objects
 * `{"name": ..., "arguments"|"parameters": {...}}` separated by `;`. Only text that starts that way is parsed; a parsed
 * call leaves no content (vLLM's llama_tool_parser.py).
 */
import { contentOnly, jsonObjectCall, type ParsedCall, type ToolParse, type ToolParser } from "./tool-parser.ts";

const PYTHON_TAG = "<|python_tag|>";
const ARGUMENT_KEYS = ["arguments", "parameters"];

function parse(text: string, final: boolean): ToolParse {
  const trimmed = text.trimStart();
  let start: number;
  if (trimmed.startsWith(PYTHON_TAG)) start = text.indexOf(PYTHON_TAG) + PYTHON_TAG.length;
  else if (trimmed.startsWith("{")) start = text.length - trimmed.length;
  else if (!final && (trimmed === "" || PYTHON_TAG.startsWith(trimmed))) return contentOnly("");
  else return contentOnly(text);
  const calls: ParsedCall[] = [];
  let at = start;
  for (;;) {
    const call = jsonObjectCall(text, at, final, ARGUMENT_KEYS);
    if (call === null) return final ? contentOnly(text) : { content: "", calls };
    calls.push(call.call);
    if (!call.closed) break;
    const rest = /^\s*;?\s*/.exec(text.slice(call.end))![0];
    at = call.end + rest.length;
    if (at >= text.length || text[at] !== "{") break;
  }
  if (final && calls.length === 0) return contentOnly(text);
  return { content: "", calls };
}

export const llama3JsonToolParser: ToolParser = { name: "llama3_json", parse };
