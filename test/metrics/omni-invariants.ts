/**
 * Test helper: checks parsed `--log-stats` tables against every invariant and row/column rule of the reference
 * (omni-stats-tables.md §2 and the §7 checklist). Used by the unit tests and by the pipeline / run-batch tests.
 */
import { expect } from "bun:test";
import { cellNumber, type ParsedTable } from "./omni-table-parser.ts";

const OVERALL_ORDER = ["e2e_requests", "e2e_wall_time_ms", "e2e_total_tokens", "e2e_avg_time_per_request_ms", "e2e_avg_tokens_per_s"];
const E2E_FIELDS = { e2e_total_ms: "float", e2e_total_tokens: "int", transfers_total_kbytes: "float", transfers_total_time_ms: "float" } as const;
const STAGE_FIELDS = {
  audio_generated_frames: "int", batch_id: "int", batch_size: "int", num_tokens_in: "int", num_tokens_out: "int",
  postprocess_time_ms: "float", stage_gen_time_ms: "float",
} as const;
const EDGE_FIELDS = { in_flight_time_ms: "float", rx_decode_time_ms: "float", size_kbytes: "float", tx_time_ms: "float" } as const;

/** rounding slack for a sum of `terms` printed values, each off by at most half a unit in the 3rd decimal */
const slack = (terms: number) => 0.0005 * (terms + 1) + 1e-9;

function sortedCopy(xs: readonly string[]): string[] {
  return [...xs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

function value(t: ParsedTable, field: string, column: string, kind: "int" | "float"): number {
  const cell = t.rows.get(field)?.get(column);
  return cell === undefined ? 0 : cellNumber(cell, kind);
}

function checkMulti(t: ParsedTable, fields: Readonly<Record<string, "int" | "float">>): void {
  expect(t.rowOrder).toEqual(sortedCopy(t.rowOrder));
  for (const [field, row] of t.rows) {
    const kind = fields[field];
    if (kind === undefined) throw new Error(`${t.title}: unexpected row ${field}`);
    const values = [...row.values()].map((c) => cellNumber(c, kind));
    // zero everywhere -> dropped; a float below 0.0005 still prints 0.000, so only int rows can be checked in print
    if (kind === "int") expect(values.some((v) => v !== 0)).toBe(true);
  }
}

export interface TableExpectations {
  readonly numRequests: number;
  readonly numStages: number;
  /** whether requests had transfers (pd / KV or text edges) */
  readonly transfers: boolean;
}

/** Checks everything; returns per request id its stage table (for callers' own checks). */
export function checkTables(tables: readonly ParsedTable[], want: TableExpectations): Map<string, { stage: ParsedTable; e2e: ParsedTable; transfer?: ParsedTable }> {
  const overall = tables[0];
  if (!overall || overall.title !== "Overall Summary") throw new Error(`first table must be [Overall Summary], got ${overall?.title}`);
  expect(overall.headers).toEqual(["Field", "Value"]);
  const stageRows = Array.from({ length: want.numStages }, (_, i) => `e2e_stage_${i}_wall_time_ms`);
  const allowed = [...OVERALL_ORDER, ...stageRows];
  // insertion order, zeros dropped
  expect(overall.rowOrder).toEqual(allowed.filter((f) => overall.rows.has(f)));
  const ov = (f: string, k: "int" | "float") => value(overall, f, "Value", k);
  for (const f of overall.rowOrder) expect(ov(f, f === "e2e_requests" || f === "e2e_total_tokens" ? "int" : "float")).not.toBe(0);
  expect(ov("e2e_requests", "int")).toBe(want.numRequests);
  const wallMs = ov("e2e_wall_time_ms", "float");
  expect(Math.abs(ov("e2e_avg_time_per_request_ms", "float") - wallMs / want.numRequests)).toBeLessThanOrEqual(slack(1));
  const totalTokens = ov("e2e_total_tokens", "int");
  if (wallMs > 0) {
    const expected = (totalTokens * 1000) / wallMs;
    // wall time is printed rounded: propagate its error
    expect(Math.abs(ov("e2e_avg_tokens_per_s", "float") - expected)).toBeLessThanOrEqual(slack(1) + (expected * 0.0005) / wallMs);
  }
  for (let s = 0; s < want.numStages; s++) expect(ov(`e2e_stage_${s}_wall_time_ms`, "float")).toBeGreaterThan(0);

  const perRequest = new Map<string, { stage: ParsedTable; e2e: ParsedTable; transfer?: ParsedTable }>();
  const ids: string[] = [];
  let tokenSum = 0;
  let k = 1;
  while (k < tables.length) {
    const e2e = tables[k]!;
    const id = /^RequestE2EStats \[request_id=(.*)\]$/.exec(e2e.title)?.[1];
    if (id === undefined) throw new Error(`expected a RequestE2EStats table, got ${e2e.title}`);
    ids.push(id);
    expect(e2e.rowOrder).toEqual(sortedCopy(e2e.rowOrder));
    for (const f of e2e.rowOrder) expect(Object.keys(E2E_FIELDS)).toContain(f);
    const stage = tables[k + 1]!;
    expect(stage.title).toBe(`StageRequestStats [request_id=${id}]`);
    expect(stage.headers.slice(1)).toEqual(Array.from({ length: want.numStages }, (_, i) => String(i)));
    checkMulti(stage, STAGE_FIELDS);
    let transfer: ParsedTable | undefined;
    if (tables[k + 2]?.title === `TransferEdgeStats [request_id=${id}]`) {
      transfer = tables[k + 2]!;
      expect(transfer.headers.slice(1)).toEqual(Array.from({ length: want.numStages - 1 }, (_, i) => `${i}->${i + 1}`));
      checkMulti(transfer, EDGE_FIELDS);
      k += 3;
    } else {
      k += 2;
    }
    expect(transfer !== undefined).toBe(want.transfers);

    // e2e_total_tokens = in(stage 0) + sum of out over all stages
    const tokensOut = stage.headers.slice(1).reduce((sum, h) => sum + value(stage, "num_tokens_out", h, "int"), 0);
    const e2eTokens = value(e2e, "e2e_total_tokens", "Value", "int");
    expect(e2eTokens).toBe(value(stage, "num_tokens_in", "0", "int") + tokensOut);
    tokenSum += e2eTokens;
    // transfers: time = sum of tx + rx_decode + in_flight, kbytes = sum of size_kbytes
    const edges = transfer?.headers.slice(1) ?? [];
    const timeSum = edges.reduce((s, h) => s + value(transfer!, "tx_time_ms", h, "float") + value(transfer!, "rx_decode_time_ms", h, "float") + value(transfer!, "in_flight_time_ms", h, "float"), 0);
    expect(Math.abs(value(e2e, "transfers_total_time_ms", "Value", "float") - timeSum)).toBeLessThanOrEqual(slack(3 * edges.length));
    const kbSum = edges.reduce((s, h) => s + value(transfer!, "size_kbytes", h, "float"), 0);
    expect(Math.abs(value(e2e, "transfers_total_kbytes", "Value", "float") - kbSum)).toBeLessThanOrEqual(slack(edges.length));
    // the wall clock starts before the request's own timer
    expect(wallMs + slack(2)).toBeGreaterThanOrEqual(value(e2e, "e2e_total_ms", "Value", "float"));
    perRequest.set(id, { stage, e2e, ...(transfer ? { transfer } : {}) });
  }
  expect(ids).toEqual(sortedCopy(ids));
  expect(ids.length).toBe(want.numRequests);
  expect(totalTokens).toBe(tokenSum);
  return perRequest;
}
