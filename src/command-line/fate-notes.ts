/**
 * The vLLM flags fennec has no use for (FLAGS' fate rows), when given: one start-up note each when the value changes
 * nothing, else the refusal of the first refused one (docs/vllm-flags.md lists them).
 */
import { err, ok, type Result } from "../util/result.ts";
import { flagsOf, type Command, type Options } from "./flags.ts";

/** The vLLM flags of FLAGS' fate rows that were given: one note each, or the refusal of the first refused one. */
export function vllmFates(command: Command, options: Options): Result<string[]> {
  const notes: string[] = [];
  for (const spec of flagsOf(command)) {
    const value = options[spec.name];
    if (spec.fate === undefined || value === null || value === undefined) continue;
    const shown = spec.kind === "bool" ? `--${value === false ? "no-" : ""}${spec.name}` : `--${spec.name} ${Array.isArray(value) ? value.join(" ") : String(value)}`;
    // a feature fennec lacks, turned off (argparse's --no-X): what fennec does anyway
    if (value === false) { notes.push(`${shown} has no effect on fennec: ${spec.fate.noop ?? "fennec does not have this feature, so it is off"}`); continue; }
    // --tokenizer naming the model file itself changes nothing
    const accepted = spec.name === "tokenizer" ? value === options.model : spec.fate.noop !== undefined && (spec.fate.accepts?.(value) ?? true);
    if (accepted) notes.push(`${shown} has no effect on fennec: ${spec.fate.noop ?? "the GGUF file's own tokenizer is used"}`);
    else return err(`${shown} is not supported: ${spec.fate.refuse ?? "fennec does not implement it"}`);
  }
  return ok(notes);
}
