/**
 * Every CLI flag once: name, kind, default, the commands that take it, and its help text. `parseCommandArgs` turns
 * argv into one validated options object; nothing else reads argv. The one environment variable vLLM honours
 * (VLLM_API_KEY) is read by serve, where --api-key is, and named in that flag's help.
 * To add a flag: add one row to FLAGS (keep rows grouped by the command family that owns them; give numbers their
 * min/max there, so every command rejects a bad value with the same one line).
 */
import { err, ok, type Result } from "./util/result.ts";

export type Command = "serve" | "generate" | "tokenize" | "run-batch";
export const COMMANDS: Readonly<Record<Command, string>> = {
  serve: "Serve the OpenAI-compatible API (vLLM-style) on HTTP.",
  generate: "Generate text from a prompt and print it.",
  tokenize: "Print the token ids of a text.",
  "run-batch": "Run an OpenAI batch file (JSONL) offline, like `vllm run-batch`.",
};

type FlagKind = "string" | "int" | "float" | "bool";
type FlagValue = string | number | boolean | null;

export interface FlagSpec {
  readonly name: string;
  readonly kind: FlagKind;
  readonly default: FlagValue;
  readonly commands: readonly Command[];
  readonly help: string;
  /** for string flags with a fixed set of values */
  readonly choices?: readonly string[];
  /** short alias such as "-i" */
  readonly alias?: string;
  /** what the value is, for --help (default: the choices, else the kind) */
  readonly metavar?: string;
  /** for int and float flags: the smallest and largest accepted value, checked at parse time for every command */
  readonly min?: number;
  readonly max?: number;
  /** int flags that take vLLM's human-readable suffixes (1k = 1000, 1K = 1024, 25.6k, 2M, 1G) */
  readonly humanReadable?: boolean;
  /** vLLM's name for the same flag, accepted too */
  readonly vllmName?: string;
}

const ALL: readonly Command[] = ["serve", "generate", "tokenize", "run-batch"];
/** commands that run the model (generate runs it in-process, without the engine's scheduler or pipelines) */
const MODEL: readonly Command[] = ["serve", "generate", "run-batch"];
const ENGINE: readonly Command[] = ["serve", "run-batch"];

