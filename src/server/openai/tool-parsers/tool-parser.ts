/**
 * Tool-call parsers: the model's text -> content + tool calls, as vLLM's tool parsers do
 * (vllm/entrypoints/openai/tool_parsers/*). Each parser is one pure function `parse(text, final, tools)` over the
 * text generated so far:
 *   - final = false (a stream in progress): `content` is the text that can no longer turn into a call (a possible
 *     partial start tag is held back), each call's `name` once complete, and `arguments` the part of the arguments'
 *     JSON text known so far. Both only ever grow as text is appended, so a stream is the difference between two
 *     parses (ToolCallStreamer) and its fragments concatenate to the final arguments, whatever the split.
 *   - final = true: the complete answer. A malformed call makes the whole text content, with no calls (vLLM returns
 *     it as content, never an error).
 */
import type { ToolDefinition } from "./tool-definition.ts";

export interface ParsedCall {
  /** null until the whole name has been generated */
  readonly name: string | null;
  /** JSON text of the arguments so far (final: complete) */
  readonly arguments: string;
}

export interface ToolParse {
  readonly content: string;
  readonly calls: readonly ParsedCall[];
}

export interface ToolParser {
  readonly name: string;
  parse(text: string, final: boolean, tools: readonly ToolDefinition[]): ToolParse;
  /** vLLM's adjust_request: parsers whose tags are special tokens need them kept in the text */
  readonly keepSpecialTokens?: boolean;
  /** the id of each call (vLLM: `chatcmpl-tool-<16 hex>`; Mistral: 9 alphanumerics) */
  newCallId?(): string;
}

/** A text with no call in it. */
export const contentOnly = (text: string): ToolParse => ({ content: text, calls: [] });

/** vLLM's make_tool_call_id: `chatcmpl-tool-` and 16 lowercase hex digits (64 random bits). */
export function randomToolCallId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return `chatcmpl-tool-${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/** Length of the longest suffix of `text` that is a proper prefix of `tag` (text to hold back in a stream). */
export function partialTagLength(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) if (text.endsWith(tag.slice(0, n))) return n;
  return 0;
}

/** Python's json.dumps(value, ensure_ascii=False): ", " and ": " separators (vLLM serializes arguments with it). */
export function pythonJsonDumps(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(", ")}]`;
  if (typeof value === "object") return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pythonJsonDumps(v)}`).join(", ")}}`;
  return JSON.stringify(value);
}

/**
 * Scans one JSON value starting at `start` (after whitespace). Returns where it ends and whether it is complete;
 * `valid: false` when the text cannot be JSON there. String and bracket aware, no parsing.
 */
export function scanJsonValue(text: string, start: number): { end: number; complete: boolean; valid: boolean } {
  let i = start;
  while (i < text.length && /\s/.test(text[i]!)) i++;
  if (i >= text.length) return { end: i, complete: false, valid: true };
  const first = text[i]!;
  if (first === "{" || first === "[" || first === '"') {
    let depth = 0;
    let inString = false;
    for (; i < text.length; i++) {
      const c = text[i]!;
      if (inString) {
        if (c === "\\") i++;
        else if (c === '"') {
          inString = false;
          if (depth === 0) return { end: i + 1, complete: true, valid: true };
        }
      } else if (c === '"') inString = true;
      else if (c === "{" || c === "[") depth++;
      else if (c === "}" || c === "]") {
        depth--;
        if (depth === 0) return { end: i + 1, complete: true, valid: true };
        if (depth < 0) return { end: i, complete: false, valid: false };
      }
    }
    return { end: text.length, complete: false, valid: true };
  }
  const m = /^(?:-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i));
  if (m === null) {
    // a literal still being written ("tr", "-", "1.")
    const rest = text.slice(i);
    const partial = /^-?\d*\.?\d*([eE][+-]?\d*)?$/.test(rest) || ["true", "false", "null"].some((w) => w.startsWith(rest));
    return { end: text.length, complete: false, valid: partial };
  }
  const end = i + m[0].length;
  // a number may go on ("12" then "3"): complete only once something follows it
  return { end, complete: end < text.length, valid: true };
}

/** The top-level members of a (possibly unfinished) JSON object at `start`: key -> value span. */
export interface ObjectMembers {
  readonly members: ReadonlyMap<string, { readonly start: number; readonly end: number; readonly complete: boolean }>;
  /** the closing brace has been seen */
  readonly closed: boolean;
  /** index after the closing brace */
  readonly end: number;
  readonly valid: boolean;
}

