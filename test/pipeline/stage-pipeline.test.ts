/**
 * Multi-stage pipelines over fake stages (real KV/text handoff, real edge channels, real tables and recorder):
 * pd output equals single-stage output, the three-stage chain, online vs offline tables with every invariant,
 * what /metrics sees of a pipeline, aborts.
 */
import { describe, expect, test } from "bun:test";
import { DEFAULT_SAMPLING_PARAMS, type SamplingParams } from "../../src/engine/sampling-params.ts";
import type { StatsListener } from "../../src/frontend/iteration-stats.ts";
import { BatchTables, onlineTables } from "../../src/metrics/omni-stats-logger.ts";
import { makeDeprecationGate } from "../../src/metrics/deprecation.ts";
import { MetricsRecorder } from "../../src/metrics/recorder.ts";
import { pdChain, parseStageConfig, type StageChain } from "../../src/pipeline/stage-config.ts";
import { buildPipeline, type StageFactory } from "../../src/pipeline/stage-pipeline.ts";
import type { GenerateRequest, Orchestrator, RequestOutput } from "../../src/frontend/orchestrator.ts";
import { checkTables } from "../metrics/omni-invariants.ts";
import { parseTables } from "../metrics/omni-table-parser.ts";
import { parseExposition, sampleValue } from "../metrics/exposition.ts";
import { fakeStage } from "./fake-stage.ts";

const SINGLE: StageChain = { source: "single", stages: [{ ...pdChain().stages[1]!, stageId: 0, input: null }] };
const THREE = parseStageConfig({
  stage_args: [
    { stage_id: 0, engine_args: { model_stage: "prefill" } },
    { stage_id: 1, input_type: "kv_blocks", engine_args: { model_stage: "decode" } },
    { stage_id: 2, input_type: "text", engine_args: { model_stage: "rewrite" }, default_sampling_params: { max_tokens: 6 } },
  ],
}, "inline.yaml", "/");
if (!THREE.ok) throw new Error(THREE.error);

const greedy = (maxTokens: number): SamplingParams => ({ ...DEFAULT_SAMPLING_PARAMS, temperature: 0, maxTokens });

function factory(opts: { eosAfter?: number; exportsKv?: boolean } = {}, created: ReturnType<typeof fakeStage>[] = []): StageFactory {
  return async (stage, engineIndex, listener) => {
    const fake = fakeStage({ engineIndex, listener, salt: stage.modelStage === "rewrite" ? 2 : 1, ...opts });
    created.push(fake);
    return fake;
  };
}

function request(id: string, prompt: number[], maxTokens: number): GenerateRequest {
  return { requestId: id, promptTokenIds: prompt, sampling: greedy(maxTokens), arrivalMs: performance.timeOrigin + performance.now() };
}

async function collect(orchestrator: Orchestrator, req: GenerateRequest, signal?: AbortSignal): Promise<{ tokens: number[]; outputs: RequestOutput[] }> {
  const outputs: RequestOutput[] = [];
  // like the server: stop reading at the finished output
  for await (const out of orchestrator.generate(req, signal)) {
    outputs.push(out);
    if (out.finished) break;
  }
  return { tokens: outputs.flatMap((o) => o.outputs.flatMap((c) => c.tokenIdsDelta)), outputs };
}

function recorder(engines: number[]): MetricsRecorder {
  const gate = makeDeprecationGate("0.2.0", null);
  if (!gate.ok) throw new Error(gate.error);
  return new MetricsRecorder({ modelName: "m", maxModelLen: 256, engineIndices: engines, logStats: true, enableMfuMetrics: false, deprecation: gate.value, processMetrics: false });
}

