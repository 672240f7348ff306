/**
 * The model argument of every command and vLLM's Hub flags that fetch it (--revision, --download-dir, --hf-token; the
 * log format of the download lines), as a typed record; and the parsed flags with the model replaced by its local path
 * once commands/model-argument.ts has fetched it.
 */
import type { Command, Options } from "./flags.ts";
import { stringOrNull } from "./flag-values.ts";

export interface ModelArgumentFlags {
  /** the positional model or --model as given; null: the embedded default model */
  readonly model: string | null;
  /** --revision; null: not given (main) */
  readonly revision: string | null;
  readonly downloadDir: string | null;
  readonly hfToken: string | null;
  readonly logFormat: "text" | "json";
}

export function modelArgumentFlags(options: Options): ModelArgumentFlags {
  return {
    model: stringOrNull(options.model),
    revision: stringOrNull(options.revision),
    downloadDir: stringOrNull(options["download-dir"]),
    hfToken: stringOrNull(options["hf-token"]),
    logFormat: options["log-format"] === "json" ? "json" : "text",
  };
}

/** The flags with the model's local path; serve's served name stays the argument as given (vLLM's default: `model`). */
export function withLocalModel(command: Command, options: Options, path: string, givenAs: string): Options {
  const resolved: Record<string, Options[string]> = { ...options, model: path };
  if (command === "serve" && options["served-model-name"] === null) resolved["served-model-name"] = [givenAs];
  return resolved;
}
