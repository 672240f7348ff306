/** `fennec serve`: not implemented yet (see the issues). Returns an exit code, or -1 for a long-running server. */
import type { Options } from "../config.ts";
import { CliError } from "../util/cli-error.ts";

export async function main(_options: Options): Promise<number> {
  throw new CliError("'serve' is not implemented yet");
}
