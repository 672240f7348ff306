/** The --log-stats tables: the reference's worked example rendered byte for byte, then rule and invariant checks. */
import { describe, expect, test } from "bun:test";
import { buildTables, formatNumber, renderSummary } from "../../src/metrics/omni-tables.ts";
import { StageStatsAggregator } from "../../src/metrics/stage-stats-aggregator.ts";
import type { StageRequestStats, TransferEdgeStats } from "../../src/pipeline/stage-stats.ts";
import { parseTables } from "./omni-table-parser.ts";
import { rng } from "../helpers/prng.ts";
import { checkTables } from "./omni-invariants.ts";

function stage(stageId: number, o: Partial<StageRequestStats>): StageRequestStats {
  return { stageId, numTokensIn: 0, numTokensOut: 0, batchId: 0, batchSize: 1, stageGenTimeMs: 0, postprocessTimeMs: 0, ...o };
}

describe("number format", () => {
  test.each([
    ["int", 5202, "5,202"], ["int", 0, "0"], ["int", 525525, "525,525"],
    ["float", 41299.19, "41,299.190"], ["float", 0, "0.000"], ["float", 12, "12.000"], ["float", 0.0005, "0.000"], ["float", 0.0015, "0.002"],
    ["float", 1234567.8915, "1,234,567.892"],
  ] as const)("%s %p -> %p", (kind, v, printed) => expect(formatNumber(kind, v)).toBe(printed));
});

describe("the reference's worked example (docs values, 3 stages)", () => {
  // times chosen so the printed differences are the docs' values
  const agg = new StageStatsAggregator(3);
  agg.markWallStart(1000);
  agg.onStageInput(0, 1000);
  agg.onStageOutput(0, 11192.289);
  agg.onStageInput(1, 11300);
  agg.onStageOutput(1, 41841.409);
  agg.onStageInput(2, 42091.694);
  const edges: TransferEdgeStats[] = [
    { fromStage: 0, toStage: 1, sizeBytes: 109277.349 * 1024, txTimeMs: 78.701, inFlightTimeMs: 2.015, rxDecodeTimeMs: 111.865 },
    { fromStage: 1, toStage: 2, sizeBytes: 28812.591 * 1024, txTimeMs: 18.79, inFlightTimeMs: 2.819, rxDecodeTimeMs: 31.706 },
  ];
  agg.finalize({
    requestId: "R", submitMs: 1000.057, finalizeMs: 42299.19, edges,
    stages: [
      stage(0, { batchId: 38, numTokensIn: 4860, numTokensOut: 67, postprocessTimeMs: 256.158, stageGenTimeMs: 9910.007 }),
      stage(1, { batchId: 274, numTokensIn: 4826, numTokensOut: 275, postprocessTimeMs: 0.491, stageGenTimeMs: 30379.198 }),
      stage(2, { batchId: 0, numTokensIn: 4384, numTokensOut: 0, postprocessTimeMs: 0, stageGenTimeMs: 160.745 }),
    ],
  });
  const tables = buildTables(agg.summary());

  test("Overall Summary", () => {
    expect(tables[0]!.lines.join("\n")).toBe(`[Overall Summary]
+-----------------------------+------------+
| Field                       |      Value |
+-----------------------------+------------+
| e2e_requests                |          1 |
| e2e_wall_time_ms            | 41,299.190 |
| e2e_total_tokens            |      5,202 |
| e2e_avg_time_per_request_ms | 41,299.190 |
| e2e_avg_tokens_per_s        |    125.959 |
| e2e_stage_0_wall_time_ms    | 10,192.289 |
| e2e_stage_1_wall_time_ms    | 30,541.409 |
| e2e_stage_2_wall_time_ms    |    207.496 |
+-----------------------------+------------+`);
  });

  test("RequestE2EStats (alphabetical)", () => {
    expect(tables[1]!.lines.join("\n")).toBe(`[RequestE2EStats [request_id=R]]
+-------------------------+-------------+
| Field                   |       Value |
+-------------------------+-------------+
| e2e_total_ms            |  41,299.133 |
| e2e_total_tokens        |       5,202 |
| transfers_total_kbytes  | 138,089.940 |
| transfers_total_time_ms |     245.896 |
+-------------------------+-------------+`);
  });

  test("StageRequestStats (fennec has no audio stage, so audio_generated_frames is zero everywhere and dropped)", () => {
    expect(tables[2]!.lines.join("\n")).toBe(`[StageRequestStats [request_id=R]]
+---------------------+-----------+------------+---------+
| Field               |         0 |          1 |       2 |
+---------------------+-----------+------------+---------+
| batch_id            |        38 |        274 |       0 |
| batch_size          |         1 |          1 |       1 |
| num_tokens_in       |     4,860 |      4,826 |   4,384 |
| num_tokens_out      |        67 |        275 |       0 |
| postprocess_time_ms |   256.158 |      0.491 |   0.000 |
| stage_gen_time_ms   | 9,910.007 | 30,379.198 | 160.745 |
+---------------------+-----------+------------+---------+`);
  });

  test("TransferEdgeStats", () => {
    expect(tables[3]!.lines.join("\n")).toBe(`[TransferEdgeStats [request_id=R]]
+-------------------+-------------+------------+
| Field             |        0->1 |       1->2 |
+-------------------+-------------+------------+
| in_flight_time_ms |       2.015 |      2.819 |
| rx_decode_time_ms |     111.865 |     31.706 |
| size_kbytes       | 109,277.349 | 28,812.591 |
| tx_time_ms        |      78.701 |     18.790 |
+-------------------+-------------+------------+`);
  });

  test("log records: prefix on every line, a leading empty message line, \\r\\n joins", () => {
    const text = renderSummary(agg.summary(), new Date(2026, 1, 24, 10, 15, 3), 4242);
    const records = text.split(/(?<!\r)\n/).filter((r) => r !== "");
    expect(records.length).toBe(4);
    const lines = records[1]!.split("\r\n");
    expect(lines[0]).toBe("(APIServer pid=4242) INFO 02-24 10:15:03 [stats.py:526] ");
    expect(lines[1]).toBe("(APIServer pid=4242) INFO 02-24 10:15:03 [stats.py:526] [RequestE2EStats [request_id=R]]");
    expect(renderSummary(agg.summary(), new Date(2026, 1, 24, 10, 15, 3), null).startsWith("INFO 02-24 10:15:03 [stats.py:500] \r\n")).toBe(true);
    checkTables(parseTables(text), { numRequests: 1, numStages: 3, transfers: true });
  });
});

