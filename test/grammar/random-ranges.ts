/**
 * Random number ranges for the range tests: integer and number nodes with one or two bounds drawn from small
 * integers, short decimals, negatives, zero and (when `extreme`) huge and tiny magnitudes, each side inclusive or
 * exclusive; and the validator's own view of a range (doubles compared as ajv compares them).
 */
export interface RangeSchema {
  type: "integer" | "number";
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
}

function bound(random: () => number, extreme: boolean): number {
  const sign = random() < 0.4 ? -1 : 1;
  const pick = random();
  if (pick < 0.1) return 0;
  if (pick < 0.4) return sign * Math.floor(random() * 300);
  if (pick < 0.75 || !extreme) return sign * Number((random() * 1000).toFixed(1 + Math.floor(random() * 3)));
  if (pick < 0.87) return sign * Number((1 + random()).toPrecision(1 + Math.floor(random() * 17))) * 10 ** (10 + Math.floor(random() * 290));
  return sign * Number((1 + random()).toPrecision(1 + Math.floor(random() * 17))) * 10 ** -(7 + Math.floor(random() * 290));
}

/**
 * A non-empty range: both sides (75%, or always with `bothSides`) or one, each inclusive or exclusive. A model's
 * number under a one-sided range may run on for ever (JSON numbers have no length limit): end-to-end tests bound both.
 */
export function randomRange(random: () => number, extreme: boolean, bothSides = false): RangeSchema {
  const integer = random() < 0.4;
  for (;;) {
    let a = bound(random, extreme), b = bound(random, extreme);
    if (a > b) [a, b] = [b, a];
    const sides = bothSides ? 0.5 : random();
    const s: RangeSchema = { type: integer ? "integer" : "number" };
    if (sides < 0.875) s[random() < 0.5 ? "minimum" : "exclusiveMinimum"] = a;
    if (sides >= 0.125) s[random() < 0.5 ? "maximum" : "exclusiveMaximum"] = b;
    if (!integer && a === b && (s.exclusiveMinimum !== undefined || s.exclusiveMaximum !== undefined) && sides >= 0.125 && sides < 0.875) continue;
    if (integer && !hasInteger(s)) continue;
    return s;
  }
}

/** The range holds an integer (checked on doubles near the bounds). */
function hasInteger(s: RangeSchema): boolean {
  const lo = s.minimum !== undefined ? Math.ceil(s.minimum) : s.exclusiveMinimum !== undefined ? Math.floor(s.exclusiveMinimum) + 1 : -Infinity;
  const hi = s.maximum !== undefined ? Math.floor(s.maximum) : s.exclusiveMaximum !== undefined ? Math.ceil(s.exclusiveMaximum) - 1 : Infinity;
  return lo === -Infinity || hi === Infinity || (inRangeOf(s, lo) && lo <= hi) || (inRangeOf(s, hi) && lo <= hi);
}

/** x satisfies the schema, compared on doubles as a JSON schema validator does. */
export function inRangeOf(s: RangeSchema, x: number): boolean {
  if (s.type === "integer" && !Number.isInteger(x)) return false;
  return (s.minimum === undefined || x >= s.minimum) && (s.exclusiveMinimum === undefined || x > s.exclusiveMinimum) &&
    (s.maximum === undefined || x <= s.maximum) && (s.exclusiveMaximum === undefined || x < s.exclusiveMaximum);
}
