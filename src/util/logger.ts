/**
 * The server's log: one line per event in vLLM's shape (vllm/logger.py: `%(levelname)s %(asctime)s [%(fileinfo)s:
 * %(lineno)d] %(message)s`, dates `%m-%d %H:%M:%S`), e.g. `INFO 12-01 10:00:00 [serve.ts] message`, or one JSON object
 * per line for log collectors. fennec names the module that logged instead of a file:line (a compiled binary has no
 * line numbers to give). A multi-line message gets the prefix on every line, as vLLM's NewLineFormatter does, so
 * every line carries its level and time.
 * @example const log = createLogger({ level: "INFO", format: "text", write: (l) => process.stderr.write(l) }).child("serve.ts");
 * log.info("ready");
 */

/** Python's logging levels, which VLLM_LOGGING_LEVEL and --uvicorn-log-level name (uvicorn's "trace" is below DEBUG). */
export const LOG_LEVELS = { TRACE: 5, DEBUG: 10, INFO: 20, WARNING: 30, ERROR: 40, CRITICAL: 50 } as const;
export type LogLevel = keyof typeof LOG_LEVELS;
export type LogFormat = "text" | "json";

export interface Logger {
  /** the module named on each line */
  readonly source: string;
  /** true when a line at `level` would be written (skip building costly messages) */
  enabled(level: LogLevel): boolean;
  log(level: LogLevel, message: string): void;
  debug(message: string): void;
  info(message: string): void;
  warning(message: string): void;
  error(message: string): void;
  /** the same sink and format under another source name, optionally with its own threshold (uvicorn's loggers) */
  child(source: string, level?: LogLevel): Logger;
}

export interface LoggerOptions {
  /** lines below this level are dropped */
  readonly level: LogLevel;
  readonly format: LogFormat;
  /** receives each finished line, newline included */
  readonly write: (line: string) => void;
  /** tests: a fixed clock */
  readonly now?: () => Date;
}

/** "WARN" and lowercase names too, as Python's logging.getLevelName accepts; null for anything else. */
export function parseLogLevel(text: string): LogLevel | null {
  const upper = text.trim().toUpperCase();
  const name = upper === "WARN" ? "WARNING" : upper === "FATAL" ? "CRITICAL" : upper;
  return name in LOG_LEVELS ? (name as LogLevel) : null;
}

const two = (n: number): string => String(n).padStart(2, "0");

/** vLLM's _DATE_FORMAT "%m-%d %H:%M:%S", local time as Python's asctime. */
export function vllmTimestamp(date: Date): string {
  return `${two(date.getMonth() + 1)}-${two(date.getDate())} ${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}`;
}

function formatLine(format: LogFormat, level: LogLevel, source: string, message: string, date: Date): string {
  if (format === "json") return `${JSON.stringify({ time: date.toISOString(), level, source, message })}\n`;
  const prefix = `${level} ${vllmTimestamp(date)} [${source}] `;
  return `${prefix}${message.replace(/\r?\n/g, `\n${prefix}`)}\n`;
}

export function createLogger(options: LoggerOptions, source = "fennec", threshold: LogLevel = options.level): Logger {
  const now = options.now ?? (() => new Date());
  const min = LOG_LEVELS[threshold];
  const logger: Logger = {
    source,
    enabled: (level) => LOG_LEVELS[level] >= min,
    log(level, message) {
      if (LOG_LEVELS[level] < min) return;
      options.write(formatLine(options.format, level, source, message, now()));
    },
    debug: (m) => logger.log("DEBUG", m),
    info: (m) => logger.log("INFO", m),
    warning: (m) => logger.log("WARNING", m),
    error: (m) => logger.log("ERROR", m),
    child: (childSource, level) => createLogger(options, childSource, level ?? threshold),
  };
  return logger;
}