describe("rules on synthetic batches", () => {
  function batch(numRequests: number, numStages: number, seed: number) {
    const rand = rng(seed);
    const agg = new StageStatsAggregator(numStages);
    agg.markWallStart(5000);
    let t = 5000.25;
    // ids chosen so lexicographic order differs from numeric order (10_ before 2_)
    for (let r = 0; r < numRequests; r++) {
      const submit = t;
      const stages: StageRequestStats[] = [];
      const edges: TransferEdgeStats[] = [];
      for (let s = 0; s < numStages; s++) {
        agg.onStageInput(s, t);
        const gen = 1 + rand() * 50;
        t += gen;
        agg.onStageOutput(s, t);
        stages.push(stage(s, { batchId: r + 1, numTokensIn: Math.floor(rand() * 2000), numTokensOut: s === 1 ? 0 : Math.floor(1 + rand() * 300), stageGenTimeMs: gen }));
        if (s + 1 < numStages) {
          const e = { fromStage: s, toStage: s + 1, sizeBytes: Math.floor(rand() * 5e6), txTimeMs: rand(), inFlightTimeMs: rand() * 0.1, rxDecodeTimeMs: rand() };
          edges.push(e);
          t += e.txTimeMs + e.inFlightTimeMs + e.rxDecodeTimeMs;
        }
      }
      agg.finalize({ requestId: `${r}_req`, submitMs: submit, finalizeMs: t, stages, edges });
      t += 0.5;
    }
    return agg.summary();
  }

  test.each([[1, 1], [3, 2], [12, 3]])("%i requests over %i stages: every invariant and rule holds", (n, s) => {
    const summary = batch(n, s, n * 7 + s);
    const tables = parseTables(renderSummary(summary, new Date(), null));
    const perRequest = checkTables(tables, { numRequests: n, numStages: s, transfers: s > 1 });
    // zero rows: audio frames and postprocess (all 0) are dropped; stage 1 produced 0 tokens but the row stays
    for (const { stage: st } of perRequest.values()) {
      expect(st.rows.has("audio_generated_frames")).toBe(false);
      expect(st.rows.has("postprocess_time_ms")).toBe(false);
      if (s > 1) expect(st.rows.get("num_tokens_out")?.get("1")).toBe("0");
    }
    if (n === 12) expect([...perRequest.keys()].slice(0, 4)).toEqual(["0_req", "10_req", "11_req", "1_req"]);
  });

  test("a single-stage request without transfers prints no transfer table and no transfers_* rows", () => {
    const text = renderSummary(batch(2, 1, 3), new Date(), null);
    expect(text).not.toContain("TransferEdgeStats");
    expect(text).not.toContain("transfers_total");
  });

  test("an empty summary prints nothing", () => {
    expect(renderSummary(new StageStatsAggregator(2).summary(), new Date(), null)).toBe("");
  });
});
