#!/usr/bin/env bun
/**
 * fennec's entry point: parses the command line and hands over to one command module. Wiring only.
 * Failures are one line on stderr: exit code 2 for a usage error (CliError), 1 for a failed run (anything else); the
 * stack trace only with VLLM_LOGGING_LEVEL=DEBUG.
 */
import pkg from "../package.json" with { type: "json" };
import { COMMANDS, type Command, type Options } from "./command-line/flags.ts";
import { commandHelp } from "./command-line/help.ts";
import { parseCommandArgs } from "./command-line/parse-args.ts";
import { bestLevel } from "./backend/wasm/kernel-module.ts";
import { currentTarget } from "./util/build-target.ts";
import { CliError, EXIT_RUNTIME, EXIT_USAGE, RuntimeFailure } from "./util/cli-error.ts";
import { parseLogLevel } from "./util/logger.ts";

type CommandMain = (options: Options) => Promise<number>;

/** Each command lives in its own module, loaded only when used (start-up time matters). */
const COMMAND_MODULES: Readonly<Record<Command, () => Promise<{ main: CommandMain }>>> = {
  serve: () => import("./commands/serve.ts"),
  generate: () => import("./commands/generate.ts"),
  tokenize: () => import("./commands/tokenize.ts"),
  "run-batch": () => import("./commands/run-batch.ts"),
  chat: () => import("./commands/chat.ts"),
  "bench serve": () => import("./commands/bench-serve.ts"),
  "bench throughput": () => import("./commands/bench-throughput.ts"),
  "bench latency": () => import("./commands/bench-latency.ts"),
  inspect: () => import("./commands/inspect.ts"),
  proxy: () => import("./commands/proxy.ts"),
  pull: () => import("./commands/pull.ts"),
};

/** `fennec bench serve ...` names the command in two words. */
function commandWords(argv: readonly string[]): [string | undefined, string[]] {
  const [first, ...rest] = argv;
  if (first === "bench" && rest[0] !== undefined && !rest[0].startsWith("-")) return [`bench ${rest[0]}`, rest.slice(1)];
  return [first, rest];
}

const VERSION_WHAT = "Print the version, the build target and the kernel build this machine runs.";
const VERSION_HELP = [
  "Usage: fennec version   (also: fennec --version, fennec -V)", "", VERSION_WHAT,
  "One line: `fennec <release> (<os>-<arch>, kernels <build>)`, e.g. `fennec 0.2.0 (linux-x64, kernels relaxed-simd)`.",
  "The kernel build is the WASM SIMD level this CPU runs (relaxed-simd, simd or scalar), chosen at start-up.",
  "", "Options:", `  ${"-h, --help".padEnd(17)} Show this help`,
].join("\n");

function topHelp(): string {
  const lines = [`fennec ${pkg.version}: a vLLM-compatible LLM server for CPUs and the edge`, "", "Usage: fennec <command> [options]", "", "Commands:"];
  for (const [name, what] of Object.entries(COMMANDS)) lines.push(`  ${name.padEnd(17)} ${what}`);
  lines.push(`  ${"version".padEnd(17)} ${VERSION_WHAT}`);
  lines.push("", "Options:", `  ${"-h, --help".padEnd(17)} Show help (also: fennec <command> --help)`, `  ${"-V, --version".padEnd(17)} Print the version (as \`fennec version\`)`);
  return lines.join("\n");
}

function fail(message: string, code = EXIT_USAGE): number {
  process.stderr.write(`fennec: ${message}\n`);
  return code;
}

/** `fennec 0.2.0 (linux-arm64, kernels relaxed-simd)`: the release, the build target, the kernel build chosen here. */
export function versionLine(): string {
  return `fennec ${pkg.version} (${currentTarget()}, kernels ${bestLevel()})`;
}

const debugEnabled = (): boolean => parseLogLevel(process.env.VLLM_LOGGING_LEVEL ?? "") === "DEBUG";

export async function runCli(argv: readonly string[]): Promise<number> {
  const [first, rest] = commandWords(argv);
  if (first === undefined || first === "-h" || first === "--help" || first === "help") {
    process.stdout.write(topHelp() + "\n");
    return 0;
  }
  if (first === "--version" || first === "-V" || first === "-v" || first === "version") {
    if (rest.includes("-h") || rest.includes("--help")) { process.stdout.write(`${VERSION_HELP}\n`); return 0; }
    if (first === "version" && rest.length > 0) return fail(`version takes no arguments (got "${rest[0]}"; see fennec version --help)`);
    process.stdout.write(`${versionLine()}\n`);
    return 0;
  }
  if (first === "bench" && !(first in COMMANDS)) return fail("bench needs what to measure: fennec bench serve|throughput|latency (see fennec bench serve --help)");
  if (!(first in COMMANDS)) return fail(`unknown command "${first}" (commands: ${[...Object.keys(COMMANDS), "version"].join(", ")}; see fennec --help)`);
  const command = first as Command;
  if (rest.includes("-h") || rest.includes("--help")) {
    process.stdout.write(commandHelp(command) + "\n");
    return 0;
  }
  const parsed = parseCommandArgs(command, rest);
  if (!parsed.ok) return fail(parsed.error);
  try {
    const { main } = await COMMAND_MODULES[command]();
    // a Hugging Face model is fetched (or found in the cache) before the command sees a local path; pull does it itself
    const options = command === "pull" ? parsed.value : await (await import("./commands/model-argument.ts")).resolveModelArgument(command, parsed.value);
    return await main(options);
  } catch (e) {
    if (debugEnabled() && e instanceof Error && e.stack) process.stderr.write(`${e.stack}\n`);
    if (e instanceof CliError) return fail(e.message);
    if (e instanceof RuntimeFailure) return fail(e.message, EXIT_RUNTIME);
    // anything else is a bug or an environment failure (a GPU adapter, a Worker): still one line, exit 1
    return fail(`${command} failed: ${e instanceof Error ? `${e.name}: ${e.message.split("\n")[0]}` : String(e)}`, EXIT_RUNTIME);
  }
}

if (import.meta.main) {
  const code = await runCli(process.argv.slice(2));
  // serve keeps running on its own; every other command exits with its code
  if (code !== -1) process.exit(code);
}
