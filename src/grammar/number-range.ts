/**
 * Exact grammars for JSON numbers inside a range (a schema's minimum / maximum / exclusiveMinimum /
 * exclusiveMaximum). xgrammar 0.1.27 gets ranges wrong (integer maximum 120 becomes "1" [0-2] [0-9], which lets 126
 * through; maximum 1 on a number lets "1.18"), so fennec builds the number rule itself, digit by digit, as
 * llguidance does for vLLM's guidance backend (llguidance json/numeric.rs rx_int_range / rx_float_range, the same
 * idea: compare the digits with each bound's while they are equal, free digits once one side is left behind).
 *
 * The language: "-"? ("0" | [1-9][0-9]*) ("." [0-9]{1,K})?, never "-0", no exponent; every string it accepts is a JSON
 * number whose double value is inside the range (validators compare doubles, so exclusive bounds near a double's
 * spacing become the next double inward, inclusive); every double in the range, written plainly (its shortest form)
 * with at most 6 fraction digits, is accepted. K is one more than the bounds' fraction digits (at least 6): the
 * digits that follow a bound closely may run to K, free digits after both bounds are left behind stop at 6.
 * @example numberRangeEbnf("r", { integer: true, minimum: 0, maximum: 120 }) // rules for 0..120
 */

/** A schema's range keywords, as read from the schema (draft 4's boolean exclusive forms included). */
export interface NumberRange {
  readonly integer: boolean;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly exclusiveMinimum?: number | boolean;
  readonly exclusiveMaximum?: number | boolean;
}

/** One bound in the decimal machine: a non-negative magnitude as digits, and whether it is excluded. */
interface Bound {
  /** integer digits, no leading zero ("0" for zero) */
  readonly int: string;
  /** fraction digits, no trailing zero */
  readonly frac: string;
  readonly strict: boolean;
}

/** The range on doubles the grammar must realize: inclusive unless strict; null = unbounded on that side. */
export interface ResolvedRange {
  readonly lo: number | null;
  readonly loStrict: boolean;
  readonly hi: number | null;
  readonly hiStrict: boolean;
  readonly integer: boolean;
  /** fraction digits at most (0 for integers) */
  readonly fractionDigits: number;
}

/** fraction digits a number may have even when the bounds need fewer (xgrammar's own ranged numbers allow 6) */
const MIN_FRACTION_DIGITS = 6;

const f64 = new Float64Array(1);
const bits = new BigInt64Array(f64.buffer);

/** The next double towards +Infinity (Math.nextUp). */
export function nextUp(x: number): number {
  if (Number.isNaN(x) || x === Infinity) return x;
  if (x === 0) return Number.MIN_VALUE;
  f64[0] = x;
  bits[0] = x > 0 ? bits[0]! + 1n : bits[0]! - 1n;
  return f64[0]!;
}

export function nextDown(x: number): number {
  return -nextUp(-x);
}

/**
 * A finite non-negative double's shortest round-trip decimal, as plain digits.
 * @example plainDecimal(1.5e-7) // { int: "0", frac: "00000015" }
 */
export function plainDecimal(x: number): { int: string; frac: string } {
  const [mantissa, exp = "0"] = String(Math.abs(x)).split("e");
  const [whole, fraction = ""] = mantissa!.split(".");
  const digits = whole! + fraction;
  const point = whole!.length + Number(exp); // digits before the decimal point
  const padded = point <= 0 ? "0".repeat(1 - point) + digits : point > digits.length ? digits + "0".repeat(point - digits.length) : digits;
  const at = Math.max(point, 1);
  const int = padded.slice(0, at).replace(/^0+(?=\d)/, "");
  return { int, frac: padded.slice(at).replace(/0+$/, "") };
}

