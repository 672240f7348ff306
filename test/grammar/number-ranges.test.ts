/**
 * Exact number ranges (src/grammar/number-range.ts, schema-ranges.ts), checked with xgrammar's own matcher
 * (Testings.isGrammarAcceptString on the grammar xgrammar parses from the EBNF): for random bounds (integers,
 * decimals, negatives, huge and tiny, each side inclusive or exclusive), every string the grammar accepts is a JSON
 * number inside the range as a validator sees it, and in-range numbers (plain, at most 6 fraction digits) are accepted.
 */
import { describe, expect, test } from "bun:test";
import * as xg from "@mlc-ai/web-xgrammar";
import { nextDown, nextUp, numberRangeEbnf, plainDecimal } from "../../src/grammar/number-range.ts";
import { jsonSchemaEbnf } from "../../src/grammar/grammar-spec.ts";
import { rng } from "../helpers/prng.ts";
import { inRangeOf, randomRange, type RangeSchema } from "./random-ranges.ts";

const JSON_NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;

/** x written plainly (no exponent), as a model would write it */
function plain(x: number): string {
  const { int, frac } = plainDecimal(x);
  return `${x < 0 ? "-" : ""}${int}${frac ? `.${frac}` : ""}`;
}

async function grammarOf(range: RangeSchema): Promise<xg.Grammar> {
  return xg.Grammar.fromEBNF(numberRangeEbnf("root", { integer: range.type === "integer", ...range }));
}

/** strings around the bounds and across the range, plus forms no JSON number grammar may take */
function candidates(range: RangeSchema, random: () => number): string[] {
  const out = new Set<string>(["0", "-0", "-0.0", "1e2", "01", "1.", ".5", "+1", "0x5", "-", "", "00", "1.0e1", "5", "-5", "0.5", "120", "126"]);
  for (const b of [range.minimum, range.maximum, range.exclusiveMinimum, range.exclusiveMaximum]) {
    if (b === undefined) continue;
    const near = [b, nextUp(b), nextDown(b), nextUp(nextUp(b)), nextDown(nextDown(b)), Math.floor(b), Math.ceil(b), Math.floor(b) - 1, Math.ceil(b) + 1];
    for (let k = 0; k <= 7; k++) near.push(b + 10 ** -k, b - 10 ** -k);
    for (const x of near) out.add(plain(x));
    const p = plain(b);
    for (const tail of ["0", "1", "9", "000001", "999999"]) out.add(p.includes(".") ? p + tail : `${p}.${tail}`);
    if (p.includes(".")) out.add(p.slice(0, -1));
  }
  const lo = range.minimum ?? range.exclusiveMinimum ?? (range.maximum ?? range.exclusiveMaximum!) - 1000;
  const hi = range.maximum ?? range.exclusiveMaximum ?? lo + 1000;
  for (let i = 0; i < 12; i++) {
    const x = lo + random() * (hi - lo);
    out.add(plain(Number(x.toFixed(Math.floor(random() * 7)))));
    out.add(plain(Math.round(x)));
  }
  return [...out];
}

