/**
 * The shape of one row of the flags table (flags.ts FLAGS, vllm-fates.ts VLLM_FATES): its kind, default, commands,
 * help, range and, for vLLM's flags fennec has no use for, its fate. Apart from flags.ts so the fates table can
 * use it without an import circle.
 */
export type Command = "serve" | "generate" | "tokenize" | "run-batch" | "chat" | "bench serve" | "bench throughput" | "bench latency" | "inspect" | "proxy" | "pull";

/** list: one or more values after the flag (argparse nargs="+"), as vLLM's --api-key and --served-model-name */
export type FlagKind = "string" | "int" | "float" | "bool" | "list";
export type FlagValue = string | number | boolean | readonly string[] | null;

/**
 * What fennec does with a vLLM flag it has no use for (docs/vllm-flags.md lists every one). Given with a value that
 * `accepts` (or any value when `accepts` is absent): accepted, and serve logs one line `<flag> has no effect on
 * fennec: <noop>`. Any other value, or any value when there is no `noop`: refused (exit 2) with `refuse`, which says
 * what to use instead.
 */
export interface VllmFate {
  readonly noop?: string;
  readonly accepts?: (value: FlagValue) => boolean;
  readonly refuse?: string;
}

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
  /** vLLM flags fennec does not implement: accepted with one log line, or refused (see VllmFate) */
  readonly fate?: VllmFate;
  /** other spellings vLLM takes (short options such as -tp) */
  readonly aliases?: readonly string[];
  /** list flags: a repeated flag adds its values to the earlier ones (argparse action="extend") instead of replacing them */
  readonly extend?: boolean;
}

