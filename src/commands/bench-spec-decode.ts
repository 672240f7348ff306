/**
 * `bench serve`'s speculative-decoding report (vllm/benchmarks/serve.py: fetch_spec_decode_metrics before and after
 * the run): the server's `vllm:spec_decode*_total` counters, summed over label sets (per position from
 * `position="N"`), diffed; printed as vLLM's "Speculative Decoding" section when draft tokens were seen and saved
 * under vLLM's JSON keys. A server without those counters or without /metrics gets no section.
 */

export interface SpecDecodeCounters {
  readonly drafts: number;
  readonly draftTokens: number;
  readonly accepted: number;
  /** position -> accepted tokens */
  readonly perPosition: ReadonlyMap<number, number>;
}

const SAMPLE = /^(vllm:spec_decode[^{\s]*_total)(\{[^}]*\})?\s+(\S+)/;

/**
 * Sums the spec-decode counters of a Prometheus text exposition.
 * @example parseSpecDecodeCounters('vllm:spec_decode_num_drafts_total{engine="0"} 3') // drafts 3
 */
export function parseSpecDecodeCounters(text: string): SpecDecodeCounters {
  let drafts = 0, draftTokens = 0, accepted = 0;
  const perPosition = new Map<number, number>();
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const m = SAMPLE.exec(line);
    if (m === null) continue;
    const value = Number(m[3]);
    if (!Number.isFinite(value)) continue;
    switch (m[1]) {
      case "vllm:spec_decode_num_drafts_total": drafts += value; break;
      case "vllm:spec_decode_num_draft_tokens_total": draftTokens += value; break;
      case "vllm:spec_decode_num_accepted_tokens_total": accepted += value; break;
      case "vllm:spec_decode_num_accepted_tokens_per_pos_total": {
        const pos = /position="(\d+)"/.exec(m[2] ?? "");
        if (pos) perPosition.set(Number(pos[1]), (perPosition.get(Number(pos[1])) ?? 0) + value);
        break;
      }
    }
  }
  return { drafts, draftTokens, accepted, perPosition };
}

/** The counters now, or null when the server has no /metrics (no section then). */
export async function fetchSpecDecodeCounters(baseUrl: string, headers: Readonly<Record<string, string>>): Promise<SpecDecodeCounters | null> {
  try {
    const res = await fetch(`${baseUrl}/metrics`, { headers });
    return res.ok ? parseSpecDecodeCounters(await res.text()) : null;
  } catch {
    return null;
  }
}

export interface SpecDecodeReport {
  /** the printed section, vLLM's layout */
  readonly lines: readonly string[];
  /** vLLM's saved keys (rates in percent, per-position rates as fractions) */
  readonly json: Readonly<Record<string, unknown>>;
}

const row = (label: string, value: string): string => `${label.padEnd(40)} ${value.padEnd(10)}`;

/** The section for the run between `before` and `after`; null when no draft tokens were seen. */
export function specDecodeReport(before: SpecDecodeCounters | null, after: SpecDecodeCounters | null): SpecDecodeReport | null {
  if (before === null || after === null) return null;
  const drafts = after.drafts - before.drafts;
  const draftTokens = after.draftTokens - before.draftTokens;
  const accepted = after.accepted - before.accepted;
  if (draftTokens <= 0) return null;
  const positions = [...after.perPosition.keys()].sort((a, b) => a - b);
  const perPos = positions.map((p) => (drafts > 0 ? ((after.perPosition.get(p) ?? 0) - (before.perPosition.get(p) ?? 0)) / drafts : 0));
  const rate = (accepted / draftTokens) * 100;
  const length = drafts > 0 ? 1 + accepted / drafts : 0;
  const title = "Speculative Decoding";
  const pad = 50 - title.length;
  const lines = [
    "-".repeat(Math.floor(pad / 2)) + title + "-".repeat(pad - Math.floor(pad / 2)),
    row("Acceptance rate (%):", rate.toFixed(2)), row("Acceptance length:", length.toFixed(2)),
    row("Drafts:", String(drafts)), row("Draft tokens:", String(draftTokens)), row("Accepted tokens:", String(accepted)),
    "Per-position acceptance (%):",
    ...positions.map((p, i) => row(`  Position ${p}:`, (perPos[i]! * 100).toFixed(2))),
  ];
  return {
    lines,
    json: {
      spec_decode_acceptance_rate: rate, spec_decode_acceptance_length: length, spec_decode_num_drafts: drafts,
      spec_decode_draft_tokens: draftTokens, spec_decode_accepted_tokens: accepted, spec_decode_per_position_acceptance_rates: perPos,
    },
  };
}
