/** Test helper: parses Prometheus text exposition into samples, and sums samples by name and label filter. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`unparseable sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(LABEL)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** Sum of the samples called `name` whose labels include `filter`. */
export function sampleValue(samples: readonly Sample[], name: string, filter: Readonly<Record<string, string>> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(filter).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

export function hasSeries(samples: readonly Sample[], name: string, filter: Readonly<Record<string, string>> = {}): boolean {
  return samples.some((s) => s.name === name && Object.entries(filter).every(([k, v]) => s.labels[k] === v));
}
