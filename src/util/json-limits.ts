/**
 * Bounds on untrusted JSON (and YAML flow) text, checked on the raw characters before any parser or validator runs,
 * and a bounded preview of a parsed value for error messages. A 0.5 MB body of 100k nested arrays made JSON.parse,
 * Elysia's validator and its error path (which stringified the value) stall the event loop for seconds, take 2.5 GB
 * and overflow the stack; one linear scan with a counter finds it in microseconds.
 * @example const depth = nestingProblem(text, { maxDepth: 128 }); if (depth !== null) throw new ApiError("invalidBody", depth);
 */

export interface NestingLimits {
  readonly maxDepth: number;
  /** YAML: '...' strings and # comments too (JSON has only "..." strings) */
  readonly yaml?: boolean;
}

const OPEN_BRACE = 0x7b; // {
const OPEN_BRACKET = 0x5b; // [
const CLOSE_BRACE = 0x7d; // }
const CLOSE_BRACKET = 0x5d; // ]
const QUOTE = 0x22; // "
const APOSTROPHE = 0x27; // '
const HASH = 0x23; // #

/**
 * The nesting scanner over text that arrives in pieces (a request body chunk by chunk): feed() returns the one-line
 * problem once objects/arrays nest deeper than `maxDepth` (brackets inside strings do not count), else null. Strings
 * are skipped with indexOf, so a 15 MB prompt costs a few native searches, not 15 million steps.
 */
export class NestingScanner {
  private depth = 0;
  private inString = false;
  /** the previous piece ended inside a string on a backslash: the next character is escaped */
  private escaped = false;
  /** YAML only: inside a '...' string or a # comment */
  private inQuote = false;
  private inComment = false;

  constructor(private readonly limits: NestingLimits) {}

  feed(text: string): string | null {
    const n = text.length;
    const yaml = this.limits.yaml === true;
    let i = 0;
    while (i < n) {
      if (this.inString) {
        if (this.escaped) { this.escaped = false; i++; continue; }
        let quote = text.indexOf('"', i);
        let slash = text.indexOf("\\", i);
        while (slash >= 0 && (quote < 0 || slash < quote)) {
          if (slash + 1 >= n) { this.escaped = true; return null; }
          if (quote === slash + 1) quote = text.indexOf('"', slash + 2);
          slash = text.indexOf("\\", slash + 2);
        }
        if (quote < 0) return null;
        this.inString = false;
        i = quote + 1;
        continue;
      }
      if (this.inQuote || this.inComment) {
        // YAML '...' ('' is an escaped quote, read here as an end and a new start) and # comments to the line's end
        const end = text.indexOf(this.inQuote ? "'" : "\n", i);
        if (end < 0) return null;
        this.inQuote = this.inComment = false;
        i = end + 1;
        continue;
      }
      const c = text.charCodeAt(i++);
      if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        if (++this.depth > this.limits.maxDepth) return `nesting is deeper than the limit of ${this.limits.maxDepth} levels of objects and arrays`;
      } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        if (this.depth > 0) this.depth--;
      } else if (c === QUOTE) {
        this.inString = true;
      } else if (yaml && c === APOSTROPHE) {
        this.inQuote = true;
      } else if (yaml && c === HASH) {
        this.inComment = true;
      }
    }
    return null;
  }
}

/**
 * The one-line problem when `text` nests objects/arrays deeper than `maxDepth` (brackets inside strings do not count),
 * else null. Never parses: malformed text is left to the parser, which then sees bounded nesting.
 */
export function nestingProblem(text: string, limits: NestingLimits): string | null {
  return new NestingScanner(limits).feed(text);
}

/**
 * `value` as JSON, cut at about `maxChars` characters ("..." marks the cut): for error messages about values of any
 * size, without stringifying all of them (a 15 MB prompt or a million-entry list costs what the preview costs).
 */
export function jsonPreview(value: unknown, maxChars = 60): string {
  const parts: string[] = [];
  let length = 0;
  const push = (text: string): boolean => {
    parts.push(text);
    length += text.length;
    return length <= maxChars;
  };
  const walk = (v: unknown, depth: number): boolean => {
    if (depth > 16) return push("...");
    if (typeof v === "string") return push(JSON.stringify(v.length > maxChars ? v.slice(0, maxChars) : v));
    if (typeof v !== "object" || v === null) return push(JSON.stringify(v) ?? String(v));
    if (Array.isArray(v)) {
      if (!push("[")) return false;
      for (let i = 0; i < v.length; i++) if ((i > 0 && !push(",")) || !walk(v[i], depth + 1)) return false;
      return push("]");
    }
    if (!push("{")) return false;
    let first = true;
    // for...in stops with the preview: Object.keys would list a million keys first
    for (const key in v) {
      if (!Object.hasOwn(v, key)) continue;
      if ((!first && !push(",")) || !push(`${JSON.stringify(key)}:`) || !walk((v as Record<string, unknown>)[key], depth + 1)) return false;
      first = false;
    }
    return push("}");
  };
  walk(value, 0);
  const text = parts.join("");
  return text.length > maxChars ? `${text.slice(0, maxChars - 3)}...` : text;
}
