/**
 * A one-line progress bar on stderr, drawn only on a TTY and only for work big enough to notice (a large model
 * loading): pipes and small models see nothing. Redraws are throttled so the bar costs nothing.
 * @example const bar = createProgressBar("loading model"); bar.update(done, total); bar.done();
 */

export interface ProgressBar {
  update(doneUnits: number, totalUnits: number): void;
  /** clears the line (if anything was drawn) */
  done(): void;
}

/** the part of a terminal stream the bar uses (process.stderr, or a fake in tests) */
export interface ProgressStream {
  readonly isTTY?: boolean;
  write(text: string): unknown;
}

export interface ProgressOptions {
  /** where to draw; default process.stderr */
  readonly stream?: ProgressStream;
  /** draw only when the total is at least this (bytes); default 64 MiB */
  readonly minTotal?: number;
  readonly widthChars?: number;
  readonly redrawIntervalMs?: number;
  /** the counts after the bar; default MiB ("12/345 MiB") */
  readonly format?: (doneUnits: number, totalUnits: number) => string;
}

const MIB = 1024 * 1024;

export function createProgressBar(label: string, options: ProgressOptions = {}): ProgressBar {
  const stream: ProgressStream = options.stream ?? process.stderr;
  const minTotal = options.minTotal ?? 64 * MIB;
  const width = options.widthChars ?? 30;
  const intervalMs = options.redrawIntervalMs ?? 100;
  const format = options.format ?? ((done: number, total: number) => `${(done / MIB).toFixed(0)}/${(total / MIB).toFixed(0)} MiB`);
  let lastDrawMs = -Infinity;
  let drawn = false;
  return {
    update(doneUnits, totalUnits) {
      if (!stream.isTTY || totalUnits < minTotal) return;
      const now = performance.now();
      if (now - lastDrawMs < intervalMs && doneUnits < totalUnits) return;
      lastDrawMs = now;
      const fraction = totalUnits > 0 ? Math.min(1, doneUnits / totalUnits) : 1;
      const filled = Math.round(fraction * width);
      const bar = "#".repeat(filled) + "-".repeat(width - filled);
      stream.write(`\r${label} [${bar}] ${(fraction * 100).toFixed(0).padStart(3)}% ${format(doneUnits, totalUnits)}`);
      drawn = true;
    },
    done() {
      if (drawn) stream.write("\r\x1b[2K");
      drawn = false;
    },
  };
}
