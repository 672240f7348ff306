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
const BACKSLASH = 0x5c; // \
const HASH = 0x23; // #
const NEWLINE = 0x0a;

/**
 * The one-line problem when `text` nests objects/arrays deeper than `maxDepth` (brackets inside strings do not count),
 * else null. Never parses: malformed text is left to the parser, which then sees bounded nesting.
 */
export function nestingProblem(text: string, limits: NestingLimits): string | null {
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > limits.maxDepth) return `nesting is deeper than the limit of ${limits.maxDepth} levels of objects and arrays`;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (depth > 0) depth--;
    } else if (c === QUOTE) {
      // skip the string, escapes included
      for (i++; i < n; i++) {
        const s = text.charCodeAt(i);
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (limits.yaml === true && c === APOSTROPHE) {
      // YAML single-quoted: '' is an escaped quote, which this loop reads as the end and a new start
      for (i++; i < n && text.charCodeAt(i) !== APOSTROPHE; i++);
    } else if (limits.yaml === true && c === HASH) {
      for (i++; i < n && text.charCodeAt(i) !== NEWLINE; i++);
    }
  }
  return null;
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
