/**
 * A user-facing error for the CLI: printed as one line (`fennec: <message>`) with exit code 2, never a stack trace.
 * Throw it from command modules for bad flags, missing files, bad models.
 * @example throw new CliError(`model file not found: ${path}`);
 */
export class CliError extends Error {
  override readonly name = "CliError";
}
