/**
 * `keep_alive` (ollama api/types.go Duration.UnmarshalJSON): a JSON number is seconds (fractions allowed), a string is
 * a Go duration ("5m", "1h30m", "300ms", "-1m"), any negative means forever; omitted = 5 minutes (OLLAMA_KEEP_ALIVE's
 * default). What serves the app applies it: behind the several-models registry (server/model-router.ts) the model is
 * unloaded when idle past it, `0` unloads it as soon as the request ends, and the next request loads it again, as
 * Ollama does; a server of one model (server/single-model-keep-alive.ts) unloads its engine on `0` the same way, and
 * otherwise the value sets the expiry /api/ps reports (the last request's end + keep_alive). An app with nothing in
 * front to unload it refuses `0` with a 400 that says so.
 * @example parseKeepAlive("1h30m") // 5400000
 */
import { ApiError } from "../errors.ts";

/** Ollama's default keep-alive: 5 minutes. */
export const DEFAULT_KEEP_ALIVE_MS = 5 * 60 * 1000;

/** Go's time.ParseDuration units, in milliseconds. */
const GO_DURATION_UNITS_MS: Readonly<Record<string, number>> = { ns: 1e-6, us: 1e-3, "µs": 1e-3, "μs": 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Go's time.ParseDuration: `[-+]` then one or more `<number><unit>`; "0" alone needs no unit. Null when invalid. */
export function parseGoDurationMs(text: string): number | null {
  const match = /^([-+]?)(.*)$/.exec(text)!;
  const sign = match[1] === "-" ? -1 : 1;
  const rest = match[2]!;
  if (rest === "0") return 0;
  if (rest === "") return null;
  let total = 0;
  const part = /(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let at = 0;
  while (at < rest.length) {
    part.lastIndex = at;
    const m = part.exec(rest);
    if (m === null) return null;
    total += Number(m[1]) * GO_DURATION_UNITS_MS[m[2]!]!;
    at = part.lastIndex;
  }
  return sign * total;
}

/**
 * A request's keep_alive in ms: Infinity = forever; absent = the default. `unloadable`: something in front of this
 * app applies keep_alive (0 unloads the model); otherwise 0 is refused. Throws Ollama-style 400s.
 */
export function parseKeepAlive(value: unknown, unloadable = false): number {
  if (value === undefined || value === null) return DEFAULT_KEEP_ALIVE_MS;
  let ms: number | null;
  if (typeof value === "number" && Number.isFinite(value)) ms = value * 1000;
  else if (typeof value === "string") {
    ms = parseGoDurationMs(value.trim());
    if (ms === null) throw new ApiError("badRequest", `time: invalid duration "${value}" (keep_alive takes a number of seconds or a duration such as "5m", "1h30m" or "-1")`);
  } else throw new ApiError("badRequest", "keep_alive must be a number of seconds or a duration string such as \"5m\"");
  if (ms < 0) return Infinity;
  if (ms === 0 && !unloadable) {
    throw new ApiError("badRequest", "keep_alive 0 asks to unload the model, but this app alone cannot unload it (fennec serve, which unloads on keep_alive 0, puts that in front): leave keep_alive out, or give a positive duration or -1");
  }
  return ms;
}

/** Far enough that a client reading it as a date sees "forever" (Ollama stores max int64 ns, about 292 years). */
const FOREVER_MS = Date.UTC(2318, 0, 1);

/** When the served model "expires" for /api/ps: the end of the latest request plus its keep_alive. */
export class KeepAliveClock {
  private expiresAtMs: number;

  constructor(startMs: number) {
    this.expiresAtMs = startMs + DEFAULT_KEEP_ALIVE_MS;
  }

  /** a request ended at `endMs` asking for `keepAliveMs` (Ollama: the latest request's keep_alive wins) */
  touch(endMs: number, keepAliveMs: number): void {
    this.expiresAtMs = keepAliveMs === Infinity ? FOREVER_MS : endMs + keepAliveMs;
  }

  /** RFC 3339, as Ollama's expires_at */
  expiresAt(): string {
    return new Date(this.expiresAtMs).toISOString();
  }
}
