/**
 * `mistral`: `[TOOL_CALLS]` then either a JSON list `[{"name": ..., "arguments": {...}}, ...]` (tokenizers before v11,
 * e.g. Mistral Nemo's template) or, from v11, `name[ARGS]{...}` per call, each after its own `[TOOL_CALLS]`. Content is
 * the text before the first `[TOOL_CALLS]`; call ids are 9 alphanumerics (vLLM's mistral_tool_parser.py).
 */
import { contentOnly, jsonObjectCall, partialTagLength, scanJsonValue, type ParsedCall, type ToolParse, type ToolParser } from "./tool-parser.ts";

const BOT = "[TOOL_CALLS]";
const ARGS = "[ARGS]";
const ALPHANUMERIC = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

function listCalls(text: string, start: number, final: boolean): ParsedCall[] | null {
  const calls: ParsedCall[] = [];
  let at = start + 1; // after "["
  for (;;) {
    while (at < text.length && /\s/.test(text[at]!)) at++;
    if (at >= text.length) return final ? null : calls;
    if (text[at] === "]") return calls;
    if (text[at] === ",") { at++; continue; }
    const call = jsonObjectCall(text, at, final, ["arguments"]);
    if (call === null) return final ? null : calls;
    calls.push(call.call);
    if (!call.closed) return calls;
    at = call.end;
  }
}

function v11Call(segment: string, final: boolean): ParsedCall | null {
  const args = segment.indexOf(ARGS);
  if (args < 0) return final ? null : { name: null, arguments: "" };
  const name = segment.slice(0, args).trim();
  const text = segment.slice(args + ARGS.length);
  const value = scanJsonValue(text, 0);
  if (!value.valid || (final && (!value.complete || text.slice(value.end).trim() !== ""))) return null;
  const raw = text.slice(text.length - text.trimStart().length, value.end);
  if (value.complete) {
    const parsed = JSON.parse(raw) as unknown;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return null;
  } else if (!raw.startsWith("{") && raw !== "") return null;
  return { name, arguments: raw };
}

function parse(text: string, final: boolean): ToolParse {
  const first = text.indexOf(BOT);
  if (first < 0) return final ? contentOnly(text) : contentOnly(text.slice(0, text.length - partialTagLength(text, BOT)));
  const content = text.slice(0, first);
  const after = text.slice(first + BOT.length);
  const lead = after.trimStart();
  if (lead === "") return final ? contentOnly(text) : { content, calls: [] };
  let calls: ParsedCall[] | null;
  if (lead.startsWith("[")) calls = listCalls(after, after.length - lead.length, final);
  else {
    calls = [];
    // a second call's tag may be half written at the end
    const whole = final ? after : after.slice(0, after.length - partialTagLength(after, BOT));
    for (const segment of whole.split(BOT)) {
      const call = v11Call(segment, final);
      if (call === null) { calls = null; break; }
      calls.push(call);
    }
  }
  if (calls === null) return final ? contentOnly(text) : { content, calls: [] };
  if (final && calls.length === 0) return contentOnly(text);
  return { content, calls };
}

/** Mistral's tool-call ids: 9 random alphanumerics (its templates refuse any other shape). */
function mistralCallId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(9));
  return [...bytes].map((b) => ALPHANUMERIC[b % ALPHANUMERIC.length]).join("");
}

export const mistralToolParser: ToolParser = { name: "mistral", parse, keepSpecialTokens: true, newCallId: mistralCallId };
