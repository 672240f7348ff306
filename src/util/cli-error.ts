/**
 * The CLI's two kinds of failure, each printed as one line (`fennec: <message>`), never a stack trace (the stack
 * only with VLLM_LOGGING_LEVEL=DEBUG):
 * - CliError, exit code 2: the command line (or a config file it names) is wrong; fix the flags. Throw it from
 *   command modules for bad flags and bad config files.
 * - RuntimeFailure, exit code 1: the command line is fine but the run failed: a model file that is missing or not a
 *   model, a port in use, an engine that does not start.
 * @example throw new CliError(`--port must be in 0..65535 (got ${port})`);
 * @example throw new RuntimeFailure(`cannot listen on ${host}:${port}: address in use`);
 */
export class CliError extends Error {
  override readonly name = "CliError";
}

export class RuntimeFailure extends Error {
  override readonly name = "RuntimeFailure";
}

/** The process exit code for a usage error (argparse's) and for a failed run. */
export const EXIT_USAGE = 2;
export const EXIT_RUNTIME = 1;
