/**
 * vLLM's serving-example command lines (docs.vllm.ai "OpenAI-compatible server", the Helm chart and production-stack
 * values, the quickstart) against the real server process (the compiled binary when it is fresh): with the model as a
 * positional GGUF path, each either serves (and logs one line per flag that changes nothing) or refuses with the
 * documented one-line reason and exit code 2. docs/vllm-flags.md must name every flag of the fate table.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { FLAGS } from "../../src/command-line/flags.ts";
import { runServeExpectingExit, startServer, type ServerProcess } from "./server-process.ts";

const ROOT = join(import.meta.dir, "..", "..");
// the default model as a file, the way a deployment passes a model path (build.ts writes it)
const MODEL = join(ROOT, "build", "default-model.gguf");
const dir = mkdtempSync(join(tmpdir(), "fennec-vllm-cli-"));
const servers: ServerProcess[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Serves {
  readonly name: string;
  readonly args: readonly string[];
  /** the name(s) /v1/models must list */
  readonly models: readonly string[];
  readonly apiKey?: string;
  /** flags that must each have logged their one no-effect line */
  readonly noops: readonly string[];
}

const SERVES: readonly Serves[] = [
  // quickstart: `vllm serve Qwen/Qwen2.5-1.5B-Instruct --dtype auto --api-key token-abc123`
  { name: "quickstart with --dtype auto and --api-key", args: [MODEL, "--dtype", "auto", "--api-key", "token-abc123"], models: [MODEL], apiKey: "token-abc123", noops: ["--dtype auto"] },
  // ... served under the model argument as given, as vLLM's served_model_name defaults to `model`
  // Helm chart / production-stack values: positional model, single GPU, the usual memory and batch knobs
  {
    name: "helm chart values",
    args: [MODEL, "--host", "127.0.0.1", "--tensor-parallel-size", "1", "--gpu-memory-utilization", "0.05", "--max-model-len", "256", "--max-num-seqs", "8",
      "--enable-prefix-caching", "--trust-remote-code", "--enforce-eager", "--swap-space", "4", "--served-model-name", "llama", "llama-8b", "--disable-log-requests", "--seed", "0"],
    models: ["llama", "llama-8b"], noops: ["--tensor-parallel-size 1", "--trust-remote-code", "--enforce-eager", "--swap-space 4"],
  },
  // `vllm serve MODEL -tp 1 -pp 1 --load-format auto --uvicorn-log-level warning --disable-uvicorn-access-log`
  { name: "short options and log flags", args: [MODEL, "-tp", "1", "-pp", "1", "--load-format", "auto", "--uvicorn-log-level", "warning", "--disable-uvicorn-access-log", "--max-logprobs", "5", "--generation-config", "vllm"], models: [MODEL], noops: ["--tensor-parallel-size 1", "--pipeline-parallel-size 1", "--load-format auto"] },
];

interface Refuses {
  readonly name: string;
  readonly args: readonly string[];
  readonly says: string;
}

const REFUSES: readonly Refuses[] = [
  { name: "tensor parallelism over 4 GPUs", args: [MODEL, "--tensor-parallel-size", "4"], says: "--tensor-parallel-size 4 is not supported: fennec runs on one machine: use --threads" },
  { name: "safetensors weights", args: [MODEL, "--load-format", "safetensors"], says: "--load-format safetensors is not supported: convert the model to GGUF" },
  { name: "a LoRA adapter that is not there", args: [MODEL, "--enable-lora", "--lora-modules", "sql=/adapters/sql"], says: "--lora-modules sql: no adapter file at /adapters/sql" },
  { name: "a classification task", args: [MODEL, "--task", "classify"], says: "--task classify is not supported: fennec serves text generation and embeddings" },
  { name: "an unknown flag", args: [MODEL, "--no-such-vllm-flag"], says: "unknown option --no-such-vllm-flag" },
];

