/**
 * argv (after the command name) -> the Options bag of one command, checked against FLAGS: kinds, choices, min/max,
 * vLLM's human-readable numbers, nargs="+" lists, the positional model, and vLLM's `--config FILE`. Unknown flags
 * are errors (one line; the CLI exits 2).
 */
import { readFileSync } from "node:fs";
import { err, ok, type Result } from "../util/result.ts";
import { flagsOf, POSITIONAL_MODEL, type Command, type FlagSpec, type FlagValue, type Options } from "./flags.ts";

function inRange(spec: FlagSpec, n: number): boolean {
  return (spec.min === undefined || n >= spec.min) && (spec.max === undefined || n <= spec.max);
}

/** "in 1..256", "0 or more", "a positive integer" */
export function rangeText(spec: FlagSpec): string {
  if (spec.max !== undefined) return `in ${spec.min ?? "-inf"}..${spec.max}`;
  return spec.min === 1 && spec.kind === "int" ? "a positive integer" : `${spec.min} or more`;
}

const SUFFIXES: Readonly<Record<string, number>> = { k: 1e3, m: 1e6, g: 1e9, K: 2 ** 10, M: 2 ** 20, G: 2 ** 30 };

/** vLLM's human_readable_int: "25.6k" -> 25600, "1K" -> 1024 (decimals only with the decimal suffixes k/m/g). */
function humanReadableInt(spec: FlagSpec, raw: string): Result<number> | null {
  const m = /^(\d+(?:\.\d+)?)([kKmMgG])$/.exec(raw.trim());
  if (m === null) return null;
  const [, number, suffix] = m as unknown as [string, string, string];
  if (suffix === suffix.toUpperCase() && number.includes(".")) {
    return err(`--${spec.name}: decimals are not allowed with binary suffixes like ${suffix} (got ${raw}); did you mean ${number}${suffix.toLowerCase()}?`);
  }
  return ok(Math.floor(Number(number) * SUFFIXES[suffix]!));
}

function convert(spec: FlagSpec, raw: string): Result<FlagValue> {
  switch (spec.kind) {
    case "string":
      if (spec.choices && !spec.choices.includes(raw)) return err(`--${spec.name} must be one of ${spec.choices.join(", ")} (got "${raw}")`);
      return ok(raw);
    case "int":
    case "float": {
      const readable = spec.humanReadable ? humanReadableInt(spec, raw) : null;
      if (readable !== null && !readable.ok) return readable;
      const n = readable !== null ? readable.value : raw.trim() === "" ? NaN : Number(raw);
      if (spec.kind === "int" ? !Number.isInteger(n) : !Number.isFinite(n)) return err(`--${spec.name} needs ${spec.kind === "int" ? "an integer" : "a number"} (got "${raw}")`);
      return inRange(spec, n) ? ok(n) : err(`--${spec.name} must be ${rangeText(spec)} (got ${raw})`);
    }
    case "list":
      return ok([raw]);
    case "bool":
      if (raw === "true") return ok(true);
      if (raw === "false") return ok(false);
      return err(`--${spec.name} takes no value or true/false (got "${raw}")`);
  }
}

/**
 * `--config FILE` (vLLM's): a YAML mapping of flag names (dashes or underscores) to values, turned into command-line
 * arguments placed before the real ones, so the command line wins, as in vLLM (FlexibleArgumentParser).
 */
