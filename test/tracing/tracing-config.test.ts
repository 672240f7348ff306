/** --otlp-traces-endpoint / --collect-detailed-traces checked as vLLM checks them (vllm/config/observability.py, otel.py). */
import { describe, expect, test } from "bun:test";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { tracingFlags } from "../../src/command-line/tracing-flags.ts";
import { tracingConfig } from "../../src/config/tracing-config.ts";

const config = (endpoint: string | null, detailedTraces: string | null = null, protocol?: string) => tracingConfig({ endpoint, detailedTraces, protocol });

describe("tracing config", () => {
  test("no endpoint: tracing is off", () => {
    expect(config(null)).toEqual({ ok: true, value: null });
  });

  test.each([
    ["http://collector:4318", "http://collector:4318/v1/traces"],
    ["collector:4318", "http://collector:4318/v1/traces"],
    ["http://collector:4318/", "http://collector:4318/v1/traces"],
    ["https://otel.example/custom/traces", "https://otel.example/custom/traces"],
  ])("endpoint %s exports to %s", (endpoint, url) => {
    const c = config(endpoint);
    expect(c.ok && c.value?.tracesUrl).toBe(url);
  });

  test("detailed traces: vLLM's choices, one or a comma list; they need the endpoint (vLLM's message)", () => {
    const c = config("http://c:4318", "model,worker");
    expect(c.ok && c.value?.detailedTraces).toEqual(["model", "worker"]);
    expect(config("http://c:4318", "all").ok).toBe(true);
    expect(config(null, "model")).toEqual({ ok: false, error: "collect_detailed_traces requires `--otlp-traces-endpoint` to be set." });
    const bad = config("http://c:4318", "model,gpu");
    expect(!bad.ok && bad.error).toContain('invalid choice "gpu"');
  });

  test("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: http/protobuf works; grpc (vLLM's default) is refused naming what to use; anything else is vLLM's error", () => {
    expect(config("http://c:4318", null, "http/protobuf").ok).toBe(true);
    const grpc = config("http://c:4317", null, "grpc");
    expect(!grpc.ok && grpc.error).toContain("http/protobuf");
    expect(config("http://c:4318", null, "http/json")).toEqual({ ok: false, error: "Unsupported OTLP protocol 'http/json' is configured" });
  });

  test("a value that is not a URL, or not http(s): one line naming the flag", () => {
    const notUrl = config("http://[bad");
    expect(!notUrl.ok && notUrl.error).toContain("--otlp-traces-endpoint");
    const ftp = config("ftp://c:4318");
    expect(!ftp.ok && ftp.error).toContain("only http:// and https://");
  });

  test("the flags reach the config through serve's and proxy's command lines", () => {
    const serve = parseCommandArgs("serve", ["--otlp-traces-endpoint", "c:4318", "--collect-detailed-traces", "all"]);
    if (!serve.ok) throw new Error(serve.error);
    const c = tracingFlags(serve.value, {});
    expect(c.ok && c.value).toEqual({ tracesUrl: "http://c:4318/v1/traces", endpoint: "c:4318", detailedTraces: ["all"] });
    const proxy = parseCommandArgs("proxy", ["--prefill", "p:1", "--decode", "d:2", "--otlp-traces-endpoint", "c:4318"]);
    if (!proxy.ok) throw new Error(proxy.error);
    const p = tracingFlags(proxy.value, { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "grpc" });
    expect(p.ok).toBe(false);
  });
});
