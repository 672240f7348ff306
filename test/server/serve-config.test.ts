// `fennec serve` flag checks that run before any model loads (vLLM's validate_parsed_serve_args and friends).
import { describe, expect, test } from "bun:test";
import { readServeConfig } from "../../src/commands/serve.ts";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { PER_REQUEST_METRICS_NEED_STATS, serveConfig } from "../../src/command-line/serve-config.ts";
import type { Options } from "../../src/command-line/flags.ts";
import { CliError } from "../../src/util/cli-error.ts";
import { engineConfig, type EngineUsage } from "../../src/command-line/engine-config.ts";
import { benchThroughputConfig } from "../../src/command-line/bench-config.ts";
import { runBatchConfig } from "../../src/command-line/run-batch-config.ts";

function options(argv: string[]) {
  const parsed = parseCommandArgs("serve", argv);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

/** the server and metrics parts of serve's typed config, side by side, with the model */
function readServeFlags(o: Options, env?: Readonly<Record<string, string | undefined>>) {
  const { config } = readServeConfig(o, env);
  return { model: config.model, ...config.server, ...config.metrics };
}
const engineArgsOf = (o: Options) => readServeConfig(o).config.engine;

describe("serve flags", () => {
  test("defaults: loopback, port 8000, features off", () => {
    const flags = readServeFlags(options([]));
    expect(flags).toMatchObject({ host: "127.0.0.1", port: 8000, apiKey: null, model: null, enablePerRequestMetrics: false, forceIncludeUsage: false });
  });

  test("VLLM_API_KEY is the key when --api-key is not given (vLLM); the flag wins", () => {
    expect(readServeFlags(options([]), { VLLM_API_KEY: "from-env" }).apiKey).toBe("from-env");
    expect(readServeFlags(options(["--api-key", "from-flag"]), { VLLM_API_KEY: "from-env" }).apiKey).toBe("from-flag");
    expect(readServeFlags(options([]), {}).apiKey).toBeNull();
    expect(readServeFlags(options([]), { VLLM_API_KEY: "" }).apiKey).toBeNull();
  });

  test("--enable-per-request-metrics with --disable-log-stats is refused with vLLM's message", () => {
    expect(() => readServeFlags(options(["--enable-per-request-metrics", "--disable-log-stats"]))).toThrow(new CliError(PER_REQUEST_METRICS_NEED_STATS));
    expect(PER_REQUEST_METRICS_NEED_STATS).toBe("Error: --enable-per-request-metrics requires engine statistics logging; remove --disable-log-stats to enable per-request metrics.");
    expect(readServeFlags(options(["--enable-per-request-metrics"])).enablePerRequestMetrics).toBe(true);
    expect(readServeFlags(options(["--enable-force-include-usage", "--disable-log-stats"])).forceIncludeUsage).toBe(true);
  });

  test.each([
    [["--port", "70000"], /--port must be in 0\.\.65535/],
    [["--api-key", ""], /--api-key must not be empty/],
    [["--served-model-name", ""], /--served-model-name must not be empty/],
  ])("%p is one line", (argv, message) => {
    expect(() => readServeFlags(options(argv))).toThrow(message);
  });

  test("the flags vLLM's own test servers pass are accepted (no-ops on fennec); a bad --dtype is one line", () => {
    const argv = ["--dtype", "bfloat16", "--max-model-len", "256", "--enforce-eager", "--max-num-seqs", "128", "--enable-chunked-prefill", "--show-hidden-metrics-for-version=0.1"];
    const parsed = parseCommandArgs("serve", argv);
    expect(parsed.ok).toBe(true);
    expect(engineArgsOf(options(argv))).toMatchObject({ maxModelLen: 256, maxNumSeqs: 128 });
    // each accepted no-op flag is one start-up line saying why it changes nothing (docs/vllm-flags.md)
    const config = serveConfig(options(argv));
    expect(config.ok ? config.value.warnings : []).toEqual([
      "--enforce-eager has no effect on fennec: there are no CUDA graphs, every step runs eagerly",
      "--enable-chunked-prefill has no effect on fennec: long prefills are always chunked to --max-num-batched-tokens",
      "--dtype bfloat16 has no effect on fennec: weights keep their GGUF types and activations are float32",
    ]);
    const bad = serveConfig(options(["--dtype", "int3"]));
    expect(bad.ok ? "" : bad.error).toBe("--dtype int3 is not supported: give auto, or convert the model to the GGUF type you want");
  });

  test("engine flags map to EngineArgs; bad values are one-line errors", () => {
    const args = engineArgsOf(options(["--max-model-len", "256", "--max-num-seqs", "4", "--threads", "2", "--no-enable-prefix-caching"]));
    expect(args).toMatchObject({ maxModelLen: 256, maxNumSeqs: 4, threads: 2, enablePrefixCaching: false, blockSize: 16, device: "cpu" });
    expect(() => engineArgsOf(options(["--max-num-seqs", "0"]))).toThrow(/--max-num-seqs must be a positive integer/);
    expect(() => engineArgsOf(options(["--max-model-len", "-1"]))).toThrow(/--max-model-len must be a positive integer/);
  });

  test("the step defaults are vLLM's on CPU for each command's usage context (OPENAI_API_SERVER, batch runner, LLM class)", () => {
    // serve: 2048 tokens and 128 sequences; the budget is marked defaulted (a bidirectional model raises it to max-model-len)
    expect(engineArgsOf(options([]))).toMatchObject({ maxNumBatchedTokens: 2048, maxNumSeqs: 128, maxNumBatchedTokensGiven: false });
    // a defaulted max-num-seqs is at most the given budget (vLLM: min(default, max_num_batched_tokens)); a given one is kept
    expect(engineArgsOf(options(["--max-num-batched-tokens", "64"]))).toMatchObject({ maxNumBatchedTokens: 64, maxNumSeqs: 64, maxNumBatchedTokensGiven: true });
    expect(engineArgsOf(options(["--max-num-batched-tokens", "64", "--max-num-seqs", "100"]))).toMatchObject({ maxNumBatchedTokens: 64, maxNumSeqs: 100 });
    const engineOf = (usage: EngineUsage, argv: string[] = []) => {
      const c = engineConfig(options(argv), {}, usage);
      if (!c.ok) throw new Error(c.error);
      return c.value.engine;
    };
    expect(engineOf("batch-runner")).toMatchObject({ maxNumBatchedTokens: 2048, maxNumSeqs: 128 });
    expect(engineOf("llm-class")).toMatchObject({ maxNumBatchedTokens: 4096, maxNumSeqs: 256 });
    expect(engineOf("llm-class", ["--max-num-seqs", "3"])).toMatchObject({ maxNumBatchedTokens: 4096, maxNumSeqs: 3 });
    // the commands pick their context: bench throughput / latency run vLLM's LLM class, run-batch the batch runner
    const bench = parseCommandArgs("bench throughput", []);
    if (!bench.ok) throw new Error(bench.error);
    const throughput = benchThroughputConfig(bench.value, {});
    expect(throughput.ok && [throughput.value.run.engine.maxNumBatchedTokens, throughput.value.run.engine.maxNumSeqs]).toEqual([4096, 256]);
    const batch = parseCommandArgs("run-batch", ["-i", "in.jsonl", "-o", "out.jsonl"]);
    if (!batch.ok) throw new Error(batch.error);
    const runBatch = runBatchConfig(batch.value, {});
    expect(runBatch.ok && [runBatch.value.engine.maxNumBatchedTokens, runBatch.value.engine.maxNumSeqs]).toEqual([2048, 128]);
  });

  test("sizes take vLLM's human-readable suffixes; --kv-cache-memory-bytes is vLLM's name for --kv-cache-memory", () => {
    const args = engineArgsOf(options(["--max-model-len", "2k", "--max-num-batched-tokens", "1K", "--kv-cache-memory", "25.6m"]));
    expect(args).toMatchObject({ maxModelLen: 2000, maxNumBatchedTokens: 1024, kvCacheMemoryBytes: 25_600_000 });
    expect(engineArgsOf(options(["--kv-cache-memory-bytes", "1G"])).kvCacheMemoryBytes).toBe(2 ** 30);
    expect(engineArgsOf(options(["--kv-cache-memory=3M"])).kvCacheMemoryBytes).toBe(3 * 2 ** 20);
    const binaryDecimal = parseCommandArgs("serve", ["--kv-cache-memory", "1.5G"]);
    expect(binaryDecimal.ok ? "" : binaryDecimal.error).toBe("--kv-cache-memory: decimals are not allowed with binary suffixes like G (got 1.5G); did you mean 1.5g?");
    for (const bad of ["2x", "k", "1e3k"]) expect(parseCommandArgs("serve", ["--max-model-len", bad]).ok).toBe(false);
    // flags without sizes keep plain integers
    expect(parseCommandArgs("serve", ["--max-num-seqs", "1k"]).ok).toBe(false);
  });
});
