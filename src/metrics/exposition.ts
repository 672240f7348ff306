/**
 * The Prometheus text exposition of a recorder's registry, as vLLM's /metrics writes it (prometheus_client's text
 * format): prom-client's text with bucket bounds in Python's float spelling and the `_created` companion series.
 * The recorder (recorder.ts) keeps the series up to date; this file only writes them out.
 * @example await renderExposition(registry, () => 1795952611.5)
 */
import type { Registry } from "prom-client";

const LE_LABEL = /le="([^"]*)"/g;

/**
 * prometheus_client's floatToGoString for a bucket bound: `1` -> `1.0`, `0.005` -> `0.005`, `1000000` -> `1e+06`,
 * `+Inf` unchanged. Without it, `sum by (le)` over a fleet of vLLM and fennec targets would split `le="1.0"` from
 * `le="1"` (Prometheus 2 compares label strings).
 * @example goFloat("2560") // "2560.0"
 */
export function goFloat(bound: string): string {
  const value = Number(bound);
  if (!Number.isFinite(value)) return bound;
  const python = Number.isInteger(value) ? `${value}.0` : String(value);
  const dot = python.indexOf(".");
  if (value > 0 && dot > 6 && !python.includes("e")) {
    const mantissa = `${python[0]}.${python.slice(1, dot)}${python.slice(dot + 1)}`.replace(/[0.]+$/, "");
    return `${mantissa}e+0${dot - 1}`;
  }
  return python;
}

/**
 * prometheus_client's `_created` companions (vLLM does not turn them off): after each vllm: or http_ counter, histogram or summary
 * family, a gauge family `<name>_created` (a counter's name without `_total`) with the Unix time each series was
 * created, under the family's help text. prom-client has no created series, so they are added to its text here.
 * @example withCreatedSeries(text, (labels) => 1795952611.5)
 */
export function withCreatedSeries(text: string, createdS: (labels: string) => number): string {
  const out: string[] = [];
  let family: { name: string; type: string; help: string; labelSets: string[] } | null = null;
  const flush = () => {
    if (family === null || family.labelSets.length === 0) return;
    const base = family.type === "counter" ? family.name.replace(/_total$/, "") : family.name;
    // prom-client separates families with a blank line: keep it after the created family
    const blank = out.length > 0 && out[out.length - 1] === "" ? out.pop() : undefined;
    out.push(`# HELP ${base}_created ${family.help}`, `# TYPE ${base}_created gauge`);
    for (const labels of family.labelSets) out.push(`${base}_created${labels} ${goFloat(String(createdS(labels)))}`);
    if (blank !== undefined) out.push(blank);
  };
  for (const line of text.split("\n")) {
    const help = /^# HELP (\S+) (.*)$/.exec(line);
    if (help !== null) {
      flush();
      family = { name: help[1]!, type: "", help: help[2]!, labelSets: [] };
    } else if (family !== null && line.startsWith(`# TYPE ${family.name} `)) {
      family.type = line.slice(`# TYPE ${family.name} `.length);
    } else if (family !== null && /^(vllm:|http_)/.test(family.name) && (family.type === "counter" || family.type === "histogram" || family.type === "summary")) {
      // one created sample per series: a counter's samples, a histogram's or summary's _count samples
      const sampleName = family.type === "counter" ? family.name : `${family.name}_count`;
      if (line.startsWith(`${sampleName}{`) || line.startsWith(`${sampleName} `)) {
        const labels = line.slice(sampleName.length, line.lastIndexOf(" "));
        family.labelSets.push(labels);
      }
    }
    out.push(line);
  }
  flush();
  return out.join("\n");
}

/**
 * The whole text GET /metrics returns: the registry's samples, `le` bounds as vLLM writes them, then the `_created`
 * series (createdS: the Unix time a series' labels were created at).
 * @example await renderExposition(recorder.registry, (labels) => 1795952611.5)
 */
export async function renderExposition(registry: Registry, createdS: (labels: string) => number): Promise<string> {
  const text = (await registry.metrics()).replace(LE_LABEL, (_match, bound: string) => `le="${goFloat(bound)}"`);
  return withCreatedSeries(text, createdS);
}
