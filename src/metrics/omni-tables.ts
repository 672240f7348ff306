/**
 * vLLM-Omni's `--log-stats` tables (vllm_omni/metrics/stats.py OrchestratorAggregator.build_and_log_summary, vllm_omni/metrics/utils.py _format_table): `[Overall Summary]`,
 * then per request id in lexicographic order `[RequestE2EStats [request_id=…]]`, `[StageRequestStats [request_id=…]]`
 * and `[TransferEdgeStats [request_id=…]]`, each one log record of a PrettyTable-default grid.
 * Numbers: int fields with `,` grouping, float fields with `,` grouping and exactly 3 decimals (the type belongs to the
 * field, not the value). Zero rows are dropped (single-column: value zero; multi-column: zero in every column).
 */
import type { FinalizedRequest, StageRequestStats, TransferEdgeStats } from "../pipeline/stage-stats.ts";
import type { PipelineSummary } from "./stage-stats-aggregator.ts";

type FieldKind = "int" | "float";
type Cell = { readonly kind: FieldKind; readonly value: number } | null;

const INT_FORMAT = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
// halfEven: Python's format() rounds exact ties to even
const FLOAT_FORMAT = new Intl.NumberFormat("en-US", { minimumFractionDigits: 3, maximumFractionDigits: 3, roundingMode: "halfEven" });

/** @example formatNumber("float", 41299.19) // "41,299.190" */
export function formatNumber(kind: FieldKind, value: number): string {
  return kind === "int" ? INT_FORMAT.format(Math.trunc(value)) : FLOAT_FORMAT.format(value);
}

/** The log line that emits each table in vLLM-Omni (Feb 2026 `stats.py`), kept so log parsers see the same prefix. */
const LOG_LINE = { overall: 500, e2e: 526, stage: 579, transfer: 619 } as const;

/** Overall Summary fields in insertion order (stage rows are appended per stage). */
const OVERALL_FIELDS: readonly (readonly [string, FieldKind])[] = [
  ["e2e_requests", "int"],
  ["e2e_wall_time_ms", "float"],
  ["e2e_total_tokens", "int"],
  ["e2e_avg_time_per_request_ms", "float"],
  ["e2e_avg_tokens_per_s", "float"],
];

/** StageRequestStats rows shown (alphabetical); rx_* and bookkeeping fields are never printed. */
const STAGE_FIELDS: readonly (readonly [string, FieldKind, (s: StageRequestStats) => number])[] = [
  ["audio_generated_frames", "int", () => 0],
  ["batch_id", "int", (s) => s.batchId],
  ["batch_size", "int", (s) => s.batchSize],
  ["num_tokens_in", "int", (s) => s.numTokensIn],
  ["num_tokens_out", "int", (s) => s.numTokensOut],
  ["postprocess_time_ms", "float", (s) => s.postprocessTimeMs],
  ["stage_gen_time_ms", "float", (s) => s.stageGenTimeMs],
];

const EDGE_FIELDS: readonly (readonly [string, FieldKind, (e: TransferEdgeStats) => number])[] = [
  ["in_flight_time_ms", "float", (e) => e.inFlightTimeMs],
  ["rx_decode_time_ms", "float", (e) => e.rxDecodeTimeMs],
  ["size_kbytes", "float", (e) => e.sizeBytes / 1024],
  ["tx_time_ms", "float", (e) => e.txTimeMs],
];

/** Per-request totals (RequestE2EStats, vllm_omni/metrics/stats.py). */
export interface RequestE2E {
  readonly e2eTotalMs: number;
  readonly e2eTotalTokens: number;
  readonly transfersTotalKbytes: number;
  readonly transfersTotalTimeMs: number;
}

export function requestE2E(request: FinalizedRequest): RequestE2E {
  const stage0 = request.stages.find((s) => s.stageId === 0);
  const tokensOut = request.stages.reduce((sum, s) => sum + s.numTokensOut, 0);
  return {
    e2eTotalMs: request.finalizeMs - request.submitMs,
    e2eTotalTokens: (stage0?.numTokensIn ?? 0) + tokensOut,
    transfersTotalKbytes: request.edges.reduce((sum, e) => sum + e.sizeBytes / 1024, 0),
    transfersTotalTimeMs: request.edges.reduce((sum, e) => sum + e.txTimeMs + e.rxDecodeTimeMs + e.inFlightTimeMs, 0),
  };
}

/** The Overall Summary rows with their values (before zero filtering), in insertion order. */
export function overallRows(summary: PipelineSummary): [string, FieldKind, number][] {
  const numRequests = summary.requests.length;
  const lastFinishMs = summary.requests.reduce((max, r) => Math.max(max, r.finalizeMs), summary.wallStartMs);
  const wallMs = Math.max(0, lastFinishMs - summary.wallStartMs);
  const totalTokens = summary.requests.reduce((sum, r) => sum + requestE2E(r).e2eTotalTokens, 0);
  const values = [numRequests, wallMs, totalTokens, numRequests > 0 ? wallMs / numRequests : 0, wallMs > 0 ? (totalTokens * 1000) / wallMs : 0];
  const rows: [string, FieldKind, number][] = OVERALL_FIELDS.map(([name, kind], i) => [name, kind, values[i]!]);
  summary.stageSpans.forEach((span, i) => {
    rows.push([`e2e_stage_${i}_wall_time_ms`, "float", span === null ? 0 : span.lastOutputMs - span.firstInputMs]);
  });
  return rows;
}

