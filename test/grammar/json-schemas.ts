/**
 * 60 JSON schemas for the structured-output tests, built from a table of leaves (enums, integer and number ranges,
 * booleans, patterned / length-bounded / formatted strings, consts, null) and of shapes (nested objects, arrays with
 * min / max items, anyOf, required and optional properties). Strings and numbers are bounded so a random-weight model,
 * whose every token is noise, still ends within the test's max_tokens: only the grammar makes its output valid.
 */
type Schema = Record<string, unknown>;

const LEAVES: readonly Schema[] = [
  { enum: ["red", "green", "blue"] },
  { type: "integer", minimum: 0, maximum: 9 },
  { type: "integer", minimum: -50, maximum: 50 },
  { type: "boolean" },
  { type: "string", pattern: "^[a-z]{1,6}$" },
  { type: "string", maxLength: 6 },
  { type: "string", minLength: 2, maxLength: 4 },
  { type: "integer", exclusiveMinimum: 5, exclusiveMaximum: 12 },
  { const: "fixed" },
  { type: "null" },
  { type: "string", format: "date" },
  { type: "string", pattern: "^[A-Z][0-9]{2}$" },
];

/** shape i: a schema around leaves a and b */
const SHAPES: readonly ((a: Schema, b: Schema) => Schema)[] = [
  (a, b) => ({ type: "object", properties: { x: a, y: b }, required: ["x", "y"] }),
  (a, b) => ({ type: "object", properties: { x: a, y: b }, required: ["x"] }),
  (a) => ({ type: "array", items: a, minItems: 1, maxItems: 3 }),
  (a, b) => ({ type: "object", properties: { inner: { type: "object", properties: { v: a }, required: ["v"] }, w: b }, required: ["inner", "w"] }),
  (a, b) => ({ anyOf: [a, b] }),
  (a, b) => ({ type: "object", properties: { list: { type: "array", items: a, minItems: 0, maxItems: 2 }, tag: b }, required: ["list", "tag"] }),
];

/** every shape over leaf pairs, 60 schemas */
export const SCHEMAS: readonly Schema[] = (() => {
  const out: Schema[] = [];
  for (let i = 0; out.length < 60; i++) {
    const shape = SHAPES[i % SHAPES.length]!;
    const a = LEAVES[i % LEAVES.length]!;
    const b = LEAVES[(i * 5 + 3) % LEAVES.length]!;
    out.push(shape(a, b));
  }
  return out;
})();
