#!/usr/bin/env bun
/**
 * fennec's entry point: parses the command line and hands over to one command module. Wiring only.
 * CLI errors are one line on stderr and exit code 2.
 */
import pkg from "../package.json" with { type: "json" };
import { COMMANDS, commandHelp, parseCommandArgs, type Command, type Options } from "./config.ts";
import { CliError } from "./util/cli-error.ts";

type CommandMain = (options: Options) => Promise<number>;

/** Each command lives in its own module, loaded only when used (start-up time matters). */
const COMMAND_MODULES: Readonly<Record<Command, () => Promise<{ main: CommandMain }>>> = {
  serve: () => import("./commands/serve.ts"),
  generate: () => import("./commands/generate.ts"),
  tokenize: () => import("./commands/tokenize.ts"),
  "run-batch": () => import("./commands/run-batch.ts"),
};

function topHelp(): string {
  const lines = [`fennec ${pkg.version}: a vLLM-compatible LLM server for CPUs and the edge`, "", "Usage: fennec <command> [options]", "", "Commands:"];
  for (const [name, what] of Object.entries(COMMANDS)) lines.push(`  ${name.padEnd(12)} ${what}`);
  lines.push("", "Options:", `  ${"-h, --help".padEnd(12)} Show help (also: fennec <command> --help)`, `  ${"--version".padEnd(12)} Print the version`);
  return lines.join("\n");
}

function fail(message: string): number {
  process.stderr.write(`fennec: ${message}\n`);
  return 2;
}

export async function runCli(argv: readonly string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === "-h" || first === "--help" || first === "help") {
    process.stdout.write(topHelp() + "\n");
    return 0;
  }
  if (first === "--version" || first === "-v") {
    process.stdout.write(`fennec ${pkg.version}\n`);
    return 0;
  }
  if (!(first in COMMANDS)) return fail(`unknown command "${first}" (commands: ${Object.keys(COMMANDS).join(", ")}; see fennec --help)`);
  const command = first as Command;
  if (rest.includes("-h") || rest.includes("--help")) {
    process.stdout.write(commandHelp(command) + "\n");
    return 0;
  }
  const parsed = parseCommandArgs(command, rest);
  if (!parsed.ok) return fail(parsed.error);
  try {
    const { main } = await COMMAND_MODULES[command]();
    return await main(parsed.value);
  } catch (e) {
    if (e instanceof CliError) return fail(e.message);
    // anything else is a bug or an environment failure (a GPU adapter, a Worker): still one line, exit 1
    process.stderr.write(`fennec: ${command} failed: ${e instanceof Error ? `${e.name}: ${e.message.split("\n")[0]}` : String(e)}\n`);
    return 1;
  }
}

if (import.meta.main) {
  const code = await runCli(process.argv.slice(2));
  // serve keeps running on its own; every other command exits with its code
  if (code !== -1) process.exit(code);
}