describe("pd: disaggregated prefill and decode", () => {
  test("greedy output identical to single-stage; one finished output; numGeneratedTokens continues across the edge", async () => {
    const single = await buildPipeline(SINGLE, factory());
    const stages: ReturnType<typeof fakeStage>[] = [];
    const pd = await buildPipeline(pdChain(), factory({}, stages), {});
    for (const [prompt, max] of [[[5, 9, 13], 8], [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17], 5], [[3], 1]] as const) {
      const a = await collect(single, request("a", [...prompt], max));
      const b = await collect(pd, request("b", [...prompt], max));
      expect(b.tokens).toEqual(a.tokens);
      expect(b.tokens.length).toBe(max);
      expect(b.outputs.filter((o) => o.finished).length).toBe(1);
      expect(b.outputs.at(-1)!.finished).toBe(true);
      expect(b.outputs.at(-1)!.outputs[0]!.finishReason).toBe("length");
      expect(b.outputs.map((o) => o.outputs[0]!.numGeneratedTokens)).toEqual(b.tokens.map((_, i) => i + 1));
      expect(b.outputs.slice(0, -1).every((o) => o.outputs[0]!.finishReason === null)).toBe(true);
    }
    // stage 0 exported, stage 1 imported the prompt's KV (the fake checks it matches the prompt prefix)
    expect(stages[0]!.requests.every((r) => r.exportKv === true && r.sampling.maxTokens === 1)).toBe(true);
    expect(stages[1]!.requests.map((r) => r.importKv?.numTokens)).toEqual([3, 17]);
  });

  test("an engine that cannot export KV: the edge carries token ids, the decode stage recomputes, output unchanged", async () => {
    const warnings: string[] = [];
    const single = await buildPipeline(SINGLE, factory());
    const pd = await buildPipeline(pdChain(), factory({ exportsKv: false }), { warn: (l) => void warnings.push(l) });
    const a = await collect(single, request("a", [2, 7, 1], 6));
    const b = await collect(pd, request("b", [2, 7, 1], 6));
    await collect(pd, request("c", [2, 7, 1], 6));
    expect(b.tokens).toEqual(a.tokens);
    expect(warnings.length).toBe(1);
    expect(warnings[0]).toContain("recomputes");
  });

  test("n > 1 is a request error (400 at the server) on a multi-stage pipeline", async () => {
    const pd = await buildPipeline(pdChain(), factory());
    const req = { ...request("n2", [1, 2], 4), sampling: { ...greedy(4), n: 2, temperature: 1 } };
    await expect(collect(pd, req)).rejects.toMatchObject({ name: "EngineRequestError", message: "multi-stage pipelines take n = 1 (got n = 2)" });
  });

  test("an EOS from the prefill stage ends the request without running decode", async () => {
    const pd = await buildPipeline(pdChain(), factory({ eosAfter: 0 }));
    const out = await collect(pd, request("x", [4, 4], 10));
    expect(out.tokens).toEqual([0]);
    expect(out.outputs.at(-1)!.outputs[0]!.finishReason).toBe("stop");
  });

  test("online tables: one block per request, e2e_requests = 1, KV transfer on edge 0->1, every invariant", async () => {
    let printed = "";
    const pd = await buildPipeline(pdChain(), factory(), { tables: onlineTables(2, (t) => { printed += t; }, 77) });
    await collect(pd, request("chatcmpl-b", [7, 8, 9, 10], 6));
    const first = parseTables(printed);
    const perRequest = checkTables(first, { numRequests: 1, numStages: 2, transfers: true });
    const { stage, transfer } = perRequest.get("chatcmpl-b")!;
    expect(stage.rows.get("num_tokens_out")).toEqual(new Map([["0", "1"], ["1", "5"]]));
    expect(stage.rows.get("num_tokens_in")).toEqual(new Map([["0", "4"], ["1", "5"]]));
    // a KV edge has nothing to post-process: no postprocess_time_ms row (it printed 0.000 | 0.000 from clock noise)
    expect(stage.rows.has("postprocess_time_ms")).toBe(false);
    // header (16 bytes) + 4 prompt positions of the fake KV = 20 bytes = 0.020 KiB (rounded)
    expect(transfer!.rows.get("size_kbytes")!.get("0->1")).toBe((20 / 1024).toFixed(3));
    expect(printed.split("\r\n").every((l) => l.startsWith("(APIServer pid=77) INFO ") || l.startsWith("\n") || l === "")).toBe(true);
    await collect(pd, request("chatcmpl-a", [1, 2], 3));
    const both = parseTables(printed);
    expect(both.filter((t) => t.title === "Overall Summary").length).toBe(2);
    checkTables(both.slice(first.length), { numRequests: 1, numStages: 2, transfers: true });
  });
});