export function scanJsonObject(text: string, start: number): ObjectMembers {
  const members = new Map<string, { start: number; end: number; complete: boolean }>();
  let i = start;
  const ws = () => { while (i < text.length && /\s/.test(text[i]!)) i++; };
  ws();
  if (i >= text.length) return { members, closed: false, end: i, valid: true };
  if (text[i] !== "{") return { members, closed: false, end: i, valid: false };
  i++;
  for (;;) {
    ws();
    if (i >= text.length) return { members, closed: false, end: i, valid: true };
    if (text[i] === "}") return { members, closed: true, end: i + 1, valid: true };
    if (text[i] === ",") { i++; ws(); }
    if (i >= text.length) return { members, closed: false, end: i, valid: true };
    if (text[i] !== '"') return { members, closed: false, end: i, valid: false };
    const key = scanJsonValue(text, i);
    if (!key.complete) return { members, closed: false, end: text.length, valid: key.valid };
    const name = JSON.parse(text.slice(i, key.end)) as string;
    i = key.end;
    ws();
    if (i >= text.length) return { members, closed: false, end: i, valid: true };
    if (text[i] !== ":") return { members, closed: false, end: i, valid: false };
    i++;
    ws();
    const value = scanJsonValue(text, i);
    if (!value.valid) return { members, closed: false, end: i, valid: false };
    members.set(name, { start: i, end: value.end, complete: value.complete });
    if (!value.complete) return { members, closed: false, end: text.length, valid: true };
    i = value.end;
  }
}

/**
 * A call written as a JSON object `{"name": ..., "arguments"|"parameters": {...}}` (hermes, llama3_json, mistral).
 * Partial: the name once its string is complete, the arguments' raw text so far. Final: null when it is not a call.
 */
export function jsonObjectCall(text: string, start: number, final: boolean, argumentKeys: readonly string[]): { call: ParsedCall; end: number; closed: boolean } | null {
  const object = scanJsonObject(text, start);
  if (!object.valid) return null;
  const nameSpan = object.members.get("name");
  const name = nameSpan?.complete ? (JSON.parse(text.slice(nameSpan.start, nameSpan.end)) as unknown) : null;
  if (name !== null && typeof name !== "string") return null;
  const argsKey = argumentKeys.find((k) => object.members.has(k));
  const argsSpan = argsKey === undefined ? undefined : object.members.get(argsKey)!;
  if (final || object.closed) {
    if (!object.closed || typeof name !== "string") return null;
    let args: unknown = {};
    if (argsSpan !== undefined) {
      try {
        args = JSON.parse(text.slice(argsSpan.start, argsSpan.end));
      } catch {
        return null;
      }
      // some models write the arguments as a JSON string
      if (typeof args === "string") {
        try { args = JSON.parse(args); } catch { return null; }
      }
      if (args === null || typeof args !== "object" || Array.isArray(args)) return null;
    }
    const raw = argsSpan !== undefined && text[argsSpan.start] === "{" ? text.slice(argsSpan.start, argsSpan.end) : pythonJsonDumps(args);
    return { call: { name, arguments: raw }, end: object.end, closed: true };
  }
  // in progress: raw object text only (a string-valued `arguments` is rewritten at the end)
  const partialArgs = argsSpan !== undefined && text[argsSpan.start] === "{" ? text.slice(argsSpan.start, argsSpan.end) : "";
  return { call: { name: typeof name === "string" ? name : null, arguments: partialArgs }, end: object.end, closed: false };
}

/**
 * Turns successive parses of a growing text into OpenAI stream deltas: content, then per call a first delta with
 * index, id, type and name, then argument fragments. A parse that no longer extends what was sent (the text turned
 * out malformed at the end) sends nothing more for that part.
 */
export class ToolCallStreamer {
  private sentContent = "";
  private readonly sent: { id: string; name: string; args: string }[] = [];

  constructor(private readonly parser: ToolParser, private readonly tools: readonly ToolDefinition[], private readonly onlyFirstCall: boolean) {}

  /** number of calls whose name has been sent */
  get numCalls(): number {
    return this.sent.length;
  }

  push(text: string, final: boolean): StreamDelta[] {
    const parse = this.parser.parse(text, final, this.tools);
    const deltas: StreamDelta[] = [];
    if (parse.content.length > this.sentContent.length && parse.content.startsWith(this.sentContent)) {
      deltas.push({ content: parse.content.slice(this.sentContent.length) });
      this.sentContent = parse.content;
    }
    const calls = this.onlyFirstCall ? parse.calls.slice(0, 1) : parse.calls;
    calls.forEach((call, index) => {
      let sent = this.sent[index];
      if (sent === undefined) {
        // names go in order: a later call's name waits for the earlier ones
        if (call.name === null || index !== this.sent.length) return;
        sent = { id: this.parser.newCallId?.() ?? randomToolCallId(), name: call.name, args: "" };
        this.sent.push(sent);
        deltas.push({ tool_calls: [{ index, id: sent.id, type: "function", function: { name: call.name } }] });
      }
      if (call.arguments.length > sent.args.length && call.arguments.startsWith(sent.args)) {
        deltas.push({ tool_calls: [{ index, function: { arguments: call.arguments.slice(sent.args.length) } }] });
        sent.args = call.arguments;
      }
    });
    return deltas;
  }
}

/** One chat stream delta (vLLM's DeltaMessage without role). */
export interface StreamDelta {
  readonly content?: string;
  readonly reasoning?: string;
  readonly tool_calls?: readonly StreamToolCallDelta[];
}

export interface StreamToolCallDelta {
  readonly index: number;
  readonly id?: string;
  readonly type?: "function";
  readonly function: { readonly name?: string; readonly arguments?: string };
}
