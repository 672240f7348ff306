/**
 * `qwen3_coder` / `qwen3_xml` (Qwen3-Coder, Qwen3.5, Nemotron 3): XML-ish calls
 *   <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
 * Values are text; each is converted by the tool's JSON-schema type of that parameter (string stays text, numbers,
 * booleans, objects and arrays are parsed, "null" is null). Content is the text before the first call
 * (vLLM's qwen3coder_tool_parser.py; both names share one parser there too).
 */
import { contentOnly, partialTagLength, pythonJsonDumps, type ParsedCall, type ToolParse, type ToolParser } from "./tool-parser.ts";
import { parameterType, type ToolDefinition } from "./tool-definition.ts";

const CALL_START = "<tool_call>";
const CALL_END = "</tool_call>";
const FUNCTION_START = "<function=";
const FUNCTION_END = "</function>";
const PARAMETER_START = "<parameter=";
const PARAMETER_END = "</parameter>";

/** vLLM's _convert_param_value: by the schema type; text that does not convert stays text. */
function convertValue(raw: string, type: string | null): unknown {
  if (raw.toLowerCase() === "null") return null;
  switch (type) {
    case null:
    case "string":
      return raw;
    case "integer": {
      const n = Number(raw.trim());
      return Number.isInteger(n) ? n : raw;
    }
    case "number": {
      const n = Number(raw.trim());
      return raw.trim() !== "" && Number.isFinite(n) ? n : raw;
    }
    case "boolean":
      return raw.trim().toLowerCase() === "true" ? true : raw.trim().toLowerCase() === "false" ? false : raw;
    default:
      try {
        return JSON.parse(raw);
      } catch {
        return raw;
      }
  }
}

/** One parameter's value text without the newline the format puts on each side of it. */
const valueText = (raw: string) => raw.replace(/^\n/, "").replace(/\n$/, "");

function functionCall(body: string, final: boolean, tools: readonly ToolDefinition[]): ParsedCall | null {
  const at = body.indexOf(FUNCTION_START);
  if (at < 0) return body.trim() === "" || FUNCTION_START.startsWith(body.trim()) ? (final ? null : { name: null, arguments: "" }) : null;
  const nameEnd = body.indexOf(">", at);
  if (nameEnd < 0) return final ? null : { name: null, arguments: "" };
  const name = body.slice(at + FUNCTION_START.length, nameEnd).trim();
  const closeAt = body.indexOf(FUNCTION_END, nameEnd);
  const inner = closeAt < 0 ? body.slice(nameEnd + 1) : body.slice(nameEnd + 1, closeAt);
  const closed = closeAt >= 0 || final;
  const pairs: string[] = [];
  let p = inner.indexOf(PARAMETER_START);
  while (p >= 0) {
    const keyEnd = inner.indexOf(">", p);
    if (keyEnd < 0) break;
    const key = inner.slice(p + PARAMETER_START.length, keyEnd).trim();
    const ends = [inner.indexOf(PARAMETER_END, keyEnd), inner.indexOf(PARAMETER_START, keyEnd)].filter((i) => i >= 0);
    const end = ends.length > 0 ? Math.min(...ends) : -1;
    if (end < 0 && !closed) break; // the value may still grow
    const raw = end < 0 ? inner.slice(keyEnd + 1) : inner.slice(keyEnd + 1, end);
    pairs.push(`${JSON.stringify(key)}: ${pythonJsonDumps(convertValue(valueText(raw), parameterType(tools, name, key)))}`);
    p = end < 0 ? -1 : inner.indexOf(PARAMETER_START, end);
  }
  return { name, arguments: `{${pairs.join(", ")}${closed ? "}" : ""}` };
}

function parse(text: string, final: boolean, tools: readonly ToolDefinition[]): ToolParse {
  let first = text.indexOf(CALL_START);
  // the format's models sometimes leave out <tool_call>: a bare <function= starts a call too
  const bare = text.indexOf(FUNCTION_START);
  if (first < 0 || (bare >= 0 && bare < first)) first = bare;
  if (first < 0) {
    if (final) return contentOnly(text);
    const hold = Math.max(partialTagLength(text, CALL_START), partialTagLength(text, FUNCTION_START));
    return contentOnly(text.slice(0, text.length - hold));
  }
  const calls: ParsedCall[] = [];
  let at = first;
  while (at >= 0) {
    const bodyStart = text.startsWith(CALL_START, at) ? at + CALL_START.length : at;
    const close = text.indexOf(CALL_END, bodyStart);
    const body = close < 0 ? text.slice(bodyStart) : text.slice(bodyStart, close);
    const call = functionCall(body, final || close >= 0, tools);
    if (call === null) return final ? contentOnly(text) : { content: text.slice(0, first), calls };
    calls.push(call);
    if (close < 0) break;
    at = text.indexOf(CALL_START, close + CALL_END.length);
  }
  return { content: text.slice(0, first), calls };
}

export const qwen3CoderToolParser: ToolParser = { name: "qwen3_coder", parse };
export const qwen3XmlToolParser: ToolParser = { name: "qwen3_xml", parse };
