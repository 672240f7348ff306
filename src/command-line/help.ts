/**
 * `fennec <command> --help`: the usage line, what the command does, and every flag of FLAGS it takes with its
 * range, suffixes and default.
 */
import { COMMANDS, flagsOf, POSITIONAL_MODEL, type Command } from "./flags.ts";
import { rangeText } from "./parse-args.ts";

export function commandHelp(command: Command): string {
  const usage = POSITIONAL_MODEL.includes(command) ? `Usage: fennec ${command} [MODEL] [options]` : `Usage: fennec ${command} [options]`;
  const lines = [usage, "", COMMANDS[command], "", ...(POSITIONAL_MODEL.includes(command) ? ["MODEL: a GGUF file or a Hugging Face repository (org/repo[:QUANT]), as vLLM's positional model (same as --model).", ""] : []), "Options:"];
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
