/**
 * Every `serve` flag of the FLAGS table (docs/vllm-flags.md) keeps its word. In process, for speed: each implemented
 * flag changes the typed config (none accepted and ignored), each accepted-no-effect flag logs its one line, each
 * refused flag stops start-up with one line naming it, and an accepted-for-some-values flag does both. Against the
 * binary, a representative subset: refused flags exit 2 with their name in the one line, inert ones serve and log,
 * --enable-tokenizer-info-endpoint serves GET /tokenizer_info, --override-generation-config's keys apply.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { FLAGS, type FlagSpec } from "../../src/command-line/flags.ts";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { serveConfig } from "../../src/command-line/serve-config.ts";
import { runServeExpectingExit, startServer, type ServerProcess } from "./server-process.ts";

const SERVE = FLAGS.filter((f) => f.commands.includes("serve"));
const servers: ServerProcess[] = [];
afterAll(async () => { for (const s of servers) await s.stop(); });

function configOf(args: readonly string[], env: Record<string, string> = {}) {
  const parsed = parseCommandArgs("serve", args);
  if (!parsed.ok) return parsed;
  return serveConfig(parsed.value, env);
}
const DEFAULT = configOf([]);
const json = (v: unknown): string => JSON.stringify(v);

/** Values for implemented flags whose value has a shape (JSON, paths, pairs); the rest get one from their kind. */
const SAMPLES: Readonly<Record<string, readonly string[]>> = {
  "kv-cache-dtype": ["--kv-cache-dtype", "fp8"],
  // the LoRA limits and modules need --enable-lora (any existing file passes the config's check; the engine reads it)
  "lora-modules": ["--enable-lora", "--lora-modules", `a=${import.meta.path}`],
  "max-loras": ["--enable-lora", "--max-loras", "2"],
  "max-lora-rank": ["--enable-lora", "--max-lora-rank", "32"],
  "max-cpu-loras": ["--enable-lora", "--max-cpu-loras", "3"],
  "kv-transfer-config": ["--kv-transfer-config", '{"kv_connector":"SimpleCPUOffloadConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":1000000}}'],
  "kv-offloading-backend": ["--kv-offloading-size", "1", "--kv-offloading-backend", "native"],
  runner: ["--runner", "pooling"],
  convert: ["--convert", "embed"],
  task: ["--task", "embed"],
  "pooler-config": ["--pooler-config", '{"pooling_type": "MEAN"}'],
  "structured-outputs-config": ["--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}'],
  "speculative-config": ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'],
  "spec-method": ["--spec-method", "ngram", "--spec-tokens", "3"],
  "spec-model": ["--spec-model", "/models/draft.gguf", "--spec-tokens", "3"],
  "spec-tokens": ["--spec-method", "suffix", "--spec-tokens", "5"],
  "generation-config": ["--generation-config", "vllm", "--override-generation-config", '{"top_k": 5}'],
  "override-generation-config": ["--override-generation-config", '{"temperature": 0.25}'],
  "kv-events-config": ["--kv-events-config", '{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:5557"}'],
  "hf-overrides": ["--runner", "pooling", "--hf-overrides", '{"is_matryoshka": true}'],
  "root-path": ["--root-path", "/api"],
  "limit-mm-per-prompt": ["--limit-mm-per-prompt", '{"image": 2}'],
  "enable-log-outputs": ["--enable-log-requests", "--enable-log-outputs"],
  "allowed-origins": ["--allowed-origins", '["https://a.example"]'],
  "allowed-methods": ["--allowed-methods", '["GET"]'],
  "allowed-headers": ["--allowed-headers", '["x-a"]'],
  "ssl-keyfile": ["--ssl-keyfile", "k.pem", "--ssl-certfile", "c.pem"],
  "ssl-certfile": ["--ssl-keyfile", "k.pem", "--ssl-certfile", "c.pem"],
  "ssl-ca-certs": ["--ssl-keyfile", "k.pem", "--ssl-certfile", "c.pem", "--ssl-ca-certs", "ca.pem"],
  "ssl-cert-reqs": ["--ssl-keyfile", "k.pem", "--ssl-certfile", "c.pem", "--ssl-ca-certs", "ca.pem", "--ssl-cert-reqs", "2"],
};
/** Implemented flags the typed serve config cannot show, with where their effect is tested. */
const ELSEWHERE: Readonly<Record<string, string>> = {
  revision: "resolved with the model argument before serve reads its config (test/hub tests)",
  "download-dir": "resolved with the model argument before serve reads its config (test/hub tests)",
  "hf-token": "resolved with the model argument before serve reads its config (test/hub tests)",
  "enable-prefix-caching": "vLLM's spelling of fennec's default (prefix caching on); --no-enable-prefix-caching turns it off",
  "otlp-traces-endpoint": "read by command-line/tracing-flags.ts beside the serve config (test/e2e/tracing.test.ts)",
  "collect-detailed-traces": "read by command-line/tracing-flags.ts beside the serve config (test/e2e/tracing.test.ts)",
  "enable-sleep-mode": "read when each model's engine starts (test/e2e/sleep-mode.test.ts)",
  models: "the model list of several-model serving (test/e2e/many-models.test.ts)",
  "max-loaded-models": "the model registry's budget (test/server/model-registry.test.ts, test/e2e/many-models.test.ts)",
  "max-loaded-memory": "the model registry's memory budget (maxMemoryBytes, test/server/model-registry.test.ts)",
  "keep-alive": "the model registry's idle unload (test/server/model-registry.test.ts, test/e2e/many-models.test.ts)",
};

function sampleArgs(f: FlagSpec): string[] {
  if (SAMPLES[f.name]) return [...SAMPLES[f.name]!];
  if (f.kind === "bool") return [`--${f.name}`];
  if (f.choices) return [`--${f.name}`, f.choices.find((c) => c !== f.default)!];
  if (f.kind === "int") return [`--${f.name}`, String((f.min ?? 1) + 3)];
  if (f.kind === "float") return [`--${f.name}`, String(f.max !== undefined ? f.max / 2 : 0.5)];
  return [`--${f.name}`, "x"];
}

/** For flags accepted at some values only: the values tried as "the value that changes nothing". */
const NEUTRAL = ["1", "0", "auto", "gguf", "mp", "raw_logprobs", "lazy"];
const refusedValue = (f: FlagSpec): string[] => (f.kind === "bool" ? [] : [f.kind === "int" ? "7" : f.kind === "float" ? "2.5" : "no-such-value"]);

describe("every serve flag of the FLAGS table (in process)", () => {
  test("the table holds vLLM's flags of the issue", () => {
    for (const name of ["async-scheduling", "prefix-caching-hash-algo", "enable-tokenizer-info-endpoint", "override-generation-config", "otlp-traces-endpoint", "kv-events-config", "mm-processor-kwargs", "api-server-count", "num-gpu-blocks-override"]) {
      expect(SERVE.some((f) => f.name === name)).toBe(true);
    }
  });

  test("implemented: each changes the serve config (none accepted and ignored)", () => {
    expect(DEFAULT.ok).toBe(true);
    const ignored: string[] = [];
    const failed: string[] = [];
    for (const f of SERVE.filter((s) => s.fate === undefined && !(s.name in ELSEWHERE) && s.name !== "model")) {
      const c = configOf(sampleArgs(f));
      if (!c.ok) failed.push(`${f.name}: ${c.error}`);
      else if (json(c.value) === json(DEFAULT.ok ? DEFAULT.value : null)) ignored.push(f.name);
    }
    expect(failed).toEqual([]);
    expect(ignored).toEqual([]);
  });

  test("accepted, no effect: one start-up line naming the flag and why", () => {
    const rows = SERVE.filter((f) => f.fate?.noop !== undefined && f.fate.accepts === undefined);
    expect(rows.length).toBeGreaterThan(20);
    for (const f of rows) {
      const args = f.kind === "bool" ? [`--${f.name}`] : [`--${f.name}`, f.kind === "list" ? "a" : f.kind === "string" ? "anything" : "3"];
      const c = configOf(args);
      expect(c.ok ? c.value.warnings.filter((w) => w.startsWith(`--${f.name}`) && w.includes(" has no effect on fennec: ")) : c.error).toHaveLength(1);
    }
  });

  test("accepted for some values: a neutral value logs one line, another is refused naming the flag", () => {
    const rows = SERVE.filter((f) => f.fate?.noop !== undefined && f.fate.accepts !== undefined);
    expect(rows.length).toBeGreaterThan(10);
    for (const f of rows) {
      const neutral = NEUTRAL.find((v) => configOf([`--${f.name}`, v]).ok);
      expect({ flag: f.name, neutral: neutral !== undefined }).toEqual({ flag: f.name, neutral: true });
      const ok = configOf([`--${f.name}`, neutral!]);
      expect(ok.ok && ok.value.warnings.some((w) => w.startsWith(`--${f.name} ${neutral} has no effect on fennec: `))).toBe(true);
      const bad = configOf([`--${f.name}`, ...refusedValue(f)]);
      expect(bad.ok ? `${f.name} accepted` : bad.error).toStartWith(`--${f.name} `);
      expect(bad.ok ? "" : bad.error).toContain(" is not supported: ");
    }
  });

  test("refused: one line naming the flag and what to use instead", () => {
    const rows = SERVE.filter((f) => f.fate !== undefined && f.fate.noop === undefined);
    expect(rows.length).toBeGreaterThan(30);
    for (const f of rows) {
      const c = configOf([`--${f.name}`, ...(f.kind === "bool" ? [] : [f.kind === "int" ? "2" : f.kind === "float" ? "1.5" : "x"])]);
      expect(c.ok ? `${f.name} accepted` : c.error).toMatch(new RegExp(`^--${f.name}( \\S+)? is not supported: \\S.{10,}`));
      expect(c.ok ? "" : c.error).not.toContain("\n");
    }
  });

  test("argparse's --no-X: a feature fennec lacks, turned off, is one no-effect line; an implemented flag takes it too", () => {
    const off = configOf(["--no-async-scheduling", "--no-enable-lora-bias"]);
    expect(off.ok && off.value.warnings.filter((w) => /^--no-(async-scheduling|enable-lora-bias) has no effect on fennec: /.test(w))).toHaveLength(2);
    const docs = configOf(["--disable-fastapi-docs", "--no-disable-fastapi-docs"]);
    expect(docs.ok && docs.value.server.disableDocs).toBe(false);
  });

  test("--prefix-caching-hash-algo is kept in the engine arguments; other algorithms are refused naming the choices", () => {
    for (const algo of ["sha256", "sha256_cbor"] as const) {
      const c = configOf(["--prefix-caching-hash-algo", algo]);
      expect(c.ok && c.value.engine.prefixCachingHashAlgo).toBe(algo);
    }
    const bad = configOf(["--prefix-caching-hash-algo", "xxhash"]);
    expect(bad.ok ? "" : bad.error).toBe("--prefix-caching-hash-algo xxhash is not available in fennec (vLLM takes it from the optional xxhash package); use sha256 or sha256_cbor");
    const unknown = configOf(["--prefix-caching-hash-algo", "builtin"]);
    expect(unknown.ok).toBe(false);
  });

  test("--override-generation-config: vLLM's keys apply, an unknown key is refused naming it", () => {
    const c = configOf(["--override-generation-config", '{"temperature": 0.3, "top_p": 0.9, "top_k": 7, "min_p": 0.1, "repetition_penalty": 1.2, "max_new_tokens": 12}']);
    expect(c.ok && c.value.server.generationDefaults).toEqual({ temperature: 0.3, top_p: 0.9, top_k: 7, min_p: 0.1, repetition_penalty: 1.2, max_new_tokens: 12 });
    const bad = configOf(["--override-generation-config", '{"foo": 1, "temperature": 0.5}']);
    expect(bad.ok ? "" : bad.error).toStartWith("--override-generation-config: unknown key foo (the keys vLLM applies: temperature,");
  });

  test("--enable-log-outputs needs --enable-log-requests, as vLLM's request logger logs the outputs", () => {
    const alone = configOf(["--enable-log-outputs"]);
    expect(alone.ok ? "" : alone.error).toStartWith("--enable-log-outputs needs --enable-log-requests");
    const both = configOf(["--enable-log-requests", "--enable-log-outputs"]);
    expect(both.ok && both.value.log.enableLogOutputs).toBe(true);
  });

  test("VLLM_LOGGING_LEVEL=DEBUG reaches the engine arguments (the engine thread's DEBUG lines)", () => {
    const debug = configOf([], { VLLM_LOGGING_LEVEL: "debug" });
    const info = configOf([], { VLLM_LOGGING_LEVEL: "INFO" });
    expect(debug.ok && debug.value.engine.debugLog).toBe(true);
    expect(info.ok && info.value.engine.debugLog).toBe(false);
  });
});

describe("against the binary", () => {
  const REFUSED = [["--enable-lora-bias"], ["--data-parallel-address", "10.0.0.1"], ["--scheduler-cls", "my.Scheduler"],
    ["--api-server-count", "4"], ["--logprobs-mode", "processed_logprobs"], ["--override-generation-config", '{"foo":1}']];
  for (const args of REFUSED) {
    test(`refused in one line, exit 2: ${args.join(" ")}`, async () => {
      const { code, output } = await runServeExpectingExit([...args, "--port", "0"]);
      expect(code).toBe(2);
      expect(output.trimEnd().split("\n")).toHaveLength(1);
      expect(output).toStartWith(`fennec: ${args[0]}`);
    }, 60_000);
  }

  test("inert flags serve and log one line each; --enable-tokenizer-info-endpoint serves GET /tokenizer_info", async () => {
    const inert = ["--async-scheduling", "--disable-cascade-attn", "--skip-mm-profiling", "--calculate-kv-scales", "--api-server-count", "1", "-dcp", "1"];
    const template = "{% for m in messages %}{{ m.content }}{% endfor %}";
    const server = await startServer(["--threads", "1", ...inert, "--enable-tokenizer-info-endpoint", "--prefix-caching-hash-algo", "sha256_cbor", "--chat-template", template]);
    servers.push(server);
    for (const flag of ["--async-scheduling", "--disable-cascade-attn", "--skip-mm-profiling", "--calculate-kv-scales", "--api-server-count 1", "--decode-context-parallel-size 1"]) {
      expect(server.log()).toContain(`${flag} has no effect on fennec: `);
    }
    const info = (await (await fetch(`${server.url}/tokenizer_info`)).json()) as Record<string, unknown>;
    expect(info.tokenizer_class).toBe("PreTrainedTokenizerFast");
    expect(typeof info.eos_token).toBe("string");
    expect(info.model_max_length).toBeGreaterThan(0);
    expect(info.chat_template).toBe(template);
    await server.stop();
    const off = await startServer(["--threads", "1"]);
    servers.push(off);
    expect((await fetch(`${off.url}/tokenizer_info`)).status).toBe(404);
    await off.stop();
  }, 90_000);

  test("--override-generation-config's max_new_tokens is the default max_tokens", async () => {
    const server = await startServer(["--threads", "1", "--override-generation-config", '{"max_new_tokens": 3, "temperature": 0}']);
    servers.push(server);
    const res = await fetch(`${server.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: "Once upon a time" }) });
    const body = (await res.json()) as { usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBeLessThanOrEqual(3);
    await server.stop();
  }, 60_000);

  test("fennec serve --root-path /api --disable-fastapi-docs: the start-up line names no docs page", async () => {
    const server = await startServer(["--threads", "1", "--root-path", "/api", "--disable-fastapi-docs"], { rootPath: "/api" });
    servers.push(server);
    const line = server.log().split("\n").find((l) => l.includes("[serve.ts] fennec "))!;
    expect(line).toContain("(chat and metrics at /api/)");
    expect(line).not.toContain("docs");
    await server.stop();
  }, 60_000);
});
