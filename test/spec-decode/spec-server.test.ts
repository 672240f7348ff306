/**
 * Black box: `fennec serve --speculative-config` (embedded stories260K) with the official openai client. The start-up
 * repr, vLLM's spec-decode series with their help texts and positions, metric arithmetic on every scrape, generation
 * tokens = tokens users received (streamed several per chunk), the per-request 400 for min_p, the one-line start-up
 * refusal of a bad config; the SpecDecoding log line's format; per-request `metrics` over multi-token steps; a
 * json_schema request that speculates.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { parseExposition, sampleValue, hasSeries } from "../metrics/exposition.ts";
import { runServeExpectingExit, startServer, type ServerProcess } from "../e2e/server-process.ts";
import { MetricsRecorder } from "../../src/metrics/recorder.ts";
import { makeDeprecationGate } from "../../src/metrics/deprecation.ts";
import { specDecodingLogLine } from "../../src/metrics/spec-decode-logger.ts";
import { LoggingStatLogger } from "../../src/metrics/logging-stat-logger.ts";
import { createLogger } from "../../src/util/logger.ts";

const K = 3;
let server: ServerProcess;
let client: OpenAI;
beforeAll(async () => {
  server = await startServer(["--threads", "1", "--enable-per-request-metrics", "--speculative-config", JSON.stringify({ method: "ngram", num_speculative_tokens: K, prompt_lookup_min: 2, prompt_lookup_max: 4 })]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none" });
}, 130_000);
afterAll(async () => { await server?.stop(); });

async function scrape() {
  return parseExposition(await (await fetch(`${server.url}/metrics`)).text());
}

function checkArithmetic(samples: ReturnType<typeof parseExposition>): { drafts: number; draftTokens: number; accepted: number } {
  const drafts = sampleValue(samples, "vllm:spec_decode_num_drafts_total");
  const draftTokens = sampleValue(samples, "vllm:spec_decode_num_draft_tokens_total");
  const accepted = sampleValue(samples, "vllm:spec_decode_num_accepted_tokens_total");
  const perPos = Array.from({ length: K }, (_, i) => sampleValue(samples, "vllm:spec_decode_num_accepted_tokens_per_pos_total", { position: String(i) }));
  expect(accepted).toBeLessThanOrEqual(draftTokens);
  expect(draftTokens).toBeLessThanOrEqual(drafts * K);
  for (let i = 1; i < K; i++) expect(perPos[i]!).toBeLessThanOrEqual(perPos[i - 1]!);
  expect(perPos.reduce((a, b) => a + b, 0)).toBe(accepted);
  // a draft is verified in a step that also emits a token for its request
  expect(drafts).toBeLessThanOrEqual(sampleValue(samples, "vllm:generation_tokens_total"));
  return { drafts, draftTokens, accepted };
}

describe("fennec serve --speculative-config", () => {
  test("start-up log shows vLLM's repr; the series exist at 0 with vLLM's help texts and positions 0..k-1", async () => {
    expect(server.log()).toContain("speculative_config=SpeculativeConfig(method='ngram', model=None, num_spec_tokens=3)");
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toContain("# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.");
    expect(text).toContain("# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.");
    expect(text).toContain("# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.");
    expect(text).toContain("# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.");
    const samples = parseExposition(text);
    for (let i = 0; i < K; i++) expect(hasSeries(samples, "vllm:spec_decode_num_accepted_tokens_per_pos_total", { position: String(i), engine: "0" })).toBe(true);
    expect(hasSeries(samples, "vllm:spec_decode_num_accepted_tokens_per_pos_total", { position: String(K) })).toBe(false);
    checkArithmetic(samples);
  });

  test("streamed tokens arrive several per chunk; generation tokens = tokens received; arithmetic holds on every scrape", async () => {
    let received = 0;
    let maxPerChunk = 0;
    for (let r = 0; r < 3; r++) {
      const stream = await client.completions.create({
        model: "stories260K", prompt: "Once upon a time, there was a little girl named Lily. She loved to play", max_tokens: 80, temperature: 0,
        stream: true, stream_options: { include_usage: true }, logprobs: 1,
      });
      for await (const chunk of stream) {
        const n = chunk.choices[0]?.logprobs?.tokens?.length ?? 0;
        maxPerChunk = Math.max(maxPerChunk, n);
        if (chunk.usage) received += chunk.usage.completion_tokens;
      }
      checkArithmetic(await scrape());
    }
    const samples = await scrape();
    const { accepted } = checkArithmetic(samples);
    expect(accepted).toBeGreaterThan(0);
    expect(maxPerChunk).toBeGreaterThan(1);
    expect(sampleValue(samples, "vllm:generation_tokens_total")).toBe(received);
  });

  test("per-request metrics count every token of a multi-token step (vLLM: mean_itl_ms = generation time / (tokens - 1))", async () => {
    const r = await client.completions.create({
      model: "stories260K", prompt: "Once upon a time, there was a little girl named Lily. She loved to play", max_tokens: 80, temperature: 0,
    }) as unknown as { usage: { completion_tokens: number }; metrics: Record<string, number> };
    const m = r.metrics;
    const tokens = r.usage.completion_tokens;
    expect(tokens).toBeGreaterThan(10);
    expect(m.mean_itl_ms).toBeCloseTo(m.generation_time_ms! / (tokens - 1), 6);
    expect(m.tokens_per_second).toBeGreaterThan(0);
  });

  test("structured output speculates: the json_schema answer is valid and drafts were verified", async () => {
    const before = checkArithmetic(await scrape());
    const schema = { type: "object", properties: { name: { type: "string", maxLength: 20 }, friends: { type: "array", items: { type: "string", maxLength: 12 }, maxItems: 3 } }, required: ["name", "friends"], additionalProperties: false };
    const r = await client.completions.create({
      model: "stories260K", max_tokens: 120, temperature: 0,
      prompt: 'Once upon a time, there was a little girl named Lily. {"name": "Lily", "friends": ["Tom", "Sue", "Ben"]} Lily had friends named Tom, Sue and Ben.',
      response_format: { type: "json_schema", json_schema: { name: "p", schema } }, structured_outputs: { disable_any_whitespace: true },
    } as never) as unknown as { choices: { text: string; finish_reason: string }[] };
    expect(r.choices[0]!.finish_reason).toBe("stop");
    const value = JSON.parse(r.choices[0]!.text) as { name: string; friends: string[] };
    expect(typeof value.name).toBe("string");
    expect(Array.isArray(value.friends)).toBe(true);
    const after = checkArithmetic(await scrape());
    expect(after.drafts).toBeGreaterThan(before.drafts);
    expect(after.accepted).toBeGreaterThan(before.accepted);
  });

  test("min_p is refused per request with vLLM's 400", async () => {
    const e = await client.completions.create({ model: "stories260K", prompt: "Hi", max_tokens: 4, temperature: 1, min_p: 0.2 } as never).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.APIError);
    expect((e as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    expect((e as Error).message).toContain("The min_p and logit_bias sampling parameters are not yet supported with speculative decoding.");
  });

  test("a bad config is one line and exit code 2 before anything loads", async () => {
    const { code, output } = await runServeExpectingExit(["--speculative-config", '{"method":"ngram"}']);
    expect(code).toBe(2);
    expect(output.trim().split("\n")).toHaveLength(1);
    expect(output).toContain("num_speculative_tokens must be provided with speculative model unless the draft model config contains an n_predict parameter.");
  });
});

describe("spec-decode series and log line (units)", () => {
  test("the series exist only with a speculative config", async () => {
    const gate = makeDeprecationGate("0.2.0", null);
    if (!gate.ok) throw new Error(gate.error);
    const base = { modelName: "m", maxModelLen: 64, logStats: true, enableMfuMetrics: false, deprecation: gate.value, processMetrics: false, httpMetrics: false };
    expect(await new MetricsRecorder(base).exposition()).not.toContain("spec_decode");
    expect(await new MetricsRecorder({ ...base, numSpeculativeTokens: 2 }).exposition()).toContain('vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",engine="0",position="1"} 0');
  });

  test("SpecDecoding line: vLLM's fields and formats, printed only for intervals with drafts", () => {
    expect(specDecodingLogLine({ numDrafts: 4, numDraftTokens: 12, numAcceptedTokens: 7, numAcceptedTokensPerPos: [4, 2, 1] }, 10)).toBe(
      "SpecDecoding metrics: Mean acceptance length: 2.75, Accepted throughput: 0.70 tokens/s, Drafted throughput: 1.20 tokens/s, Accepted: 7 tokens, Drafted: 12 tokens, Per-position acceptance rate: 1.000, 0.500, 0.250, Avg Draft acceptance rate: 58.3%",
    );
    // LoggingStatLogger prints it after its engine line, only for an interval that saw drafts
    const lines: string[] = [];
    const logger = new LoggingStatLogger(createLogger({ level: "DEBUG", format: "text", write: (l: string) => { lines.push(l); } }), 10, [0], 2);
    logger.logNow();
    expect(lines.filter((l) => l.includes("SpecDecoding"))).toHaveLength(0);
    const step = { engineIndex: 0, numPromptTokens: 0, numGenerationTokens: 2, numRunning: 1, numWaiting: 0, kvCacheUsage: 0, prefixCacheQueries: 0, prefixCacheHits: 0, specDecoding: { numDrafts: 1, numDraftTokens: 2, numAcceptedTokens: 1, numAcceptedTokensPerPos: [1, 0] } };
    logger.onStep(step as never);
    logger.logNow();
    const spec = lines.filter((l) => l.includes("SpecDecoding"));
    expect(spec).toHaveLength(1);
    expect(spec[0]).toMatch(/SpecDecoding metrics: Mean acceptance length: 2\.00, .* Accepted: 1 tokens, Drafted: 2 tokens, Per-position acceptance rate: 1\.000, 0\.000, Avg Draft acceptance rate: 50\.0%\n?$/);
    expect(lines.findIndex((l) => l.includes("SpecDecoding"))).toBeGreaterThan(lines.findLastIndex((l) => l.includes("Avg prompt throughput")) - 1);
  });
});

describe("fennec generate --speculative-config", () => {
  test("greedy ids are the same with and without speculation; the repr goes to stderr", async () => {
    const cli = [process.execPath, "run", `${import.meta.dir}/../../src/cli.ts`, "generate", "--temperature", "0", "--max-tokens", "60", "--json", "--threads", "1"];
    const plain = Bun.spawnSync([...cli]);
    const spec = Bun.spawnSync([...cli, "--speculative-config", '{"method":"ngram","num_speculative_tokens":4}']);
    expect(spec.exitCode).toBe(0);
    const ids = JSON.parse(spec.stdout.toString()).token_ids as number[];
    expect(ids).toHaveLength(60);
    expect(ids).toEqual(JSON.parse(plain.stdout.toString()).token_ids);
    expect(spec.stderr.toString()).toContain("SpeculativeConfig(method='ngram', model=None, num_spec_tokens=4)");
  });
});

describe("speculation with n > 1, the pd pipeline and run-batch", () => {
  const PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play";

  test("n = 2 (seeded): two choices, each as long as asked, counted in generation tokens", async () => {
    const before = sampleValue(await scrape(), "vllm:generation_tokens_total");
    const r = await client.completions.create({ model: "stories260K", prompt: PROMPT, max_tokens: 30, temperature: 0.8, n: 2, seed: 5, ignore_eos: true } as never) as unknown as { choices: { index: number; text: string }[]; usage: { completion_tokens: number } };
    expect(r.choices.map((c) => c.index).sort()).toEqual([0, 1]);
    expect(r.usage.completion_tokens).toBe(60);
    const samples = await scrape();
    checkArithmetic(samples);
    expect(sampleValue(samples, "vllm:generation_tokens_total") - before).toBe(60);
  });

  test("--pipeline pd with speculation gives the single engine's greedy text", async () => {
    const pd = await startServer(["--threads", "1", "--pipeline", "pd", "--speculative-config", JSON.stringify({ method: "ngram", num_speculative_tokens: K, prompt_lookup_min: 2, prompt_lookup_max: 4 })]);
    try {
      const body = { model: "stories260K", prompt: PROMPT, max_tokens: 100, temperature: 0 };
      const single = await client.completions.create(body);
      const piped = await new OpenAI({ baseURL: `${pd.url}/v1`, apiKey: "none" }).completions.create(body);
      expect(piped.choices[0]!.text).toBe(single.choices[0]!.text);
      const samples = parseExposition(await (await fetch(`${pd.url}/metrics`)).text());
      // the decode stage (engine 1) drafted and verified
      expect(sampleValue(samples, "vllm:spec_decode_num_drafts_total", { engine: "1" })).toBeGreaterThan(0);
    } finally {
      await pd.stop();
    }
  }, 130_000);

  test("run-batch takes --speculative-config and answers as without it", async () => {
    const { mkdtempSync, writeFileSync, readFileSync, rmSync } = await import("node:fs");
    const { join } = await import("node:path");
    const dir = mkdtempSync(join((await import("node:os")).tmpdir(), "fennec-spec-batch-"));
    const input = join(dir, "in.jsonl");
    writeFileSync(input, [1, 2].map((i) => JSON.stringify({ custom_id: `r${i}`, method: "POST", url: "/v1/completions", body: { model: "stories260K", prompt: i === 1 ? PROMPT : "The cat", max_tokens: 50, temperature: 0 } })).join("\n"));
    const texts: string[][] = [];
    for (const extra of [[], ["--speculative-config", '{"method":"ngram","num_speculative_tokens":4}']]) {
      const output = join(dir, `out${texts.length}.jsonl`);
      const proc = Bun.spawnSync([process.execPath, "run", `${import.meta.dir}/../../src/cli.ts`, "run-batch", "-i", input, "-o", output, "--threads", "1", ...extra]);
      expect(proc.exitCode).toBe(0);
      texts.push(readFileSync(output, "utf8").trim().split("\n").map((l) => JSON.parse(l).response.body.choices[0].text as string));
    }
    rmSync(dir, { recursive: true, force: true });
    expect(texts[1]).toEqual(texts[0]!);
    expect(texts[0]![0]!.length).toBeGreaterThan(20);
  }, 60_000);
});

describe("run-batch --log-stats with speculation: the omni tables", () => {
  test("every invariant holds and num_tokens_out is the tokens each request got (several per step)", async () => {
    const { mkdtempSync, writeFileSync, rmSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { parseCommandArgs } = await import("../../src/command-line/parse-args.ts");
    const { runBatch } = await import("../../src/commands/run-batch.ts");
    const { checkTables } = await import("../metrics/omni-invariants.ts");
    const { parseTables } = await import("../metrics/omni-table-parser.ts");
    const dir = mkdtempSync(join((await import("node:os")).tmpdir(), "fennec-spec-omni-"));
    try {
      const input = join(dir, "in.jsonl");
      const prompts = ["Once upon a time, there was a little girl named Lily. She loved to play", "Tom had a big red ball.", "The cat"];
      writeFileSync(input, prompts.map((prompt, i) => JSON.stringify({ custom_id: `r${i}`, method: "POST", url: "/v1/completions", body: { prompt, max_tokens: 40 + i, temperature: 0, ignore_eos: true } })).join("\n"));
      const parsed = parseCommandArgs("run-batch", ["-i", input, "-o", join(dir, "out.jsonl"), "--threads", "1", "--log-stats",
        "--speculative-config", JSON.stringify({ method: "ngram", num_speculative_tokens: K, prompt_lookup_min: 2, prompt_lookup_max: 4 })]);
      if (!parsed.ok) throw new Error(parsed.error);
      let printed = "";
      const lines = await runBatch(parsed.value, { stdout: (t) => { printed += t; } });
      const perRequest = checkTables(parseTables(printed), { numRequests: 3, numStages: 1, transfers: false });
      const outs = [...perRequest.values()].map(({ stage }) => Number(stage.rows.get("num_tokens_out")!.get("0"))).sort();
      const completion = lines.map((l) => (l.response!.body as { usage: { completion_tokens: number } }).usage.completion_tokens).sort();
      expect(outs).toEqual(completion);
      expect(completion).toEqual([40, 41, 42]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("bench serve against a speculating server", () => {
  test("prints vLLM's Speculative Decoding section from the /metrics deltas and saves its keys", async () => {
    const { mkdtempSync, readFileSync, readdirSync, rmSync } = await import("node:fs");
    const { join } = await import("node:path");
    const dir = mkdtempSync(join((await import("node:os")).tmpdir(), "fennec-spec-bench-"));
    // one request at a time: the default draft cap (k + 1 tokens over all decoding requests) drafts nothing while several
    // requests decode together, so with all 4 at once the draft count depended on how the requests overlapped
    const proc = Bun.spawnSync([process.execPath, "run", `${import.meta.dir}/../../src/cli.ts`, "bench", "serve", "--base-url", server.url, "--num-prompts", "4", "--max-concurrency", "1",
      "--random-input-len", "24", "--random-output-len", "48", "--ignore-eos", "--temperature", "0", "--save-result", "--result-dir", dir]);
    const text = proc.stdout.toString();
    expect(proc.exitCode).toBe(0);
    const lines = text.split("\n");
    const at = lines.indexOf("---------------Speculative Decoding---------------");
    expect(at).toBeGreaterThan(lines.findIndex((l) => l.includes("E2EL")));
    expect(lines[at + 1]).toMatch(/^Acceptance rate \(%\): {20} \d+\.\d\d/);
    // the closing rule comes after the section
    expect(lines.findIndex((l, i) => i > at && /^=+$/.test(l))).toBeGreaterThan(at + 6);
    const saved = JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]!), "utf8"));
    expect(saved.spec_decode_draft_tokens).toBeGreaterThan(0);
    expect(saved.spec_decode_accepted_tokens).toBeLessThanOrEqual(saved.spec_decode_draft_tokens);
    expect(saved.spec_decode_per_position_acceptance_rates).toHaveLength(K);
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);
});
