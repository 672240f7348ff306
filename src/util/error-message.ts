/**
 * The message of anything thrown (an Error's message, anything else as a string), for one-line reports.
 * @example catch (e) { return err(`${path}: cannot read the file (${errorMessage(e)})`); }
 */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