function expandConfigFile(specs: readonly FlagSpec[], argv: readonly string[]): Result<string[]> {
  const at = argv.findIndex((a) => a === "--config" || a.startsWith("--config="));
  if (at < 0) return ok([...argv]);
  const path = argv[at] === "--config" ? argv[at + 1] : argv[at]!.slice("--config=".length);
  if (path === undefined || path === "") return err("--config needs a value");
  const rest = [...argv.slice(0, at), ...argv.slice(at + (argv[at] === "--config" ? 2 : 1))];
  let doc: unknown;
  try {
    doc = Bun.YAML.parse(readFileSync(path, "utf8"));
  } catch (e) {
    return err(`--config ${path}: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) return err(`--config ${path}: expected a mapping of flag names to values`);
  const tokens: string[] = [];
  for (const [key, value] of Object.entries(doc as Record<string, unknown>)) {
    const name = key.replace(/_/g, "-");
    const spec = specs.find((s) => s.name === name || s.vllmName === name);
    if (spec === undefined) return err(`--config ${path}: unknown option ${key}`);
    if (value === true) tokens.push(`--${name}`);
    else if (value === false) { if (spec.kind === "bool") tokens.push(`--${name}=false`); }
    // a mapping in a list (a `models:` entry with its own flags) travels as its JSON text
    else if (Array.isArray(value) && spec.kind === "list") tokens.push(`--${name}`, ...value.map((v) => (typeof v === "object" && v !== null ? JSON.stringify(v) : String(v))));
    else tokens.push(`--${name}=${typeof value === "object" && value !== null ? JSON.stringify(value) : String(value)}`);
  }
  return ok([...tokens, ...rest]);
}

/** Parses `argv` (after the command name) against the command's flags. Unknown flags are errors. */
export function parseCommandArgs(command: Command, rawArgv: readonly string[]): Result<Options> {
  const specs = flagsOf(command);
  const expanded = command === "serve" || command === "run-batch" ? expandConfigFile(specs, rawArgv) : ok([...rawArgv]);
  if (!expanded.ok) return expanded;
  const argv = expanded.value;
  const options: Record<string, FlagValue> = {};
  for (const spec of specs) options[spec.name] = spec.default;
  let positionalModel: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    let name: string;
    let inlineValue: string | undefined;
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
      inlineValue = eq >= 0 ? arg.slice(eq + 1) : undefined;
    } else if (arg.startsWith("-") && arg.length > 1) {
      const spec = specs.find((s) => s.alias === arg || s.aliases?.includes(arg));
      if (!spec) return err(`unknown option ${arg} for '${command}' (see fennec ${command} --help)`);
      name = spec.name;
    } else if (POSITIONAL_MODEL.includes(command) && positionalModel === null) {
      // vLLM's `vllm serve [model_tag]`
      positionalModel = arg;
      continue;
    } else if (command === "serve") {
      // `fennec serve a.gguf b.gguf ...`: the models after the first, as --models
      options.models = [...(Array.isArray(options.models) ? options.models : []), arg];
      continue;
    } else {
      return err(`unexpected argument "${arg}" for '${command}' (see fennec ${command} --help)`);
    }
    let spec = specs.find((s) => s.name === name || s.vllmName === name);
    // argparse's BooleanOptionalAction, as vLLM's bool flags take it: --no-X is X=false
    if (!spec && name.startsWith("no-") && inlineValue === undefined) {
      const negated = specs.find((s) => s.kind === "bool" && (s.name === name.slice(3) || s.vllmName === name.slice(3)));
      if (negated) { options[negated.name] = false; continue; }
    }
    if (!spec) return err(`unknown option --${name} for '${command}' (see fennec ${command} --help)`);
    let raw = inlineValue;
    if (spec.kind === "list") {
      // nargs="+": every following argument up to the next flag
      const values = raw !== undefined ? [raw] : [];
      while (raw === undefined && i + 1 < argv.length && !argv[i + 1]!.startsWith("-")) values.push(argv[++i]!);
      if (values.length === 0) return err(`--${spec.name} needs a value`);
      const earlier = options[spec.name];
      options[spec.name] = spec.extend === true && Array.isArray(earlier) ? [...earlier, ...values] : values;
      continue;
    }
    if (raw === undefined) {
      if (spec.kind === "bool") { options[spec.name] = true; continue; }
      raw = argv[++i];
      if (raw === undefined) return err(`--${spec.name} needs a value`);
    }
    const value = convert(spec, raw);
    if (!value.ok) return value;
    options[spec.name] = value.value;
  }
  if (positionalModel !== null) {
    if (options.model !== null && options.model !== positionalModel) return err(`the model is given twice (positional "${positionalModel}" and --model "${String(options.model)}"): give it once`);
    options.model = positionalModel;
  }
  return ok(options);
}