describe("three stages: prefill -(kv)-> decode -(text)-> rewrite", () => {
  test("offline batch tables: once, e2e_requests = N, ids in lexicographic order, every invariant", async () => {
    let printed = "";
    const tables = new BatchTables(3, (t) => { printed += t; });
    const pipe = await buildPipeline(THREE.value, factory(), { tables });
    const ids = ["0_r", "1_r", "2_r", "10_r"];
    const results = await Promise.all(ids.map((id, k) => collect(pipe, request(id, [k + 1, 2, 3], 5))));
    expect(printed).toBe("");
    tables.print();
    const parsed = parseTables(printed);
    const perRequest = checkTables(parsed, { numRequests: 4, numStages: 3, transfers: true });
    expect([...perRequest.keys()]).toEqual(["0_r", "10_r", "1_r", "2_r"]);
    for (const [k, r] of results.entries()) {
      // the client sees the rewrite stage's output (max_tokens 6 from its default_sampling_params)
      expect(r.tokens.length).toBe(6);
      const { stage, transfer } = perRequest.get(ids[k]!)!;
      expect(stage.rows.get("num_tokens_out")).toEqual(new Map([["0", "1"], ["1", "4"], ["2", "6"]]));
      // the text edge carries the decoded text of the prefill+decode run: 5 one-byte characters
      expect(transfer!.rows.get("size_kbytes")!.get("1->2")).toBe((5 / 1024).toFixed(3));
    }
  });
});

describe("what /metrics sees of a pipeline", () => {
  test("pd: TTFT once per request, ITL N x (max_tokens - 1), request_success once per request", async () => {
    const rec = recorder([0, 1]);
    const pd = await buildPipeline(pdChain(), factory(), { listener: rec });
    const N = 3, MAX = 5;
    for (let i = 0; i < N; i++) await collect(pd, request(`r${i}`, [1, 2, 3], MAX));
    const s = parseExposition(await rec.exposition());
    expect(sampleValue(s, "vllm:time_to_first_token_seconds_count")).toBe(N);
    expect(sampleValue(s, "vllm:inter_token_latency_seconds_count")).toBe(N * (MAX - 1));
    expect(sampleValue(s, "vllm:generation_tokens_total")).toBe(N * MAX);
    expect(sampleValue(s, "vllm:request_success_total", { finished_reason: "length" })).toBe(N);
    expect(sampleValue(s, "vllm:request_generation_tokens_sum")).toBe(N * MAX);
    expect(sampleValue(s, "vllm:generation_tokens_total", { engine: "1" })).toBe(N * (MAX - 1));
    // the decode stage's prompt: the 3 prompt positions arrived as KV (external), the first token it computed itself
    expect(sampleValue(s, "vllm:prompt_tokens_by_source_total", { engine: "1", source: "external_kv_transfer" })).toBe(N * 3);
    expect(sampleValue(s, "vllm:prompt_tokens_by_source_total", { engine: "1", source: "local_compute" })).toBe(N * 1);
    expect(sampleValue(s, "vllm:prompt_tokens_total", { engine: "1" })).toBe(N * 4);
    expect(sampleValue(s, "vllm:prompt_tokens_cached_total", { engine: "1" })).toBe(N * 3);
    expect(sampleValue(s, "vllm:prompt_tokens_total", { engine: "0" })).toBe(N * 3);
  });

  test("a client abort mid-request: no tables, no finished-request metric", async () => {
    let printed = "";
    const finished: boolean[] = [];
    const listener: StatsListener = { onStep() {}, onRequestFinished: (f) => void finished.push(f.clientAborted) };
    const pd = await buildPipeline(pdChain(), factory(), { listener, tables: onlineTables(2, (t) => { printed += t; }) });
    const controller = new AbortController();
    const outputs: RequestOutput[] = [];
    for await (const out of pd.generate(request("gone", [1, 2], 50), controller.signal)) {
      outputs.push(out);
      if (outputs.length === 3) controller.abort();
    }
    expect(outputs.length).toBeLessThan(50);
    expect(printed).toBe("");
    expect(finished).toEqual([true]);
  });
});