/** A PrettyTable-default grid: `Field` left-aligned, value columns right-aligned (headers too). */
export function renderGrid(headers: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = headers.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? "").length)));
  const rule = "+" + widths.map((w) => "-".repeat(w + 2)).join("+") + "+";
  const line = (cells: readonly string[]) =>
    "|" + widths.map((w, c) => " " + (c === 0 ? (cells[c] ?? "").padEnd(w) : (cells[c] ?? "").padStart(w)) + " ").join("|") + "|";
  return [rule, line(headers), rule, ...rows.map(line), rule];
}

function singleColumn(title: string, rows: readonly [string, FieldKind, number][]): string[] | null {
  const kept = rows.filter(([, , v]) => v !== 0 && Number.isFinite(v));
  if (kept.length === 0) return null;
  return [`[${title}]`, ...renderGrid(["Field", "Value"], kept.map(([name, kind, v]) => [name, formatNumber(kind, v)]))];
}

function multiColumn<T>(title: string, columns: readonly [string, T][], fields: readonly (readonly [string, FieldKind, (x: T) => number])[]): string[] | null {
  if (columns.length === 0) return null;
  const rows: string[][] = [];
  for (const [name, kind, get] of fields) {
    const cells: Cell[] = columns.map(([, x]) => ({ kind, value: get(x) }));
    if (cells.every((c) => c === null || c.value === 0)) continue;
    rows.push([name, ...cells.map((c) => (c === null ? "" : formatNumber(c.kind, c.value)))]);
  }
  if (rows.length === 0) return null;
  rows.sort((a, b) => (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : 0));
  return [`[${title}]`, ...renderGrid(["Field", ...columns.map(([h]) => h)], rows)];
}

export type TableKind = keyof typeof LOG_LINE;

/** One table = one log record. */
export interface TableRecord {
  readonly kind: TableKind;
  readonly lines: readonly string[];
}

/** The tables of one summary, in print order; tables without rows are left out. */
export function buildTables(summary: PipelineSummary): TableRecord[] {
  const records: TableRecord[] = [];
  const overall = singleColumn("Overall Summary", overallRows(summary));
  if (overall) records.push({ kind: "overall", lines: overall });
  const byId = [...summary.requests].sort((a, b) => (a.requestId < b.requestId ? -1 : a.requestId > b.requestId ? 1 : 0));
  for (const request of byId) {
    const id = request.requestId;
    const e2e = requestE2E(request);
    const e2eTable = singleColumn(`RequestE2EStats [request_id=${id}]`, [
      ["e2e_total_ms", "float", e2e.e2eTotalMs],
      ["e2e_total_tokens", "int", e2e.e2eTotalTokens],
      ["transfers_total_kbytes", "float", e2e.transfersTotalKbytes],
      ["transfers_total_time_ms", "float", e2e.transfersTotalTimeMs],
    ]);
    if (e2eTable) records.push({ kind: "e2e", lines: e2eTable });
    const stages = [...request.stages].sort((a, b) => a.stageId - b.stageId).map((s) => [String(s.stageId), s] as [string, StageRequestStats]);
    const stageTable = multiColumn(`StageRequestStats [request_id=${id}]`, stages, STAGE_FIELDS);
    if (stageTable) records.push({ kind: "stage", lines: stageTable });
    const edges = [...request.edges]
      .sort((a, b) => a.fromStage - b.fromStage || a.toStage - b.toStage)
      .map((e) => [`${e.fromStage}->${e.toStage}`, e] as [string, TransferEdgeStats]);
    const edgeTable = multiColumn(`TransferEdgeStats [request_id=${id}]`, edges, EDGE_FIELDS);
    if (edgeTable) records.push({ kind: "transfer", lines: edgeTable });
  }
  return records;
}

function two(n: number): string {
  return String(n).padStart(2, "0");
}

/**
 * vLLM's log record shape: `INFO MM-DD HH:MM:SS [stats.py:N] ` on every line (NewLineFormatter joins with \r\n), the
 * message being a newline then the table; online records carry `(APIServer pid=N) ` in front.
 */
export function formatRecord(record: TableRecord, at: Date, apiServerPid: number | null): string {
  const stamp = `${two(at.getMonth() + 1)}-${two(at.getDate())} ${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
  const prefix = `${apiServerPid === null ? "" : `(APIServer pid=${apiServerPid}) `}INFO ${stamp} [stats.py:${LOG_LINE[record.kind]}] `;
  return ["", ...record.lines].map((l) => prefix + l).join("\r\n") + "\n";
}

/** Renders a whole summary as the text `--log-stats` prints. */
export function renderSummary(summary: PipelineSummary, at: Date, apiServerPid: number | null): string {
  return buildTables(summary).map((r) => formatRecord(r, at, apiServerPid)).join("");
}
