/**
 * `hermes` (Hermes 2/3, Qwen2.5, Qwen3): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, repeatable; the
 * last one may be left unclosed. Content is the text before the first call (vLLM's hermes_tool_parser.py).
 */
import { contentOnly, jsonObjectCall, partialTagLength, type ParsedCall, type ToolParse, type ToolParser } from "./tool-parser.ts";

const START = "<tool_call>";
const END = "</tool_call>";

function parse(text: string, final: boolean): ToolParse {
  const first = text.indexOf(START);
  if (first < 0) return final ? contentOnly(text) : contentOnly(text.slice(0, text.length - partialTagLength(text, START)));
  const calls: ParsedCall[] = [];
  let at = first;
  while (at >= 0) {
    const bodyStart = at + START.length;
    const close = text.indexOf(END, bodyStart);
    const body = close < 0 ? text.slice(bodyStart) : text.slice(bodyStart, close);
    const callFinal = final || close >= 0;
    const call = jsonObjectCall(body, 0, callFinal, ["arguments"]);
    if (call === null || (callFinal && body.slice(call.end).trim() !== "")) {
      // malformed: the final answer is all content; a stream sends nothing more for it
      return final ? contentOnly(text) : { content: text.slice(0, first), calls };
    }
    calls.push(call.call);
    if (close < 0) break;
    at = text.indexOf(START, close + END.length);
  }
  return { content: text.slice(0, first), calls };
}

export const hermesToolParser: ToolParser = { name: "hermes", parse, keepSpecialTokens: true };
