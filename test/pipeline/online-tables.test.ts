/**
 * Online `--log-stats` (serve): the server app over createServingPipeline with real stories260K engines; one block of
 * tables per request (e2e_requests = 1, `(APIServer pid=N)` prefix) for single-stage, pd and the three-stage example,
 * every invariant and format rule checked on the printed text; /metrics sees one finished request per request.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { readServeConfig } from "../../src/commands/serve.ts";
import { makeDeprecationGate } from "../../src/metrics/deprecation.ts";
import { onlineTables } from "../../src/metrics/omni-stats-logger.ts";
import { MetricsRecorder } from "../../src/metrics/recorder.ts";
import { createServingPipeline } from "../../src/pipeline/serving-pipeline.ts";
import { createApp } from "../../src/server/app.ts";
import { metricsRoute } from "../../src/server/metrics-route.ts";
import { DEFAULT_MAX_BODY_BYTES } from "../../src/server/server-options.ts";
import { checkTables } from "../metrics/omni-invariants.ts";
import { parseTables } from "../metrics/omni-table-parser.ts";

/** what serve hands the pipeline builder: the command line's model, engine arguments and stage chain */
function servingInputs(options: Parameters<typeof readServeConfig>[0]) {
  const { config, chain } = readServeConfig(options);
  return { model: config.model, engineArgs: config.engine, chain };
}
import { parseExposition, sampleValue } from "../metrics/exposition.ts";

async function serveWith(flags: string[]) {
  const parsed = parseCommandArgs("serve", ["--threads", "1", "--log-stats", ...flags]);
  if (!parsed.ok) throw new Error(parsed.error);
  const gate = makeDeprecationGate("0.2.0", null);
  if (!gate.ok) throw new Error(gate.error);
  let printed = "";
  let recorder: MetricsRecorder | null = null;
  const forward = { onStep: (s: Parameters<MetricsRecorder["onStep"]>[0]) => recorder?.onStep(s), onRequestFinished: (f: Parameters<MetricsRecorder["onRequestFinished"]>[0]) => recorder?.onRequestFinished(f) };
  const { orchestrator, numStages, cacheConfig } = await createServingPipeline({
    ...servingInputs(parsed.value), listener: forward,
    tables: (n) => onlineTables(n, (t) => { printed += t; }, 4242),
  });
  recorder = new MetricsRecorder({ modelName: "stories260K", maxModelLen: orchestrator.maxModelLen, engineIndices: [...Array(numStages).keys()], logStats: true, enableMfuMetrics: false, deprecation: gate.value, processMetrics: false, ...(cacheConfig ? { cacheConfig } : {}) });
  const app = createApp({
    orchestrator, servedModelName: orchestrator.modelConfig.name, modelPath: "test", apiKey: null, enablePerRequestMetrics: true,
    forceIncludeUsage: false, maxBodyBytes: DEFAULT_MAX_BODY_BYTES, shutdownSignal: new AbortController().signal, log: () => {}, metricsRoute: metricsRoute(recorder),
  });
  const post = async (path: string, body: unknown) => {
    const res = await app.handle(new Request(`http://127.0.0.1${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }));
    expect(res.status).toBe(200);
    return res;
  };
  return { orchestrator, numStages, post, printed: () => printed, metrics: async () => parseExposition(await (await app.handle(new Request("http://127.0.0.1/metrics"))).text()) };
}

describe.each([
  ["single stage", [] as string[], 1, false],
  ["--pipeline pd", ["--pipeline", "pd"], 2, true],
  ["three-stage example", ["--stage-config", join(import.meta.dir, "../../examples/three-stage.yaml")], 3, true],
] as const)("online tables: %s", (_name, flags, numStages, transfers) => {
  test("one block per request, after it finishes; every invariant; one finished request on /metrics each", async () => {
    const s = await serveWith([...flags]);
    try {
      expect(s.numStages).toBe(numStages);
      const completion = (await (await s.post("/v1/completions", { prompt: "Once upon a time", max_tokens: 8, temperature: 0 })).json()) as { id: string };
      const first = parseTables(s.printed());
      // the tables name the request by the id its client got (vLLM-Omni prints the OpenAI ids online)
      expect([...checkTables(first, { numRequests: 1, numStages, transfers }).keys()]).toEqual([completion.id]);
      const stream = await s.post("/v1/chat/completions", { messages: [{ role: "user", content: "A story" }], max_tokens: 5, temperature: 0, stream: true });
      const chatId = (JSON.parse((await stream.text()).split("\n\n")[0]!.slice(6)) as { id: string }).id;
      const all = parseTables(s.printed());
      expect(all.filter((t) => t.title === "Overall Summary").length).toBe(2);
      expect([...checkTables(all.slice(first.length), { numRequests: 1, numStages, transfers }).keys()]).toEqual([chatId]);
      expect(s.printed().split("\r\n").filter((l) => l.includes("[stats.py:")).every((l) => /^\n?\(APIServer pid=4242\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[stats\.py:\d+\] /.test(l))).toBe(true);
      const m = await s.metrics();
      expect(sampleValue(m, "vllm:e2e_request_latency_seconds_count")).toBe(2);
      // vLLM's test: cache_config_info carries kv_cache_size_tokens and kv_cache_max_concurrency, not None
      const info = m.find((x) => x.name === "vllm:cache_config_info" && x.labels["engine"] === "0")!;
      expect(Number(info.labels["kv_cache_size_tokens"])).toBe(Number(info.labels["num_gpu_blocks"]) * Number(info.labels["block_size"]));
      expect(Number(info.labels["kv_cache_max_concurrency"])).toBeGreaterThan(0);
      expect(info.labels["enable_prefix_caching"]).toBe("True");
      expect(sampleValue(m, "vllm:time_to_first_token_seconds_count")).toBe(2);
    } finally {
      await s.orchestrator.shutdown();
    }
  }, 60_000);
});