describe("number-range: every accepted string is in the range, in-range numbers are accepted", () => {
  test("xgrammar's integer range bug: maximum 120 no longer lets 126 through", async () => {
    const schema = JSON.stringify({ type: "object", properties: { age: { type: "integer", minimum: 0, maximum: 120 } }, required: ["age"] });
    const ours = await xg.Grammar.fromEBNF(await jsonSchemaEbnf(xg, schema, false));
    const theirs = await xg.Grammar.fromJSONSchema(schema, false, -1);
    expect(await xg.Testings.isGrammarAcceptString(theirs, '{"age": 126}')).toBe(true); // the bug this module exists for
    expect(await xg.Testings.isGrammarAcceptString(ours, '{"age": 126}')).toBe(false);
    for (const age of [0, 7, 99, 100, 119, 120]) expect(await xg.Testings.isGrammarAcceptString(ours, `{"age": ${age}}`)).toBe(true);
    for (const age of [121, 129, 200, 1000, -1]) expect(await xg.Testings.isGrammarAcceptString(ours, `{"age": ${age}}`)).toBe(false);
  });

  test.each([
    ["maximum 1 refuses 1.18", { type: "number", maximum: 1 }, ["1", "0.999999", "-3.5", "1.0"], ["1.18", "1.000001", "2"]],
    ["exclusiveMaximum 5 refuses 5 and 5.000", { type: "number", exclusiveMaximum: 5 }, ["4.999999", "-100"], ["5", "5.000", "5.0000001"]],
    ["minimum 0.5 refuses 0x5", { type: "number", minimum: 0.5 }, ["0.5", "0.50", "12345678901234567890"], ["0x5", "0.499999", "0", "-1"]],
    ["exclusiveMinimum 0 refuses every zero", { type: "number", exclusiveMinimum: 0, maximum: 1 }, ["0.000001", "1", "0.5"], ["0", "0.0", "-0", "-0.000001", "1.000001"]],
    ["negative decimals, both exclusive", { type: "number", exclusiveMinimum: -1.25, exclusiveMaximum: -0.5 }, ["-1.249999", "-0.500001", "-1"], ["-1.25", "-0.5", "-0.50", "-1.250", "0"]],
    ["integer exclusive decimals", { type: "integer", exclusiveMinimum: -2.5, exclusiveMaximum: 3 }, ["-2", "0", "2"], ["-3", "3", "2.0", "-0"]],
  ] as [string, RangeSchema, string[], string[]][])("%s", async (_name, range, good, badOnes) => {
    const g = await grammarOf(range);
    for (const s of good) expect([s, await xg.Testings.isGrammarAcceptString(g, s)]).toEqual([s, true]);
    for (const s of badOnes) expect([s, await xg.Testings.isGrammarAcceptString(g, s)]).toEqual([s, false]);
  });

  test("a string constant marker never leaks: nested objects and arrays of ranges, [\"integer\", \"null\"], enum filtered", async () => {
    const schema = {
      type: "object", required: ["a", "b", "c", "d", "enum"],
      properties: {
        a: { type: "array", items: { type: "object", properties: { v: { type: "number", exclusiveMinimum: -1, maximum: 1 } }, required: ["v"] } },
        b: { type: ["integer", "null"], minimum: 3, exclusiveMaximum: 5 },
        c: { type: "integer", enum: [1, 5, 9], minimum: 2 },
        d: { $ref: "#/$defs/pct" },
        enum: { type: "integer", minimum: 1, maximum: 2 },
      },
      $defs: { pct: { type: "number", minimum: 0, maximum: 100 } },
    };
    const ebnf = await jsonSchemaEbnf(xg, JSON.stringify(schema), true);
    expect(ebnf).not.toContain('\\"fennec_range_');
    const g = await xg.Grammar.fromEBNF(ebnf);
    const accept = (s: string): Promise<boolean> => xg.Testings.isGrammarAcceptString(g, s);
    expect(await accept('{"a": [{"v": -0.5}, {"v": 1}], "b": null, "c": 5, "d": 100, "enum": 2}')).toBe(true);
    expect(await accept('{"a": [], "b": 4, "c": 9, "d": 0.25, "enum": 1}')).toBe(true);
    const bads = ['{"a": [{"v": -1}], "b": 4, "c": 5, "d": 1, "enum": 1}', '{"a": [], "b": 5, "c": 5, "d": 1, "enum": 1}', '{"a": [], "b": 4, "c": 1, "d": 1, "enum": 1}',
      '{"a": [], "b": 4, "c": 5, "d": 100.5, "enum": 1}', '{"a": [], "b": 4, "c": 5, "d": 1, "enum": 3}'];
    for (const bad of bads) {
      expect([bad, await accept(bad)]).toEqual([bad, false]);
    }
  });

  test("a range without a type binds numbers only (xgrammar drops it); beside a combinator it is refused, naming both", async () => {
    const g = await xg.Grammar.fromEBNF(await jsonSchemaEbnf(xg, JSON.stringify({ minimum: 0, maximum: 120 }), false));
    for (const s of ["120", "0", '"x"', "true", "null", "[1]", '{"a": 1}']) expect([s, await xg.Testings.isGrammarAcceptString(g, s)]).toEqual([s, true]);
    for (const s of ["126", "-1", "120.5"]) expect([s, await xg.Testings.isGrammarAcceptString(g, s)]).toEqual([s, false]);
    await expect(jsonSchemaEbnf(xg, JSON.stringify({ anyOf: [{ type: "integer" }], maximum: 120 }), false)).rejects.toThrow("maximum beside anyOf in one schema is not supported");
    await expect(jsonSchemaEbnf(xg, JSON.stringify({ type: "integer", allOf: [{ minimum: 3 }], maximum: 120 }), false)).rejects.toThrow("maximum beside allOf in one schema is not supported");
  });

  test("huge and tiny bounds: 1e300 and 1e-300 are exact", async () => {
    const big = await grammarOf({ type: "integer", exclusiveMaximum: 1e300, minimum: 1e299 });
    // 300 nines parse to 1e300 itself: the largest accepted is the double below it, written plainly
    expect(await xg.Testings.isGrammarAcceptString(big, "9".repeat(300))).toBe(false);
    expect(await xg.Testings.isGrammarAcceptString(big, plain(nextDown(1e300)))).toBe(true);
    expect(await xg.Testings.isGrammarAcceptString(big, "1" + "0".repeat(299))).toBe(true);
    expect(await xg.Testings.isGrammarAcceptString(big, "1" + "0".repeat(300))).toBe(false);
    expect(await xg.Testings.isGrammarAcceptString(big, "9".repeat(299))).toBe(false);
    expect(await xg.Testings.isGrammarAcceptString(big, "-1")).toBe(false);
    const tiny = await grammarOf({ type: "number", exclusiveMinimum: 0, maximum: 1e-300 });
    expect(await xg.Testings.isGrammarAcceptString(tiny, "0." + "0".repeat(299) + "1")).toBe(true);
    expect(await xg.Testings.isGrammarAcceptString(tiny, "0." + "0".repeat(299) + "05")).toBe(true);
    expect(await xg.Testings.isGrammarAcceptString(tiny, "0." + "0".repeat(299) + "11")).toBe(false);
    expect(await xg.Testings.isGrammarAcceptString(tiny, "0." + "0".repeat(298) + "1")).toBe(false);
  });

  test("an exclusive bound beyond a double's spacing: the next double inward", async () => {
    // 1e17 - 1 parses to 1e17, which exclusiveMaximum 1e17 refuses: the largest accepted integer is the double below
    const g = await grammarOf({ type: "integer", minimum: 0, exclusiveMaximum: 1e17 });
    expect(await xg.Testings.isGrammarAcceptString(g, "99999999999999999")).toBe(false);
    expect(await xg.Testings.isGrammarAcceptString(g, plain(nextDown(1e17)))).toBe(true);
  });

  test("an empty range is an error naming its keywords", () => {
    expect(() => numberRangeEbnf("r", { integer: false, minimum: 2, exclusiveMaximum: 2 })).toThrow("minimum and exclusiveMaximum leave no number");
    expect(() => numberRangeEbnf("r", { integer: true, exclusiveMinimum: 1, exclusiveMaximum: 2 })).toThrow("leave no integer");
    expect(() => numberRangeEbnf("r", { integer: true, maximum: 3, minimum: 9 })).toThrow("minimum and maximum leave no integer");
  });

  test("200 random ranges (one in ten with huge or tiny bounds): accepted => in range; plain in-range numbers => accepted", async () => {
    const random = rng(20261205);
    let accepted = 0, checked = 0;
    for (let i = 0; i < 200; i++) {
      const range = randomRange(random, i % 10 === 0);
      const g = await grammarOf(range);
      for (const s of candidates(range, random)) {
        const ok = await xg.Testings.isGrammarAcceptString(g, s);
        checked++;
        const inRange = JSON_NUMBER.test(s) && s !== "-0" && !/^-0(\.0+)?$/.test(s) && inRangeOf(range, Number(s));
        if (ok) {
          accepted++;
          expect([range, s, inRange]).toEqual([range, s, true]);
        } else if (inRange && /^-?(0|[1-9][0-9]*)(\.[0-9]{1,6})?$/.test(s) && plain(Number(s)) === s) {
          expect([range, s, "refused"]).toEqual([range, s, "accepted"]);
        }
      }
      g.dispose();
    }
    expect(accepted).toBeGreaterThan(checked / 5); // the check above saw real acceptances, not only refusals
  });
});
