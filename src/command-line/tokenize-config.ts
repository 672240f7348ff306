/**
 * `tokenize`'s flags as one typed config.
 */
import { err, ok, type Result } from "../util/result.ts";
import type { Options } from "./flags.ts";
import { stringOrNull } from "./flag-values.ts";

export interface TokenizeConfig {
  readonly model: string | null;
  readonly text: string;
  readonly addSpecial: boolean;
  readonly json: boolean;
}

/** `tokenize`'s flags as one typed config; --text is required. */
export function tokenizeConfig(options: Options): Result<TokenizeConfig> {
  const text = stringOrNull(options.text);
  if (text === null) return err("tokenize needs --text <string> (see fennec tokenize --help)");
  return ok({ model: stringOrNull(options.model), text, addSpecial: options["add-special"] === true, json: options.json === true });
}
