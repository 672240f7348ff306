/**
 * vLLM's metric deprecation policy (vllm/v1/metrics/loggers.py with --show-hidden-metrics-for-version, vllm/config/observability.py): a metric deprecated in X.Y is shown with
 * "DEPRECATED: Use <new> instead." in its help during X.Y, hidden in X.Y+1 unless the server runs with
 * `--show-hidden-metrics-for-version=X.Y`, and removed from X.Y+2 on. Like vLLM, the escape hatch only works for
 * exactly the previous minor ("0.1" when running 0.2.x); any other well-formed version is accepted but shows nothing.
 * A malformed version string is a start-up error.
 */
import { err, ok, type Result } from "../util/result.ts";

export interface Version {
  readonly major: number;
  readonly minor: number;
}

/** What a deprecated metric does in the running version. */
export type DeprecationPhase = "current" | "deprecated" | "hidden" | "removed";

/** A PEP 440-style release (`0.2`, `0.2.0`, `1.0.0rc1`, `0.2.0.dev3+g1234`); only major and minor matter here. */
const VERSION_PATTERN = /^v?(\d+)\.(\d+)(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[a-z0-9.]+)?$/i;

/** @example parseVersion("0.2.0") // ok({ major: 0, minor: 2 }) */
export function parseVersion(text: string): Result<Version> {
  const m = VERSION_PATTERN.exec(text.trim());
  if (!m) return err(`"${text}" is not a version (expected MAJOR.MINOR such as 0.1)`);
  return ok({ major: Number(m[1]), minor: Number(m[2]) });
}

/** The phase of a metric deprecated in `deprecatedIn` when the running version is `running` (minors of the same major). */
export function phaseOf(deprecatedIn: Version, running: Version): DeprecationPhase {
  if (running.major !== deprecatedIn.major) return running.major > deprecatedIn.major ? "removed" : "current";
  const minorsSince = running.minor - deprecatedIn.minor;
  if (minorsSince < 0) return "current";
  if (minorsSince === 0) return "deprecated";
  if (minorsSince === 1) return "hidden";
  return "removed";
}

/** vLLM's `_prev_minor_version_was`: true only when the flag is exactly "MAJOR.(MINOR-1)" of the running version. */
export function showHiddenFor(flag: string | null, running: Version): boolean {
  if (flag === null) return false;
  return flag.trim() === `${running.major}.${running.minor - 1}`;
}

export interface DeprecationGate {
  readonly running: Version;
  readonly showHidden: boolean;
}

/**
 * Validates the flag and builds the gate. An error names the flag and the bad value (one line for the CLI).
 * @example makeDeprecationGate("0.2.0", "0.1") // ok({ running: {0,2}, showHidden: true })
 */
export function makeDeprecationGate(runningVersion: string, showHiddenFlag: string | null): Result<DeprecationGate> {
  const running = parseVersion(runningVersion);
  if (!running.ok) return err(`fennec's own version: ${running.error}`);
  if (showHiddenFlag !== null) {
    const parsed = parseVersion(showHiddenFlag);
    if (!parsed.ok) return err(`--show-hidden-metrics-for-version: ${parsed.error}`);
  }
  return ok({ running: running.value, showHidden: showHiddenFor(showHiddenFlag, running.value) });
}

/** Whether a metric with this `deprecatedIn` is registered at all. */
export function isVisible(deprecatedIn: string | undefined, gate: DeprecationGate): boolean {
  if (deprecatedIn === undefined) return true;
  const since = parseVersion(deprecatedIn);
  if (!since.ok) throw new Error(`catalogue: bad deprecatedIn "${deprecatedIn}"`);
  const phase = phaseOf(since.value, gate.running);
  return phase === "current" || phase === "deprecated" || (phase === "hidden" && gate.showHidden);
}

/** The help text as exposed: deprecated and re-shown hidden metrics carry vLLM's note. */
export function helpWithDeprecation(help: string, deprecatedIn: string | undefined, replacement: string | undefined, gate: DeprecationGate): string {
  if (deprecatedIn === undefined) return help;
  const since = parseVersion(deprecatedIn);
  if (!since.ok || phaseOf(since.value, gate.running) === "current") return help;
  return replacement === undefined ? `${help} DEPRECATED.` : `${help} DEPRECATED: Use ${replacement} instead.`;
}
