/**
 * The message of anything thrown (an Error's message, anything else as a string), for one-line reports.
 * @example catch (e) { return err(`${path}: cannot read the file (${errorMessage(e)})`); }
 */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * An unexpected error as one log line: its name, message and the first stack frame that points at a file (where it was
 * thrown), never the whole stack (logs are one line per event).
 * @example log(`internal error: ${oneLineError(e)}`) // "TypeError: Invalid URL (at src/server/docs.ts:57:74)"
 */
export function oneLineError(e: unknown): string {
  if (!(e instanceof Error)) return String(e).replace(/\s*\n\s*/g, " ");
  const frame = /\n\s+at (?:.*?\()?([^()\s]+:\d+:\d+)\)?/.exec(e.stack ?? "")?.[1];
  const text = `${e.name}: ${e.message}`.replace(/\s*\n\s*/g, " ");
  return frame === undefined ? text : `${text} (at ${frame})`;
}
