/**
 * `pythonic` (Llama 3.2 / 4 small models): the whole output is a Python list of calls with keyword arguments of
 * literal values, `[get_weather(city="Paris"), get_time()]`; anything else is content (vLLM's pythonic_tool_parser.py,
 * which uses Python's ast; here a small literal parser: strings, numbers, True/False/None, lists, tuples, dicts).
 * Llama 4's `<|python_start|>` / `<|python_end|>` wrappers are dropped.
 */
import { contentOnly, pythonJsonDumps, type ParsedCall, type ToolParse, type ToolParser } from "./tool-parser.ts";

class Incomplete extends Error {}
class Malformed extends Error {}

const ESCAPES: Readonly<Record<string, string>> = { n: "\n", t: "\t", r: "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0", b: "\b", f: "\f" };

class PythonReader {
  i = 0;
  constructor(readonly text: string) {}

  ws(): void {
    while (this.i < this.text.length && /\s/.test(this.text[this.i]!)) this.i++;
  }

  peek(): string {
    this.ws();
    if (this.i >= this.text.length) throw new Incomplete();
    return this.text[this.i]!;
  }

  expect(c: string): void {
    if (this.peek() !== c) throw new Malformed();
    this.i++;
  }

  identifier(): string {
    this.ws();
    const m = /^[A-Za-z_][A-Za-z0-9_.]*/.exec(this.text.slice(this.i));
    if (m === null) throw this.i >= this.text.length ? new Incomplete() : new Malformed();
    // an identifier at the very end may still grow
    if (this.i + m[0].length >= this.text.length) throw new Incomplete();
    this.i += m[0].length;
    return m[0];
  }

  value(): unknown {
    const c = this.peek();
    if (c === '"' || c === "'") return this.string(c);
    if (c === "[" || c === "(") return this.sequence(c === "[" ? "]" : ")");
    if (c === "{") return this.dict();
    const rest = this.text.slice(this.i);
    const number = /^-?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+)/.exec(rest);
    if (number !== null) {
      if (this.i + number[0].length >= this.text.length) throw new Incomplete();
      this.i += number[0].length;
      return Number(number[0]);
    }
    const word = /^[A-Za-z_]+/.exec(rest);
    if (word === null) throw new Malformed();
    if (this.i + word[0].length >= this.text.length) throw new Incomplete();
    const literals: Record<string, unknown> = { True: true, False: false, None: null };
    if (!(word[0] in literals)) throw new Malformed();
    this.i += word[0].length;
    return literals[word[0]];
  }

  string(quote: string): string {
    this.i++;
    let out = "";
    while (this.i < this.text.length) {
      const c = this.text[this.i++]!;
      if (c === quote) return out;
      if (c === "\\") {
        if (this.i >= this.text.length) throw new Incomplete();
        const e = this.text[this.i++]!;
        if (e === "u") {
          const hex = this.text.slice(this.i, this.i + 4);
          if (hex.length < 4) throw new Incomplete();
          out += String.fromCharCode(parseInt(hex, 16));
          this.i += 4;
        } else out += ESCAPES[e] ?? `\\${e}`;
      } else out += c;
    }
    throw new Incomplete();
  }

  sequence(close: string): unknown[] {
    this.i++;
    const items: unknown[] = [];
    for (;;) {
      if (this.peek() === close) { this.i++; return items; }
      items.push(this.value());
      const next = this.peek();
      if (next === ",") this.i++;
      else if (next !== close) throw new Malformed();
    }
  }

  dict(): Record<string, unknown> {
    this.i++;
    const out: Record<string, unknown> = {};
    for (;;) {
      if (this.peek() === "}") { this.i++; return out; }
      const key = this.value();
      this.expect(":");
      out[String(key)] = this.value();
      const next = this.peek();
      if (next === ",") this.i++;
      else if (next !== "}") throw new Malformed();
    }
  }
}

interface CallSoFar { name: string | null; pairs: string[]; closed: boolean }

/** Reads `[f(a=1), ...]` as far as the text goes; throws Malformed when it cannot be a call list. */
function readCalls(text: string): { calls: CallSoFar[]; closed: boolean } {
  const r = new PythonReader(text);
  const calls: CallSoFar[] = [];
  try {
    r.expect("[");
    for (;;) {
      if (r.peek() === "]") { r.i++; r.ws(); if (r.i < text.length) throw new Malformed(); return { calls, closed: true }; }
      const call: CallSoFar = { name: null, pairs: [], closed: false };
      calls.push(call);
      const name = r.identifier();
      r.expect("(");
      call.name = name;
      for (;;) {
        if (r.peek() === ")") { r.i++; call.closed = true; break; }
        const key = r.identifier();
        r.expect("=");
        const value = r.value();
        call.pairs.push(`${JSON.stringify(key)}: ${pythonJsonDumps(value)}`);
        const next = r.peek();
        if (next === ",") r.i++;
        else if (next !== ")") throw new Malformed();
      }
      const next = r.peek();
      if (next === ",") r.i++;
      else if (next !== "]") throw new Malformed();
    }
  } catch (e) {
    if (e instanceof Incomplete) return { calls, closed: false };
    throw e;
  }
}

const argumentsOf = (call: CallSoFar): string => (call.name === null ? "" : `{${call.pairs.join(", ")}${call.closed ? "}" : ""}`);

function parse(text: string, final: boolean): ToolParse {
  const body = text.replace("<|python_start|>", "").replace("<|python_end|>", "");
  const trimmed = body.trim();
  if (!trimmed.startsWith("[")) return final || (trimmed !== "" && !"<|python_start|>".startsWith(trimmed)) ? contentOnly(text) : contentOnly("");
  let read: ReturnType<typeof readCalls>;
  try {
    read = readCalls(body);
  } catch {
    return final ? contentOnly(text) : { content: "", calls: [] };
  }
  if (final && (!read.closed || read.calls.some((c) => !c.closed))) return contentOnly(text);
  const calls: ParsedCall[] = read.calls.map((c) => ({ name: c.name, arguments: argumentsOf(c) }));
  return { content: "", calls };
}

export const pythonicToolParser: ToolParser = { name: "pythonic", parse };