export const FLAGS: readonly FlagSpec[] = [
  // model
  { name: "model", kind: "string", metavar: "path", default: null, commands: ALL, help: "Path to a GGUF model file. Default: the embedded stories260K model." },
  // generate / tokenize
  { name: "prompt", kind: "string", metavar: "text", default: "", commands: ["generate"], help: 'Prompt text. An empty prompt starts from BOS.' },
  { name: "max-tokens", kind: "int", default: 64, min: 0, commands: ["generate"], help: "Maximum number of tokens to generate." },
  { name: "temperature", kind: "float", default: 0.8, min: 0, commands: ["generate"], help: "Sampling temperature; 0 is greedy." },
  { name: "seed", kind: "int", default: null, commands: ["generate"], help: "Random seed for reproducible sampling. Default: a new seed each run." },
  { name: "json", kind: "bool", default: false, commands: ["generate", "tokenize"], help: 'Print one JSON line instead of text: {"token_ids": [...]} (generate adds "text": the generated ids and text only).' },
  { name: "text", kind: "string", metavar: "text", default: null, commands: ["tokenize"], help: "Text to tokenize (required)." },
  { name: "add-special", kind: "bool", default: false, commands: ["tokenize"], help: "Add BOS/EOS as the model does and parse special-token texts." },
  // engine (vLLM names)
  { name: "threads", kind: "int", default: null, min: 1, max: 256, commands: MODEL, help: "Kernel threads. Default: the number of cores." },
  { name: "device", kind: "string", default: "cpu", commands: MODEL, choices: ["cpu", "webgpu"], help: "Run the model on the WASM CPU kernels or on a WebGPU adapter." },
  { name: "max-num-seqs", kind: "int", default: 16, min: 1, commands: ENGINE, help: "Maximum number of sequences running in one engine step." },
  { name: "max-num-batched-tokens", kind: "int", default: 512, min: 1, humanReadable: true, commands: ENGINE, help: "Token budget of one engine step (prefill chunks plus decode tokens)." },
  { name: "max-model-len", kind: "int", default: null, min: 1, humanReadable: true, commands: ENGINE, help: "Maximum prompt plus output length. Default: the model's context length." },
  { name: "block-size", kind: "int", default: 16, min: 1, commands: ENGINE, help: "Tokens per KV cache block." },
  { name: "kv-cache-memory", vllmName: "kv-cache-memory-bytes", kind: "int", metavar: "bytes", default: null, min: 1, humanReadable: true, commands: ENGINE, help: "Bytes for the KV cache (vLLM: --kv-cache-memory-bytes, also accepted). Default: a share of free memory, capped by what max-num-seqs x max-model-len needs." },
  { name: "no-enable-prefix-caching", kind: "bool", default: false, commands: ENGINE, help: "Turn prefix caching off (on by default)." },
  // vLLM flags that vLLM's own test servers pass and that mean nothing different on fennec: accepted so those command lines run
  { name: "enable-chunked-prefill", kind: "bool", default: false, commands: ENGINE, help: "Accepted for vLLM command lines: fennec always chunks long prefills (see --max-num-batched-tokens)." },
  { name: "enforce-eager", kind: "bool", default: false, commands: ENGINE, help: "Accepted for vLLM command lines: fennec has no CUDA graphs, it always runs eagerly." },
  { name: "dtype", kind: "string", default: "auto", commands: ENGINE, choices: ["auto", "half", "float16", "bfloat16", "float", "float32"], help: "Accepted for vLLM command lines: fennec keeps the GGUF weight types and computes activations in float32." },
  // server
  { name: "host", kind: "string", metavar: "address", default: "127.0.0.1", commands: ["serve"], help: "Address to listen on." },
  { name: "port", kind: "int", default: 8000, min: 0, max: 65535, commands: ["serve"], help: "Port to listen on." },
  { name: "served-model-name", kind: "string", metavar: "name", default: null, commands: ["serve"], help: "Model name in the API. Default: the model file's name." },
  { name: "api-key", kind: "string", metavar: "token", default: null, commands: ["serve"], help: "Require this bearer token on /v1 endpoints. Default: $VLLM_API_KEY, if set." },
  { name: "enable-per-request-metrics", kind: "bool", default: false, commands: ["serve"], help: "Add a `metrics` object with timings to each response." },
  { name: "enable-force-include-usage", kind: "bool", default: false, commands: ["serve"], help: "Send a final usage chunk on every stream, as if include_usage were set." },
  { name: "enable-prompt-tokens-details", kind: "bool", default: false, commands: ["serve"], help: "Report usage.prompt_tokens_details.cached_tokens (prefix-cache hits) in responses." },
  { name: "enable-server-load-tracking", kind: "bool", default: false, commands: ["serve"], help: "Count the generation requests in flight for GET /load (0 otherwise)." },
  { name: "enable-request-id-headers", kind: "bool", default: false, commands: ["serve"], help: "Answer every request with an X-Request-Id header (the request's own, else a new id)." },
  { name: "disable-log-stats", kind: "bool", default: false, commands: ["serve", "run-batch"], help: "Disable engine stats (and the engine series on /metrics)." },
  { name: "log-stats", kind: "bool", default: false, commands: ["serve", "run-batch"], help: "Print the omni stats tables after each request (online) or after the batch (offline)." },
  { name: "enable-mfu-metrics", kind: "bool", default: false, commands: ["serve"], help: "Add the estimated FLOPs / bytes counters to /metrics." },
  { name: "show-hidden-metrics-for-version", kind: "string", metavar: "version", default: null, commands: ["serve"], help: "Show metrics hidden since the given previous version (e.g. 0.1)." },
  // pipelines
  { name: "pipeline", kind: "string", default: "single", commands: ENGINE, choices: ["single", "pd"], help: "single: one engine; pd: disaggregated prefill and decode stages." },
  { name: "stage-config", kind: "string", metavar: "path", default: null, commands: ENGINE, help: "YAML or JSON file describing a chain of stages (see docs/pipelines.md)." },
  // run-batch
  { name: "input-file", alias: "-i", kind: "string", metavar: "path", default: null, commands: ["run-batch"], help: "Input JSONL batch file (required)." },
  { name: "output-file", alias: "-o", kind: "string", metavar: "path", default: null, commands: ["run-batch"], help: "Output JSONL file (required)." },
];