describe("vLLM's serving command lines", () => {
  for (const row of SERVES) {
    test(`serves: ${row.name}`, async () => {
      const server = await startServer(row.args);
      servers.push(server);
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: row.apiKey ?? "none", maxRetries: 0 });
      expect((await client.models.list()).data.map((m) => m.id)).toEqual([...row.models]);
      const answer = await client.completions.create({ model: row.models.at(-1)!, prompt: "Once upon a time", max_tokens: 4 });
      expect(answer.model).toBe(row.models[0]!);
      expect(answer.usage!.completion_tokens).toBe(4);
      // every name retrieves its card (OpenAI's models.retrieve); the first labels the metrics, as vLLM's model_name
      for (const id of row.models) expect((await client.models.retrieve(id)).id).toBe(id);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(metrics).toContain(`vllm:num_requests_running{model_name="${row.models[0]}"`);
      for (const other of row.models.slice(1)) expect(metrics).not.toContain(`model_name="${other}"`);
      const log = server.log();
      for (const flag of row.noops) expect(log).toMatch(new RegExp(`^WARNING \\d{2}-\\d{2} [\\d:]{8} \\[serve\\.ts\\] ${flag.replace(/[-.]/g, "\\$&")} has no effect on fennec: `, "m"));
      await server.stop();
    }, 60_000);
  }

  for (const row of REFUSES) {
    test(`refuses in one line, exit 2: ${row.name}`, async () => {
      const { code, output } = await runServeExpectingExit([...row.args, "--port", "0"]);
      expect(code).toBe(2);
      expect(output.trimEnd().split("\n")).toHaveLength(1);
      expect(output).toStartWith("fennec: ");
      expect(output).toContain(row.says);
    }, 60_000);
  }

  test("--config FILE (YAML, as vLLM): its flags apply, the command line wins", async () => {
    const file = join(dir, "config.yaml");
    writeFileSync(file, `model: ${MODEL}\nserved_model_name: from-config\nmax-num-seqs: 4\napi-key: [k1, k2]\ntrust-remote-code: true\n`);
    const server = await startServer(["--config", file, "--served-model-name", "from-cli"]);
    servers.push(server);
    const models = await fetch(`${server.url}/v1/models`, { headers: { authorization: "Bearer k2" } });
    expect(models.status).toBe(200);
    expect(((await models.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toEqual(["from-cli"]);
    expect((await fetch(`${server.url}/v1/models`)).status).toBe(401);
    expect(server.log()).toContain("--trust-remote-code has no effect on fennec");
    await server.stop();
  }, 60_000);

  test("--seed: requests without a seed repeat across restarts with the same server seed", async () => {
    const sample = async (seed: string): Promise<string[]> => {
      const server = await startServer([MODEL, "--seed", seed, "--max-num-seqs", "1"]);
      servers.push(server);
      const texts: string[] = [];
      // one after the other: the engine's stream of fallback seeds is consumed in arrival order
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${server.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 16, temperature: 1 }) });
        texts.push(((await res.json()) as { choices: { text: string }[] }).choices[0]!.text);
      }
      await server.stop();
      return texts;
    };
    const first = await sample("7");
    expect(await sample("7")).toEqual(first);
    expect(await sample("8")).not.toEqual(first);
  }, 90_000);

  test("--root-path: routes answer under the prefix and without it; the OpenAPI document names it", async () => {
    const server = await startServer([MODEL, "--root-path", "/llm/"], { rootPath: "/llm" });
    servers.push(server);
    const base = server.url.replace(/\/llm$/, "");
    expect((await fetch(`${base}/llm/v1/models`)).status).toBe(200);
    expect((await fetch(`${base}/v1/models`)).status).toBe(200);
    const doc = (await (await fetch(`${base}/llm/openapi.json`)).json()) as { servers?: { url: string }[] };
    expect(doc.servers).toEqual([{ url: "/llm" }]);
    expect(await (await fetch(`${base}/llm/docs`)).text()).toContain("/llm/docs/assets/swagger-ui-bundle.js");
    await Bun.sleep(200);
    // the access line shows the path the client sent
    expect(server.log()).toContain('"GET /llm/v1/models HTTP/1.1" 200 OK');
    await server.stop();
  }, 60_000);

  test("no stack trace unless VLLM_LOGGING_LEVEL=DEBUG", () => {
    const run = (env: Record<string, string>) => Bun.spawnSync([process.execPath, join(ROOT, "src", "cli.ts"), "serve", "/nonexistent/model.gguf", "--port", "0"], { env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
    const plain = run({});
    expect(plain.exitCode).toBe(1);
    expect(plain.stderr.toString().trimEnd().split("\n")).toEqual([expect.stringContaining("/nonexistent/model.gguf: file not found")]);
    const debug = run({ VLLM_LOGGING_LEVEL: "DEBUG" });
    expect(debug.exitCode).toBe(1);
    expect(debug.stderr.toString()).toMatch(/\n\s+at /);
  }, 60_000);

  // the vLLM flags of the list, implemented, and every flag with a fate (accepted or refused)
  const NAMED = ["model", "served-model-name", "api-key", "seed", "max-logprobs", "generation-config", "override-generation-config", "gpu-memory-utilization",
    "enable-prefix-caching", "uvicorn-log-level", "disable-uvicorn-access-log", "enable-log-requests", "disable-log-requests", "root-path", "allowed-origins",
    "allowed-methods", "allowed-headers", "allow-credentials", "ssl-keyfile", "ssl-certfile", "ssl-ca-certs", "ssl-cert-reqs", "uds", "disable-fastapi-docs", "max-model-len",
    "max-num-seqs", "max-num-batched-tokens", "block-size", "kv-cache-memory", "disable-log-stats"];
  test("docs/vllm-flags.md names every vLLM flag with its fate", () => {
    const doc = readFileSync(join(ROOT, "docs", "vllm-flags.md"), "utf8");
    const serve = FLAGS.filter((f) => f.commands.includes("serve"));
    expect(NAMED.filter((n) => !serve.some((f) => f.name === n))).toEqual([]);
    const missing = serve.filter((f) => f.fate !== undefined || NAMED.includes(f.name)).filter((f) => {
      const row = doc.split("\n").find((l) => l.startsWith(`| \`--${f.name}\``));
      if (row === undefined) return true;
      const fate = f.fate === undefined ? "implemented" : f.fate.noop === undefined ? "refused" : "accepted";
      return !row.split("|")[2]!.includes(fate);
    }).map((f) => f.name);
    // a new serve flag: run `npx bun run scripts/vllm-flags-doc.ts`
    expect(missing).toEqual([]);
  });
});
