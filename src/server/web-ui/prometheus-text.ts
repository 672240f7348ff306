/**
 * The Prometheus text exposition, read back into numbers, and the two queries a dashboard runs on it: a counter's
 * rate between two scrapes and a histogram's quantile over a window (Prometheus' histogram_quantile: linear inside
 * the bucket, the +Inf bucket answers with the largest finite bound). Runs in the browser (the web page's metrics
 * view) and in tests; no imports, so the page can inline it.
 * @example const s = parseExposition(text); sumOf(s, "vllm:num_requests_running") // 2
 */

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Every sample line of an exposition (comments and blank lines skipped; +Inf/NaN read as numbers). */
export function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = LINE.exec(line);
    if (m === null) continue;
    const labels: Record<string, string> = {};
    if (m[2] !== undefined) for (const l of m[2].matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    const raw = m[3]!;
    out.push({ name: m[1]!, labels, value: raw === "+Inf" ? Infinity : raw === "-Inf" ? -Infinity : Number(raw) });
  }
  return out;
}

/** Sum of one series over all its label sets that match `where` (e.g. one engine). */
export function sumOf(samples: readonly Sample[], name: string, where: Readonly<Record<string, string>> = {}): number {
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(where).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

/** The distinct values one label takes on one series (e.g. the engine indices of a pipeline). */
export function labelValues(samples: readonly Sample[], name: string, label: string): string[] {
  const seen = new Set<string>();
  for (const s of samples) if (s.name === name && s.labels[label] !== undefined) seen.add(s.labels[label]!);
  return [...seen].sort();
}

/** Cumulative bucket counts by upper bound, summed over label sets, sorted by bound (+Inf last). */
export function histogramBuckets(samples: readonly Sample[], name: string): { le: number; count: number }[] {
  const byLe = new Map<number, number>();
  for (const s of samples) {
    if (s.name !== `${name}_bucket` || s.labels.le === undefined) continue;
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    byLe.set(le, (byLe.get(le) ?? 0) + s.value);
  }
  return [...byLe].map(([le, count]) => ({ le, count })).sort((a, b) => a.le - b.le);
}

/** Bucket counts of `now` minus those of `before` (what was observed between two scrapes). */
export function bucketDelta(now: readonly { le: number; count: number }[], before: readonly { le: number; count: number }[]): { le: number; count: number }[] {
  const old = new Map(before.map((b) => [b.le, b.count]));
  return now.map((b) => ({ le: b.le, count: Math.max(0, b.count - (old.get(b.le) ?? 0)) }));
}

/** Prometheus histogram_quantile over cumulative buckets; null when nothing was observed. */
export function histogramQuantile(q: number, buckets: readonly { le: number; count: number }[]): number | null {
  if (buckets.length === 0) return null;
  const total = buckets[buckets.length - 1]!.count;
  if (!(total > 0)) return null;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return prevLe;
      const inBucket = b.count - prevCount;
      return inBucket <= 0 ? b.le : prevLe + (b.le - prevLe) * ((rank - prevCount) / inBucket);
    }
    prevLe = b.le === Infinity ? prevLe : b.le;
    prevCount = b.count;
  }
  return prevLe;
}
