/**
 * `openai` (gpt-oss, the Harmony format; vLLM's openai_tool_parser.py): a tool call is a message addressed to a
 * function, on the commentary channel, its body the arguments' JSON, closed by <|call|>:
 *   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>
 * (the recipient may also stand before the channel: `<|start|>assistant to=functions.get_weather<|channel|>...`; the
 * first message of a reply has no <|start|>: the generation prompt wrote it). Every other message's body is content
 * (the openai_gptoss reasoning parser, run first, has already taken the analysis channel as reasoning and leaves the
 * final channel's text and the addressed messages, whole, in the content); text outside any message stays content.
 * vLLM reads the same messages through openai_harmony on token ids; here on the text, so the markers are kept.
 */
import { contentOnly, partialTagLength, scanJsonValue, type ParsedCall, type ToolParse, type ToolParser } from "./tool-parser.ts";

const START = "<|start|>";
const CHANNEL = "<|channel|>";
const MESSAGE = "<|message|>";
const ENDS = ["<|call|>", "<|end|>", "<|return|>"];
const MARKERS = [START, CHANNEL, MESSAGE, ...ENDS];
/** the recipient of a message addressed to a function, in its header */
const RECIPIENT = /to=functions\.([^\s<]+)/;

/** Where a message header that has not reached <|message|> yet begins in text[from..] (-1: none), held back while streaming. */
function pendingHeader(text: string, from: number): number {
  const starts = [START, CHANNEL, "to="].map((m) => text.indexOf(m, from)).filter((i) => i >= 0);
  if (starts.length > 0) return Math.min(...starts);
  const partial = Math.max(...MARKERS.map((m) => partialTagLength(text, m)), partialTagLength(text, "to="));
  return partial > 0 ? text.length - partial : -1;
}

function isJsonObject(json: string): boolean {
  try {
    const value = JSON.parse(json) as unknown;
    return value !== null && typeof value === "object" && !Array.isArray(value);
  } catch {
    return false;
  }
}

function parse(text: string, final: boolean): ToolParse {
  let content = "";
  const calls: ParsedCall[] = [];
  let at = 0;
  while (at < text.length) {
    const message = text.indexOf(MESSAGE, at);
    if (message < 0) {
      const held = final ? -1 : pendingHeader(text, at);
      content += text.slice(at, held < 0 ? text.length : held);
      break;
    }
    // the header: from the last <|start|> before its <|message|>, else from where the previous message ended
    const start = text.lastIndexOf(START, message);
    const headerStart = start >= at ? start : at;
    content += text.slice(at, headerStart);
    const header = text.slice(headerStart, message);
    const bodyStart = message + MESSAGE.length;
    let bodyEnd = -1;
    let endLength = 0;
    for (const end of ENDS) {
      const i = text.indexOf(end, bodyStart);
      if (i >= 0 && (bodyEnd < 0 || i < bodyEnd)) { bodyEnd = i; endLength = end.length; }
    }
    const open = bodyEnd < 0;
    let body = open ? text.slice(bodyStart) : text.slice(bodyStart, bodyEnd);
    if (open && !final) body = body.slice(0, body.length - Math.max(...ENDS.map((e) => partialTagLength(body, e))));
    const recipient = RECIPIENT.exec(header)?.[1];
    if (recipient === undefined) content += body;
    else {
      const lead = body.length - body.trimStart().length;
      const value = scanJsonValue(body, 0);
      if (!value.valid || (body.slice(lead) !== "" && body[lead] !== "{")) return final ? contentOnly(text) : { content, calls };
      if (final || !open) {
        // a finished call: one JSON object and nothing after it
        const args = body.slice(lead, value.end);
        if (!value.complete || body.slice(value.end).trim() !== "" || !isJsonObject(args)) return final ? contentOnly(text) : { content, calls };
        calls.push({ name: recipient, arguments: args });
      } else {
        calls.push({ name: recipient, arguments: body.slice(lead) });
      }
    }
    if (open) break;
    at = bodyEnd + endLength;
  }
  return final && calls.length === 0 ? contentOnly(text) : { content, calls };
}

export const openaiToolParser: ToolParser = { name: "openai", parse, keepSpecialTokens: true };
