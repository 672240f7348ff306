/**
 * Number ranges in a JSON schema, enforced exactly: every number / integer node with minimum / maximum /
 * exclusiveMinimum / exclusiveMaximum is swapped for a placeholder string constant before xgrammar converts the
 * schema, and the placeholder's literal in xgrammar's EBNF is swapped for an exact range rule (number-range.ts).
 * xgrammar's own range rules are wrong for both integers and decimals (see number-range.ts); vLLM's default backend
 * choice sends such schemas to llguidance, whose ranges are exact, so this is what fennec must match.
 * @example withNumberRanges(schema, (s) => xgrammarEbnf(s)) // xgrammar's EBNF with exact range rules spliced in
 */
import { numberRangeEbnf, resolveRange, type NumberRange } from "./number-range.ts";

const RANGE_KEYS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] as const;
/** keys whose values are data, not schemas */
const DATA_KEYS = new Set(["enum", "const", "default", "examples"]);
/** keys whose values map names to schemas */
const SCHEMA_MAPS = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"]);

interface Found {
  readonly marker: string;
  readonly range: NumberRange;
}

function inRange(x: number, range: NumberRange): boolean {
  const r = resolveRange(range);
  if (range.integer && !Number.isInteger(x)) return false;
  return (r.lo === null || (r.loStrict ? x > r.lo : x >= r.lo)) && (r.hi === null || (r.hiStrict ? x < r.hi : x <= r.hi));
}

/** The schema with each ranged number node replaced (a copy), and the ranges found, in marker order. */
function rewrite(node: unknown, prefix: string, found: Found[]): unknown {
  if (Array.isArray(node)) return node.map((item) => rewrite(item, prefix, found));
  if (typeof node !== "object" || node === null) return node;
  const s = node as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(s)) {
    if (DATA_KEYS.has(key)) out[key] = value;
    // a map of names to schemas: a property may be called "enum" or "const" and still be a schema
    else if (SCHEMA_MAPS.has(key) && typeof value === "object" && value !== null && !Array.isArray(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, rewrite(sub, prefix, found)]));
    } else out[key] = rewrite(value, prefix, found);
  }
  if (!RANGE_KEYS.some((k) => k in s)) return out;
  // the ranged node becomes a rule of its own: a combinator beside the range would be lost with the node
  const combinator = ["anyOf", "oneOf", "allOf", "$ref", "not", "if"].find((k) => k in s);
  if (combinator) throw new Error(`${RANGE_KEYS.find((k) => k in s)} beside ${combinator} in one schema is not supported: give the ranged number its own {"type": "number", ...}`);
  // a range without a type binds numbers only; xgrammar would drop it, so every type is spelled out, numbers ranged
  const untyped = s.type === undefined;
  const types = untyped ? ["number", "string", "boolean", "null", "array", "object"] : Array.isArray(s.type) ? s.type : [s.type];
  const numeric = types.includes("number") || types.includes("integer");
  if (!numeric) return out;
  const range: NumberRange = { integer: !types.includes("number"), ...Object.fromEntries(RANGE_KEYS.filter((k) => k in s).map((k) => [k, s[k]])) };
  resolveRange(range); // a bad or empty range fails here, naming its keywords
  for (const k of RANGE_KEYS) delete out[k];
  // listed values: the range filters them (xgrammar writes enum / const as literals)
  if (Array.isArray(s.enum)) return { ...out, enum: s.enum.filter((v) => typeof v !== "number" || inRange(v, range)) };
  if ("const" in s) {
    if (typeof s.const === "number" && !inRange(s.const, range)) throw new Error(`const ${s.const} is outside the range its minimum / maximum set`);
    return out;
  }
  const marker = `${prefix}${found.length}`;
  found.push({ marker, range });
  const others = types.filter((t) => t !== "number" && t !== "integer");
  if (others.length === 0) return { const: marker };
  // ["integer", "null"]: the other types keep their own branch
  return { anyOf: [{ ...out, type: others.length === 1 ? others[0] : others }, { const: marker }] };
}

/**
 * Converts the schema with `toEbnf` (xgrammar's converter) after taking its number ranges out, then puts exact range
 * rules where they were. Throws naming the keywords for a range that holds no number.
 */
export async function withNumberRanges(schemaText: string, toEbnf: (schemaText: string) => Promise<string>): Promise<string> {
  let prefix = "fennec_range_";
  while (schemaText.includes(prefix)) prefix += "x";
  const found: Found[] = [];
  const rewritten = rewrite(JSON.parse(schemaText) as unknown, prefix, found);
  if (found.length === 0) return toEbnf(schemaText);
  let ebnf = await toEbnf(JSON.stringify(rewritten));
  const rules: string[] = [];
  for (const { marker, range } of found) {
    // xgrammar writes a string constant as the EBNF literal "\"text\""
    ebnf = ebnf.replaceAll(`"\\"${marker}\\""`, marker);
    rules.push(numberRangeEbnf(marker, range));
  }
  return `${ebnf}\n${rules.join("\n")}\n`;
}