export type Options = Readonly<Record<string, FlagValue>>;

/** Flags of one command, for --help and parsing. */
export function flagsOf(command: Command): FlagSpec[] {
  return FLAGS.filter((f) => f.commands.includes(command));
}

function inRange(spec: FlagSpec, n: number): boolean {
  return (spec.min === undefined || n >= spec.min) && (spec.max === undefined || n <= spec.max);
}

/** "in 1..256", "0 or more", "a positive integer" */
function rangeText(spec: FlagSpec): string {
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
    case "bool":
      if (raw === "true") return ok(true);
      if (raw === "false") return ok(false);
      return err(`--${spec.name} takes no value or true/false (got "${raw}")`);
  }
}

/** Parses `argv` (after the command name) against the command's flags. Unknown flags are errors. */
export function parseCommandArgs(command: Command, argv: readonly string[]): Result<Options> {
  const specs = flagsOf(command);
  const options: Record<string, FlagValue> = {};
  for (const spec of specs) options[spec.name] = spec.default;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    let name: string;
    let inlineValue: string | undefined;
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
      inlineValue = eq >= 0 ? arg.slice(eq + 1) : undefined;
    } else if (arg.startsWith("-") && arg.length > 1) {
      const spec = specs.find((s) => s.alias === arg);
      if (!spec) return err(`unknown option ${arg} for '${command}' (see fennec ${command} --help)`);
      name = spec.name;
    } else {
      return err(`unexpected argument "${arg}" for '${command}' (see fennec ${command} --help)`);
    }
    const spec = specs.find((s) => s.name === name || s.vllmName === name);
    if (!spec) return err(`unknown option --${name} for '${command}' (see fennec ${command} --help)`);
    let raw = inlineValue;
    if (raw === undefined) {
      if (spec.kind === "bool") { options[spec.name] = true; continue; }
      raw = argv[++i];
      if (raw === undefined) return err(`--${spec.name} needs a value`);
    }
    const value = convert(spec, raw);
    if (!value.ok) return value;
    options[spec.name] = value.value;
  }
  return ok(options);
}

export function commandHelp(command: Command): string {
  const lines = [`Usage: fennec ${command} [options]`, "", COMMANDS[command], "", "Options:"];
  for (const f of flagsOf(command)) {
    const flag = `${f.alias ? `${f.alias}, ` : ""}--${f.name}${f.kind === "bool" ? "" : ` <${f.metavar ?? (f.choices ? f.choices.join("|") : f.kind)}>`}`;
    const def = f.default === null || f.default === false ? "" : ` (default: ${JSON.stringify(f.default)})`;
    const range = f.min === undefined && f.max === undefined ? "" : ` Must be ${rangeText(f)}.`;
    const suffixes = f.humanReadable ? " Takes k/m/g (10^3/10^6/10^9) and K/M/G (2^10/2^20/2^30) suffixes, as vLLM does." : "";
    lines.push(`  ${flag.padEnd(44)} ${f.help}${range}${suffixes}${def}`);
  }
  lines.push(`  ${"-h, --help".padEnd(44)} Show this help.`);
  return lines.join("\n");
}