function numberKeyword(range: NumberRange, key: keyof NumberRange): number | null {
  const v = range[key];
  if (v === undefined || typeof v === "boolean") return null;
  if (typeof v !== "number" || Number.isNaN(v)) throw new Error(`${key} must be a number, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * The range's bounds on doubles: the tighter of minimum / exclusiveMinimum (and of the maxima), integers rounded
 * inward, an exclusive bound too close to its neighbours for K fraction digits replaced by the next double inward.
 * Throws naming the keywords when no number is left.
 */
export function resolveRange(range: NumberRange): ResolvedRange {
  let lo: number | null = null, loStrict = false, hi: number | null = null, hiStrict = false;
  const min = numberKeyword(range, "minimum"), max = numberKeyword(range, "maximum");
  const exMin = numberKeyword(range, "exclusiveMinimum"), exMax = numberKeyword(range, "exclusiveMaximum");
  if (min !== null) [lo, loStrict] = [min, range.exclusiveMinimum === true];
  if (exMin !== null && (lo === null || exMin >= lo)) [lo, loStrict] = [exMin, true];
  if (max !== null) [hi, hiStrict] = [max, range.exclusiveMaximum === true];
  if (exMax !== null && (hi === null || exMax <= hi)) [hi, hiStrict] = [exMax, true];
  if (lo === -Infinity) lo = null;
  if (hi === Infinity) hi = null;
  if (lo !== null && Object.is(lo, -0)) lo = 0;
  if (hi !== null && Object.is(hi, -0)) hi = 0;
  let fractionDigits = 0;
  if (range.integer) {
    // the first integer past an exclusive bound is found on doubles (above 2^53, bound + 1 is the bound again)
    if (lo !== null) lo = Math.ceil(loStrict ? nextUp(lo) : lo);
    if (hi !== null) hi = Math.floor(hiStrict ? nextDown(hi) : hi);
    loStrict = hiStrict = false;
  } else {
    // one digit more than the bounds have, so an open interval between two decimals keeps a number
    const digitsOf = (): number => Math.max(MIN_FRACTION_DIGITS, ...[lo, hi].map((b) => (b === null || !Number.isFinite(b) ? 0 : plainDecimal(b).frac.length + 1)));
    fractionDigits = digitsOf();
    // x > b in decimals is x >= b + 10^-K; it parses to a double > b only when 10^-K is over half b's spacing
    const tooClose = (b: number): boolean => !(Math.abs(nextUp(Math.abs(b)) - Math.abs(b)) / 2 < 10 ** -fractionDigits);
    for (let again = true; again;) {
      again = false;
      if (lo !== null && loStrict && Number.isFinite(lo) && tooClose(lo)) [lo, loStrict, again] = [nextUp(lo), false, true];
      if (hi !== null && hiStrict && Number.isFinite(hi) && tooClose(hi)) [hi, hiStrict, again] = [nextDown(hi), false, true];
      if (again) fractionDigits = Math.max(fractionDigits, digitsOf());
    }
  }
  if (lo !== null && hi !== null && (lo > hi || (lo === hi && (loStrict || hiStrict))) || lo === Infinity || hi === -Infinity) {
    const keys = ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"].filter((k) => typeof range[k as keyof NumberRange] === "number");
    throw new Error(`${keys.join(" and ")} leave no ${range.integer ? "integer" : "number"} in the range`);
  }
  return { lo, loStrict, hi, hiStrict, integer: range.integer, fractionDigits };
}

/** A grammar expression; rules are referenced by name. */
type Expr = string;

/** The rules being built for one range: name -> body. */
class RuleSet {
  readonly rules: [string, Expr][] = [];
  constructor(private readonly base: string) {}
  add(body: Expr): string {
    const name = `${this.base}_${this.rules.length}`;
    this.rules.push([name, body]);
    return name;
  }
}

const alt = (options: (Expr | null)[]): Expr | null => {
  const live = options.filter((o): o is Expr => o !== null);
  return live.length === 0 ? null : live.length === 1 ? live[0]! : `( ${live.join(" | ")} )`;
};
const digitClass = (lo: number, hi: number): Expr => (lo === hi ? `"${lo}"` : `[${lo}-${hi}]`);
const repeat = (e: Expr, min: number, max: number): Expr => (max === 0 ? '""' : min === max ? (min === 1 ? e : `${e}{${min}}`) : `${e}{${min},${max}}`);
/**
 * Fraction digits once the number has left both bounds behind: K is long only to follow a bound with many digits
 * (1e-300); free digits past MIN_FRACTION_DIGITS add nothing a model needs and make xgrammar's matcher crawl.
 */
const freeDigits = (k: number): number => Math.min(k, MIN_FRACTION_DIGITS);
/** K free fraction digits after the point, or none */
const freeFraction = (k: number): Expr => (k === 0 ? '""' : `( "." [0-9]{1,${k}} )?`);

/**
 * Magnitudes (no sign) of exactly n integer digits, lo <= x <= hi compared digit by digit (the fraction padded with
 * zeros), each bound optional and possibly strict. Tight states (digits equal to a bound so far) become rules; at most
 * three live per position, so the grammar grows with the bounds' digits, not their values.
 */
function fixedLength(rules: RuleSet, n: number, k: number, lo: Bound | null, hi: Bound | null): Expr | null {
  const loDigits = lo ? lo.int + lo.frac : "", hiDigits = hi ? hi.int + hi.frac : "";
  const digit = (s: string, pos: number): number => (pos < s.length ? s.charCodeAt(pos) - 48 : 0);
  const restZero = (s: string, pos: number): boolean => !/[1-9]/.test(s.slice(pos));
  const memo = new Map<string, Expr | null>();
  const free = freeDigits(k);
  /** the digit at pos, then cont(pos + 1, loT', hiT') */
  const digitStep = (pos: number, loT: boolean, hiT: boolean, cont: (pos: number, loT: boolean, hiT: boolean) => Expr | null): (Expr | null)[] => {
    const low = loT ? digit(loDigits, pos) : pos === 0 && n > 1 ? 1 : 0, high = hiT ? digit(hiDigits, pos) : 9;
    if (low > high) return [];
    const then = (d: Expr, l: boolean, h: boolean): Expr | null => {
      const rest = cont(pos + 1, l, h);
      return rest === null ? null : rest === '""' ? d : `${d} ${rest}`;
    };
    if (loT && hiT && low === high) return [then(`"${low}"`, true, true)];
    const from = loT ? low + 1 : low, to = hiT ? high - 1 : high;
    return [loT ? then(`"${low}"`, true, false) : null, from <= to ? then(digitClass(from, to), false, false) : null, hiT ? then(`"${high}"`, false, true) : null];
  };
  /** the number may end at pos: it equals its digits so far padded with zeros */
  const endOk = (pos: number, loT: boolean, hiT: boolean): boolean =>
    (!loT || (restZero(loDigits, pos) && !lo!.strict)) && (!hiT || !restZero(hiDigits, pos) || !hi!.strict);
  const rule = (key: string, build: () => Expr | null): Expr | null => {
    if (!memo.has(key)) {
      const body = build();
      memo.set(key, body === null || body === '""' ? body : rules.add(body));
    }
    return memo.get(key)!;
  };
  /** the rest after pos digits: integer digits below n, the point at n, then pos - n fraction digits written */
  const state = (pos: number, loT: boolean, hiT: boolean): Expr | null => {
    if (!loT && !hiT) {
      if (pos < n) return [pos === 0 && n > 1 ? "[1-9]" : "[0-9]", ...(n - pos - 1 > 0 ? [repeat("[0-9]", n - pos - 1, n - pos - 1)] : []), ...(k > 0 ? [freeFraction(free)] : [])].join(" ");
      return pos === n ? freeFraction(free) : repeat("[0-9]", 0, Math.min(k - (pos - n), free));
    }
    return rule(`s${pos} ${loT} ${hiT}`, () => {
      if (pos < n) return alt(digitStep(pos, loT, hiT, state));
      const options: (Expr | null)[] = [endOk(pos, loT, hiT) ? '""' : null];
      if (pos === n && k > 0) {
        const first = alt(digitStep(pos, loT, hiT, state));
        if (first !== null) options.push(`"." ${first}`);
      } else if (pos > n && pos - n < k) {
        options.push(...digitStep(pos, loT, hiT, state));
      }
      return alt(options);
    });
  };
  return state(0, lo !== null, hi !== null);
}

/** Magnitudes lo <= x <= hi (hi null: unbounded) of any integer length. */
function magnitudes(rules: RuleSet, k: number, lo: Bound, hi: Bound | null): Expr | null {
  const la = lo.int.length, lb = hi ? hi.int.length : Infinity;
  if (lb < la) return null;
  if (lb === la) return fixedLength(rules, la, k, lo, hi);
  const tail = k > 0 ? ` ${freeFraction(freeDigits(k))}` : "";
  // lengths strictly between the bounds' are free: a first digit 1-9, then la.. more digits
  const middle = hi === null ? `[1-9] [0-9]{${la}} [0-9]*${tail}` : lb - la >= 2 ? `[1-9] ${repeat("[0-9]", la, lb - 2)}${tail}` : null;
  return alt([fixedLength(rules, la, k, lo, null), middle, hi ? fixedLength(rules, lb, k, null, hi) : null]);
}

function bound(x: number, strict: boolean): Bound {
  return { ...plainDecimal(x), strict };
}

/**
 * EBNF rules (xgrammar's dialect) for the JSON numbers in the range; the first rule is `name`, the helpers are
 * `name_0`, `name_1`, ... Throws naming the keywords when the range holds no number.
 * @example numberRangeEbnf("n", { integer: true, maximum: 9, minimum: 5 }) // 'n ::= n_0' with n_0 ::= [5-9]
 */
export function numberRangeEbnf(name: string, range: NumberRange): string {
  const r = resolveRange(range);
  const rules = new RuleSet(name);
  const k = r.fractionDigits;
  const zero: Bound = { int: "0", frac: "", strict: false };
  // x >= 0: magnitudes from max(lo, 0); x < 0: "-" and magnitudes above 0 (never "-0") from -hi up to -lo
  const nonNegative = r.hi === null || r.hi >= 0
    ? magnitudes(rules, k, r.lo !== null && r.lo >= 0 ? bound(r.lo, r.loStrict) : zero, r.hi === null ? null : bound(r.hi, r.hiStrict))
    : null;
  const negative = r.lo === null || r.lo < 0
    ? magnitudes(rules, k, r.hi !== null && r.hi < 0 ? bound(-r.hi, r.hiStrict) : { ...zero, strict: true }, r.lo === null ? null : bound(-r.lo, r.loStrict))
    : null;
  const top = alt([nonNegative, negative === null ? null : `"-" ${negative}`]);
  if (top === null) throw new Error(`the range leaves no ${r.integer ? "integer" : "number"} of at most ${k} fraction digits`);
  return [[name, top] as const, ...rules.rules].map(([n, body]) => `${n} ::= ${body}`).join("\n");
}
